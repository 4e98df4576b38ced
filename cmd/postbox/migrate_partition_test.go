package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// postbox migrate --partitioned converts an outbox with events to a
// partitioned one, keeping them; run again it says so and changes nothing
// (the stored interval is kept unless --partition-interval is given).
// An interval under a minute is a usage error naming the flag.
func TestMigratePartitioned(t *testing.T) {
	s, db := schemaStore(t)
	sent := enqueueN(t, s, 10)
	out := runOK(t, append([]string{"migrate", "--partitioned", "--partition-interval", "1h"}, db...)...)
	if !strings.Contains(out, "outbox partitioned by id, one partition per 1h0m0s: 10 unfinished events moved") || !strings.Contains(out, "partitions created: outbox_events_p") {
		t.Fatalf("migrate --partitioned said:\n%s", out)
	}
	var kind string
	if err := s.Pool().QueryRow(context.Background(), "select relkind::text from pg_class where oid = $1::regclass", s.Table("outbox_events")).Scan(&kind); err != nil || kind != "p" {
		t.Fatalf("outbox_events relkind %q, %v; want p (partitioned)", kind, err)
	}
	for _, e := range sent {
		if r, err := s.Get(context.Background(), e.ID); err != nil || r.Status != store.StatusPending {
			t.Fatalf("event after the conversion: %+v, %v", r, err)
		}
	}
	// Run again without --partition-interval: the stored one is kept.
	out = runOK(t, append([]string{"migrate", "--partitioned"}, db...)...)
	if !strings.Contains(out, "outbox already partitioned; interval 1h0m0s") {
		t.Fatalf("second migrate --partitioned said:\n%s", out)
	}
	if ms := storedInterval(t, s); ms != time.Hour.Milliseconds() {
		t.Fatalf("stored interval after a second migrate --partitioned: %d ms, want 1h kept", ms)
	}
	out = runOK(t, append([]string{"migrate", "--partitioned", "--partition-interval", "2h"}, db...)...)
	if !strings.Contains(out, "outbox already partitioned; interval 2h0m0s") || storedInterval(t, s) != (2*time.Hour).Milliseconds() {
		t.Fatalf("migrate --partitioned --partition-interval 2h said:\n%s\nstored %d ms, want 2h", out, storedInterval(t, s))
	}
	last := runFailsWith(t, command(append([]string{"migrate", "--partitioned", "--partition-interval", "30s"}, db...)...), 2)
	if !strings.Contains(last, "--partition-interval") {
		t.Fatalf("migrate --partition-interval 30s: %q, want the flag named", last)
	}
}

// storedInterval is the partition interval s's schema holds, in ms.
func storedInterval(t *testing.T, s *postgres.Store) int64 {
	t.Helper()
	var ms int64
	if err := s.Pool().QueryRow(context.Background(), "select interval_ms from "+s.Table("outbox_partitioning")).Scan(&ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// migrate --partitioned on SQLite is a usage error before anything is
// opened or migrated: no database file is created.
func TestMigratePartitionedRefusesSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "postbox.db")
	out := runFailsWith(t, command("migrate", "--partitioned", "--db", "sqlite:"+path), 2)
	if !strings.Contains(out, "--partitioned is for PostgreSQL") {
		t.Fatalf("migrate --partitioned on SQLite: %q, want refused naming PostgreSQL", out)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("migrate --partitioned on SQLite left %s (%v): want refused before migrating", path, err)
	}
}
