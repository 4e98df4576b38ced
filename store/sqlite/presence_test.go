package sqlite_test

import (
	"testing"

	"github.com/postbox-go/postbox/postboxtest/storetest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

func TestPresenceConformance(t *testing.T) {
	storetest.RunPresence(t, func(t *testing.T) store.Presence { return newStore(t, sqlite.Config{TablePrefix: "pb_"}) })
}
