package postgres_test

import (
	"testing"

	"github.com/postbox-go/postbox/internal/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/storetest"
)

// The suite claims in ordered mode too, which needs MigrateOrdered.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Outbox { return pgtest.OrderedStore(t) })
}
