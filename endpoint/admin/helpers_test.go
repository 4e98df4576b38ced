package admin_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/nats"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// bothStores runs test on a migrated PostgreSQL schema and on a migrated
// SQLite file.
func bothStores(t *testing.T, test func(t *testing.T, s store.Endpoints)) {
	t.Run("postgres", func(t *testing.T) { test(t, pgtest.Store(t).Driver()) })
	t.Run("sqlite", func(t *testing.T) { test(t, sqliteStore(t)) })
}

// sqliteStore is a migrated SQLite store in the test's directory.
func sqliteStore(t testing.TB) store.Endpoints {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "postbox.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s.Driver()
}

// newKeyring is a keyring of a new key.
func newKeyring(t testing.TB) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(keyring.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newAdmin is an Admin of s with a new keyring and NATS endpoints, which
// may be given allow_private (as the command line's), tweaked.
func newAdmin(t testing.TB, s store.Endpoints, tweak func(*admin.Config)) *admin.Admin {
	t.Helper()
	cfg := admin.Config{Store: s, Keyring: newKeyring(t), Kinds: []sink.URLKind{nats.URL}, PrivateEndpoints: true}
	if tweak != nil {
		tweak(&cfg)
	}
	a, err := admin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fieldError returns err as a *FieldError, failing t when it is not one
// (or not an ErrInvalid).
func fieldError(t *testing.T, err error) *admin.FieldError {
	t.Helper()
	fe, ok := err.(*admin.FieldError)
	if !ok {
		t.Fatalf("error %v (%T): want an *admin.FieldError", err, err)
	}
	if !errorsIsInvalid(err) {
		t.Errorf("FieldError %q is not admin.ErrInvalid", fe.Message)
	}
	return fe
}
