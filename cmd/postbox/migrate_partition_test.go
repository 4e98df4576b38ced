package main_test

import (
	"context"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/store"
)

// postbox migrate --partitioned converts an outbox with events to a
// partitioned one, keeping them; run again it says so and changes nothing.
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
	out = runOK(t, append([]string{"migrate", "--partitioned"}, db...)...)
	if !strings.Contains(out, "outbox already partitioned; interval 24h0m0s") {
		t.Fatalf("second migrate --partitioned said:\n%s", out)
	}
	last := runFailsWith(t, command(append([]string{"migrate", "--partitioned", "--partition-interval", "30s"}, db...)...), 2)
	if !strings.Contains(last, "--partition-interval") {
		t.Fatalf("migrate --partition-interval 30s: %q, want the flag named", last)
	}
}
