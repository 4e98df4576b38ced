package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/postbox-go/postbox/store/postgres"
)

// WAL returns the WAL stream of s (postgres.WAL, its default slot and
// publication), dropped when t ends: a slot left behind would keep the
// server's WAL forever. s must be on a server with wal_level = logical
// (LogicalStore): on another, WAL fails the test, saying so.
func WAL(t testing.TB, s *postgres.Store) *postgres.WAL {
	t.Helper()
	return WALWith(t, s, postgres.WALConfig{})
}

// WALWith is WAL with the slot and publication of cfg.
func WALWith(t testing.TB, s *postgres.Store, cfg postgres.WALConfig) *postgres.WAL {
	t.Helper()
	w, err := s.WAL(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Check(context.Background()); err != nil {
		t.Fatalf("pgtest: the WAL tests need a server with wal_level = logical (LogicalStore): %v", err)
	}
	t.Cleanup(func() {
		// The relays stopped; their replication connections may take a
		// moment to end on the server.
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := w.Drop(context.Background())
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("pgtest: drop the slot %s: %v", w.Slot(), err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return w
}

// LogicalDatabase creates a database on the cluster with wal_level =
// logical (LogicalURL) and returns its URL; it is dropped when t ends.
// Replication slots are the server's, not a database's: tests of what
// keeps two databases' slots apart need two databases.
func LogicalDatabase(t testing.TB) string {
	t.Helper()
	return DatabaseAt(t, LogicalURL(t))
}
