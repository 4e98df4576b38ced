package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/relay"
)

// A delivery that takes longer than the lease keeps its lease: a second
// relay does not take the event over and deliver it again.
func TestLeaseIsRenewedWhileDeliveryRuns(t *testing.T) {
	// Not parallel: its 300 ms leases must be renewed in time, which the
	// load of tests run beside it may delay.
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		time.Sleep(1500 * time.Millisecond)
		return 0
	})
	lease := 300 * time.Millisecond
	for range 2 {
		start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 10*time.Second), Lease: lease, PollInterval: 20 * time.Millisecond})
	}
	e := ev("1", 1)
	if err := s.Enqueue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	rcv.WaitAccepted(t, 1, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	if n := rcv.Attempts(e.ID.String()); n != 1 {
		t.Fatalf("event delivered %d times while its first delivery was running", n)
	}
	if r := record(t, s, e.ID); r.Attempts != 1 || r.Status != "done" {
		t.Fatalf("record after a long delivery: status %s attempts %d", r.Status, r.Attempts)
	}
}

// When the listening connection is killed (a database restart, a failover)
// the relay reconnects and is woken by notifications again.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, nil)
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), PollInterval: time.Hour})
	ctx := context.Background()
	if err := s.Enqueue(ctx, ev("1", 1)); err != nil {
		t.Fatal(err)
	}
	rcv.WaitAccepted(t, 1, 5*time.Second)
	// The listening connection's last statement is its LISTEN or a doze
	// statement; both name the channel.
	channel := "%postbox_" + s.Schema() + "%"
	listening := func() bool {
		var n int
		_ = s.Pool().QueryRow(ctx, "select count(*) from pg_stat_activity where query like $1", channel).Scan(&n)
		return n == 1
	}
	waitFor(t, "the relay to listen", 10*time.Second, listening)
	var killed bool
	err := s.Pool().QueryRow(ctx, "select pg_terminate_backend(pid) from pg_stat_activity where query like $1", channel).Scan(&killed)
	if err != nil || !killed {
		t.Fatalf("could not terminate the listening connection: %v", err)
	}
	// The terminated backend may linger in pg_stat_activity for a moment;
	// events committed before the new LISTEN are found by the claim the
	// relay makes as soon as it listens again.
	waitFor(t, "the relay to listen again", 10*time.Second, listening)
	if err := s.Enqueue(ctx, ev("1", 2)); err != nil {
		t.Fatal(err)
	}
	rcv.WaitAccepted(t, 2, 5*time.Second)
}

// Without LISTEN (connection poolers) the relay finds events by polling.
func TestPollOnlyMode(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, nil)
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), DisableListen: true, PollInterval: 50 * time.Millisecond})
	for i := range 3 {
		if err := s.Enqueue(context.Background(), ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	rcv.WaitAccepted(t, 3, 5*time.Second)
	var listeners int
	_ = s.Pool().QueryRow(context.Background(), "select count(*) from pg_stat_activity where query like 'listen %' and query like '%' || $1 || '%'", s.Schema()).Scan(&listeners)
	if listeners != 0 {
		t.Fatalf("%d LISTEN connections with listening disabled", listeners)
	}
}

// Producers committing at the same time while the relay dozes or claims
// on its own: the relay finds every event without waiting for its poll.
func TestConcurrentCommitsWakeTheRelay(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, nil)
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), PollInterval: time.Hour})
	const producers, each = 8, 40
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				if err := s.Enqueue(context.Background(), ev(fmt.Sprint(p), i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rcv.WaitAccepted(t, producers*each, 10*time.Second)
}
