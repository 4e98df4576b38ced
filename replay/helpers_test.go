package replay_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// outbox is a store's driver: its outbox (with its history) and its
// endpoints.
type outbox interface {
	store.Outbox
	store.Endpoints
}

// bothStores runs test on a fresh PostgreSQL schema and on a migrated
// SQLite file.
func bothStores(t *testing.T, test func(t *testing.T, s outbox)) {
	t.Run("postgres", func(t *testing.T) { test(t, pgtest.Store(t).Driver()) })
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "postbox.db"), sqlite.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		test(t, s.Driver())
	})
}

// newEvents makes n events: the i-th of type types[i%len(types)], of
// aggregate order/i, its payload {"n": i}.
func newEvents(n int, types ...string) []postbox.Event {
	events := make([]postbox.Event, n)
	for i := range events {
		events[i] = postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: fmt.Sprint(i),
			EventType: types[i%len(types)], Payload: []byte(fmt.Sprintf(`{"n": %d}`, i)),
			Headers: map[string]string{"tenant": "acme"}}
	}
	return events
}

// deliverKept writes events into s and runs a relay that delivers them to
// a new receiver and keeps them, marked done (Retention); it returns once
// each is delivered and done, the relay still running (it delivers the
// replays too).
func deliverKept(t *testing.T, s store.Outbox, events []postbox.Event) (*receiver.Receiver, *relaytest.Running) {
	t.Helper()
	rcv := receiver.New(t, secret, nil)
	running := startRelay(t, s, rcv)
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	rcv.WaitAccepted(t, len(events), 30*time.Second)
	waitDone(t, s, len(events))
	return rcv, running
}

// startRelay runs a relay over s that delivers to rcv and keeps delivered
// events, marked done, for an hour.
func startRelay(t *testing.T, s store.Outbox, rcv *receiver.Receiver) *relaytest.Running {
	t.Helper()
	hook, err := webhook.New(webhook.Config{URL: rcv.URL, Secrets: []string{secret}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return relaytest.Start(t, relay.Config{Store: s, Sink: hook, Retention: time.Hour, PollInterval: 50 * time.Millisecond, Logger: testlog.New(t)})
}

// waitDone waits until the outbox holds n done events and none
// unfinished.
func waitDone(t *testing.T, s store.Outbox, n int) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%d events done, none pending", n), func() bool {
		st, err := s.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st.Done == int64(n) && st.Pending == 0 && st.Processing == 0 && st.Failed == 0
	})
}

// waitFor polls cond until it holds, failing t after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replays counts the deliveries rcv accepted with the replay header
// name, by event id.
func replays(rcv *receiver.Receiver, name string) map[string]int {
	got := map[string]int{}
	for _, d := range rcv.Accepted() {
		if d.Header.Get(postbox.HeaderReplay) == name {
			got[d.ID]++
		}
	}
	return got
}

// firstDeliveries counts the deliveries rcv accepted without the replay
// header, by event id.
func firstDeliveries(rcv *receiver.Receiver) map[string]int {
	got := map[string]int{}
	for _, d := range rcv.Accepted() {
		if d.Header.Get(postbox.HeaderReplay) == "" {
			got[d.ID]++
		}
	}
	return got
}

// idSet is the ids of events as webhook-ids.
func idSet(events []postbox.Event) map[string]bool {
	out := map[string]bool{}
	for _, e := range events {
		out[e.ID.String()] = true
	}
	return out
}

// onceEach fails t unless got has each id of want exactly once, and no
// other.
func onceEach(t *testing.T, what string, got map[string]int, want map[string]bool) {
	t.Helper()
	for id, n := range got {
		if !want[id] || n != 1 {
			t.Fatalf("%s: %s delivered %d times (wanted: %v)", what, id, n, want[id])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d events delivered, want %d", what, len(got), len(want))
	}
}

// startLanes runs the endpoints' deliveries of s (the endpoint
// supervisor) until the test ends.
func startLanes(t *testing.T, s store.Endpoints) {
	t.Helper()
	k, err := keyring.Parse(keyring.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	sup, err := endpoint.New(endpoint.SupervisorConfig{
		Store: s, Keyring: k, Logger: testlog.New(t),
		Relay:        relay.Config{Lease: 5 * time.Second, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, ShutdownTimeout: 2 * time.Second},
		Webhook:      webhook.Config{Timeout: 10 * time.Second},
		PollInterval: 50 * time.Millisecond, RefreshEvery: 100 * time.Millisecond, AttemptsFlush: 20 * time.Millisecond,
		KeepDelivered: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := sup.Run(ctx); err != nil {
			t.Errorf("supervisor: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// ids are the ids of events.
func ids(events []store.HistoryEvent) []uuid.UUID {
	out := make([]uuid.UUID, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}
