package observe_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/postbox-go/postbox/observe"
)

func TestWALSlotCollector(t *testing.T) {
	var retained int64 = 4096
	exists := true
	var readErr error
	c := observe.NewWALSlotCollector("postbox_public", func(context.Context) (int64, bool, bool, error) {
		return retained, false, exists, readErr
	})
	want := `
# HELP postbox_wal_slot_retained_bytes WAL retained by the relay's replication slot (WAL mode), in bytes: from the position it last confirmed to the server's current one.
# TYPE postbox_wal_slot_retained_bytes gauge
postbox_wal_slot_retained_bytes{slot="postbox_public"} 4096
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "postbox_wal_slot_retained_bytes"); err != nil {
		t.Fatal(err)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP postbox_wal_slot_active 1 while a relay streams the replication slot (WAL mode), 0 otherwise.
# TYPE postbox_wal_slot_active gauge
postbox_wal_slot_active{slot="postbox_public"} 0
`), "postbox_wal_slot_active"); err != nil {
		t.Fatal(err)
	}
	exists = false
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("%d series without a slot, want none", n)
	}
	readErr = errors.New("connection refused")
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("gather with an unreadable slot: %v, want the error", err)
	}
}
