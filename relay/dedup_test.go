package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store"
)

// Every settle carries Config.DedupWindow to the store: 24 h by default,
// the value set, and zero (keys free once their row is gone) when it is
// negative.
func TestSettlePassesTheDedupWindow(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		set, wants time.Duration
	}{
		{"default", 0, relay.DedupWindowDefault},
		{"set", 90 * time.Minute, 90 * time.Minute},
		{"negative", -1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newRowStore(pgtest.Store(t).Driver())
			rcv := receiver.New(t, secret, nil)
			stop := start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), DedupWindow: c.set,
				PollInterval: 20 * time.Millisecond})
			for i := range 3 {
				if err := s.Enqueue(context.Background(), ev("agg", i)); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "3 events delivered", 10*time.Second, func() bool { return stats(t, s).Done == 3 })
			stop()
			settles := s.settlesSeen()
			if len(settles) == 0 {
				t.Fatal("no settle recorded")
			}
			for _, p := range settles {
				if p.DedupWindow != c.wants {
					t.Fatalf("SettleParams.DedupWindow %v, want %v", p.DedupWindow, c.wants)
				}
			}
		})
	}
	if relay.DedupWindowDefault < 24*time.Hour {
		t.Fatalf("DedupWindowDefault %v, want at least 24h", relay.DedupWindowDefault)
	}
}

// A relay with a dedup window removes the keys whose hold has ended, with
// no Retention set: the table of held keys does not grow for ever. It
// deletes no delivered event: without a positive Retention those are kept
// by another relay (or for ever).
func TestRelayPurgesExpiredHeldKeys(t *testing.T) {
	t.Parallel()
	for name, retention := range map[string]time.Duration{"no retention": 0, "kept for ever": -1} {
		t.Run(name, func(t *testing.T) { testRelayPurgesExpiredHeldKeys(t, retention) })
	}
}

func testRelayPurgesExpiredHeldKeys(t *testing.T, retention time.Duration) {
	s := pgtest.Store(t).Driver()
	ctx := context.Background()
	kept := "insert into " + s.Schema() + ".outbox_events (event_type, payload, status, processed_at) values ('order.created', '{}', 'done', now() - interval '1 hour')"
	if _, err := s.Pool().Exec(ctx, kept); err != nil {
		t.Fatal(err)
	}
	held := "insert into " + s.Schema() + ".outbox_held_keys (dedup_key, expires_at) values ($1, $2)"
	for key, expires := range map[string]time.Time{"gone": time.Now().Add(-time.Minute), "kept": time.Now().Add(time.Hour)} {
		if _, err := s.Pool().Exec(ctx, held, key, expires); err != nil {
			t.Fatal(err)
		}
	}
	rcv := receiver.New(t, secret, nil)
	_, stop := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), PollInterval: 20 * time.Millisecond, Retention: retention})
	defer stop()
	keys := func() (n int) {
		if err := s.Pool().QueryRow(ctx, "select count(*) from "+s.Schema()+".outbox_held_keys").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, "the expired key purged", 10*time.Second, func() bool { return keys() == 1 })
	if done := stats(t, s).Done; done != 1 {
		t.Fatalf("%d delivered events left after the purge, want the 1 kept", done)
	}
}

var _ store.Outbox = (*rowStore)(nil)
