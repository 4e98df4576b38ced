package postgres_test

import (
	"testing"

	"github.com/postbox-go/postbox/internal/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/storetest"
)

func TestPresenceConformance(t *testing.T) {
	storetest.RunPresence(t, func(t *testing.T) store.Presence { return pgtest.Store(t) })
}
