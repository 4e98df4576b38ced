package postgres_test

import (
	"testing"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/storetest"
	"github.com/postbox-go/postbox/store"
)

func TestPresenceConformance(t *testing.T) {
	storetest.RunPresence(t, func(t *testing.T) store.Presence { return pgtest.Store(t) })
}
