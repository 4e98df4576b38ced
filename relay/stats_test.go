package relay_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// faultyStore is a PostgreSQL store whose claims and settles fail, and
// whose leases are taken over, when a test asks.
type faultyStore struct {
	*postgres.Driver
	// reclaiming is held by every reclaim, so that a take-over is not
	// interleaved with the relay's own reclaim.
	reclaiming sync.Mutex
	// failClaims: every claim fails while it is set.
	failClaims atomic.Bool
	// failSettles: so many settles fail before the store settles again.
	failSettles atomic.Int32
	// takeOver: the next lease renewal finds the relay's leases expired
	// and reclaimed by another relay.
	takeOver atomic.Bool
}

var errInjected = errors.New("injected failure")

func (s *faultyStore) Claim(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error) {
	if s.failClaims.Load() {
		return nil, errInjected
	}
	return s.Driver.Claim(ctx, p)
}

func (s *faultyStore) Settle(ctx context.Context, p store.SettleParams) error {
	if s.failSettles.Add(-1) >= 0 {
		return errInjected
	}
	return s.Driver.Settle(ctx, p)
}

// ExtendLease, once takeOver is set, first does what another relay would
// do to a relay stalled past its lease: the lease expires, and is
// reclaimed. A renewal that fails on the way (its deadline, on a loaded
// machine) leaves takeOver set for the next one.
func (s *faultyStore) ExtendLease(ctx context.Context, owner string, ids []uuid.UUID, lease time.Duration) ([]uuid.UUID, error) {
	if s.takeOver.Load() {
		s.reclaiming.Lock()
		defer s.reclaiming.Unlock()
		expire := "update " + pgx.Identifier{s.Schema(), "outbox_leases"}.Sanitize() +
			" set expires_at = now() - interval '1 second' where owner = $1"
		if _, err := s.Pool().Exec(ctx, expire, owner); err != nil {
			return nil, err
		}
		if _, err := s.Driver.ReclaimExpired(ctx, store.ReclaimParams{MaxAttempts: relay.MaxAttemptsDefault}); err != nil {
			return nil, err
		}
		s.takeOver.Store(false)
	}
	return s.Driver.ExtendLease(ctx, owner, ids, lease)
}

func (s *faultyStore) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]store.Reclaimed, error) {
	s.reclaiming.Lock()
	defer s.reclaiming.Unlock()
	return s.Driver.ReclaimExpired(ctx, p)
}

// newRelay returns a relay, not running, with a quiet logger by default
// (relaytest.New).
func newRelay(t *testing.T, cfg relay.Config) *relay.Relay {
	t.Helper()
	return relaytest.New(t, cfg)
}

// run starts a relay until the test ends (or stop is called); stop waits
// for Run to return (relaytest.Start).
func run(t *testing.T, cfg relay.Config) (r *relaytest.Running, stop func()) {
	t.Helper()
	r = relaytest.Start(t, cfg)
	return r, r.Stop
}

// Every outcome is counted once it is recorded: delivered at once,
// delivered after a retry, and dead-lettered at once (410).
func TestStatsCountOutcomes(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, n int) int {
		switch {
		case d.AggregateID == "gone":
			return http.StatusGone
		case d.AggregateID == "flaky" && n == 1:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	r, _ := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second),
		BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	waitFor(t, "the relay to listen", 10*time.Second, func() bool { return r.Stats().Listening })
	if err := s.Enqueue(context.Background(), ev("ok", 1), ev("flaky", 1), ev("gone", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every outcome", 10*time.Second, func() bool {
		st := r.Stats()
		return st.Delivered == 2 && st.Failed == 1 && st.InFlight == 0
	})
	st := r.Stats()
	want := relay.Stats{Claimed: 4, Delivered: 2, Retried: 1, Failed: 1,
		Listening: true, Channel: "postbox_" + s.Schema()}
	if st != want {
		t.Fatalf("stats:\n %+v\nwant\n %+v", st, want)
	}
}

// Ready is false until Run's first claim succeeds, false while claims
// fail, true again when they succeed, and false once Run stops.
func TestReadyFollowsClaims(t *testing.T) {
	t.Parallel()
	s := &faultyStore{Driver: pgtest.Store(t).Driver()}
	rcv := receiver.New(t, secret, nil)
	r := newRelay(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), PollInterval: 20 * time.Millisecond})
	if r.Ready() {
		t.Fatal("ready before Run")
	}
	stop := relaytest.Run(t, r).Stop
	waitFor(t, "the relay to be ready", 10*time.Second, r.Ready)
	s.failClaims.Store(true)
	waitFor(t, "a claim to fail", 10*time.Second, func() bool { return r.Stats().ClaimErrors > 0 })
	if r.Ready() {
		t.Fatal("ready while its claims fail")
	}
	s.failClaims.Store(false)
	waitFor(t, "the relay to be ready again", 10*time.Second, r.Ready)
	if err := s.Enqueue(context.Background(), ev("1", 1)); err != nil {
		t.Fatal(err)
	}
	rcv.WaitAccepted(t, 1, 10*time.Second)
	stop()
	if r.Ready() {
		t.Fatal("ready after Run returned")
	}
	if st := r.Stats(); st.Listening || st.PollingReason != "the relay is not running" {
		t.Fatalf("after Run returned: listening %v, polling reason %q", st.Listening, st.PollingReason)
	}
}

// An outcome that could not be recorded is counted once, when it is.
func TestStatsCountSettleErrors(t *testing.T) {
	t.Parallel()
	s := &faultyStore{Driver: pgtest.Store(t).Driver()}
	s.failSettles.Store(2)
	rcv := receiver.New(t, secret, nil)
	r, _ := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second)})
	if err := s.Enqueue(context.Background(), ev("1", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the delivery to be recorded", 10*time.Second, func() bool { return r.Stats().Delivered == 1 })
	if st := r.Stats(); st.SettleErrors != 2 || st.Delivered != 1 || st.Claimed != 1 {
		t.Fatalf("stats after two failed settles: %+v", st)
	}
}

// At shutdown, the events not delivered are released, and counted so.
func TestStatsCountReleasedAtShutdown(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	hold := make(chan struct{})
	rcv := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		<-hold
		return http.StatusOK
	})
	defer close(hold)
	events := make([]postbox.Event, 20)
	for i := range events {
		events[i] = ev(fmt.Sprint(i), 0)
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	r, stop := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, time.Minute), Concurrency: 2, BatchSize: 5,
		ShutdownTimeout: 100 * time.Millisecond})
	waitFor(t, "deliveries in flight", 10*time.Second, func() bool { return r.Stats().InFlight > 0 })
	stop()
	st := r.Stats()
	if st.Claimed == 0 || st.Released != st.Claimed || st.Delivered != 0 || st.InFlight != 0 {
		t.Fatalf("stats after a stop with every delivery held: %+v; want every claimed event released", st)
	}
}

// The events of a crashed relay are reclaimed after its lease, counted,
// and delivered.
func TestStatsCountReclaimedEvents(t *testing.T) {
	// Not parallel: its 200 ms lease must be renewed in time, which the
	// load of tests run beside it may delay.
	s := pgtest.Store(t).Driver()
	ctx := context.Background()
	if err := s.Enqueue(ctx, ev("1", 1), ev("2", 1), ev("3", 1)); err != nil {
		t.Fatal(err)
	}
	crashed, err := s.Claim(ctx, store.ClaimParams{Owner: "crashed", Limit: 10, Lease: 100 * time.Millisecond})
	if err != nil || len(crashed) != 3 {
		t.Fatalf("claim of the crashed relay: %d events, %v", len(crashed), err)
	}
	rcv := receiver.New(t, secret, nil)
	r, _ := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Lease: 200 * time.Millisecond})
	waitFor(t, "the crashed relay's events to be delivered", 10*time.Second, func() bool { return r.Stats().Delivered == 3 })
	if st := r.Stats(); st.Reclaimed != 3 || st.Claimed != 3 {
		t.Fatalf("stats: %+v; want 3 events reclaimed, then claimed", st)
	}
}

// A relay that finds, at a lease renewal, that another relay took its
// events over counts those it had not started to send.
func TestStatsCountLostLeases(t *testing.T) {
	// Not parallel: its 300 ms leases must be renewed in time, which the
	// load of tests run beside it may delay.
	s := &faultyStore{Driver: pgtest.Store(t).Driver()}
	hold := make(chan struct{})
	var requests atomic.Int32
	rcv := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		requests.Add(1)
		<-hold
		return http.StatusOK
	})
	defer close(hold)
	events := make([]postbox.Event, 5)
	for i := range events {
		events[i] = ev(fmt.Sprint(i), 0)
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	r, _ := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, time.Minute), Concurrency: 1,
		Lease: 300 * time.Millisecond, PollInterval: time.Hour, ShutdownTimeout: 100 * time.Millisecond})
	// One delivery started (and held), four wait for the publisher.
	waitFor(t, "the first delivery", 10*time.Second, func() bool { return requests.Load() > 0 })
	s.takeOver.Store(true)
	waitFor(t, "the lease renewal", 10*time.Second, func() bool { return !s.takeOver.Load() })
	waitFor(t, "the lost leases to be counted", 10*time.Second, func() bool { return r.Stats().LostLeases > 0 })
	if st := r.Stats(); st.LostLeases != 4 {
		t.Fatalf("stats: %+v; want 4 lost leases (the started delivery does not count)", st)
	}
}

// A delivery under way is cut short, and released, when a renewal finds its
// lease taken over: the relay does not go on sending an event another relay
// holds (here the endpoint holds the request until the test ends).
func TestDeliveryCutShortWhenLeaseLost(t *testing.T) {
	// Not parallel: its 300 ms leases must be renewed in time, which the
	// load of tests run beside it may delay.
	s := &faultyStore{Driver: pgtest.Store(t).Driver()}
	hold := make(chan struct{})
	var requests atomic.Int32
	rcv := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		requests.Add(1)
		<-hold
		return http.StatusOK
	})
	defer close(hold)
	if err := s.Enqueue(context.Background(), ev("a", 0)); err != nil {
		t.Fatal(err)
	}
	r, _ := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, time.Minute), Concurrency: 1,
		Lease: 300 * time.Millisecond, PollInterval: time.Hour, ShutdownTimeout: 100 * time.Millisecond})
	waitFor(t, "the delivery", 10*time.Second, func() bool { return requests.Load() > 0 })
	s.takeOver.Store(true)
	waitFor(t, "the held delivery to be cut short and released", 10*time.Second, func() bool { return r.Stats().Released > 0 })
	if st := r.Stats(); st.Delivered != 0 {
		t.Fatalf("stats: %+v; want nothing delivered", st)
	}
}

// A relay told not to listen says so, and why.
func TestStatsSayWhyTheRelayPolls(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, nil)
	r, _ := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), DisableListen: true,
		PollInterval: 20 * time.Millisecond})
	waitFor(t, "the relay to be ready", 10*time.Second, r.Ready)
	st := r.Stats()
	if st.Listening || st.Channel != "" || !strings.Contains(st.PollingReason, "DisableListen") {
		t.Fatalf("with listening disabled: listening %v on %q, polling reason %q", st.Listening, st.Channel, st.PollingReason)
	}
}

// deafStore is a store whose notifications do not reach the relay (as
// behind a pooler in transaction mode): Listen fails with
// store.ErrCannotListen.
type deafStore struct {
	*postgres.Driver
	listens atomic.Int32
}

func (s *deafStore) Listen(context.Context, func(store.Listening), func()) error {
	s.listens.Add(1)
	return fmt.Errorf("%w: notifications do not arrive (test)", store.ErrCannotListen)
}

// A store that cannot listen makes the relay poll for good, say why, and
// not try again; events are delivered by the poll.
func TestRelayPollsWhenTheStoreCannotListen(t *testing.T) {
	t.Parallel()
	s := &deafStore{Driver: pgtest.Store(t).Driver()}
	rcv := receiver.New(t, secret, nil)
	r, _ := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), PollInterval: 20 * time.Millisecond})
	waitFor(t, "the relay to poll", 10*time.Second, func() bool {
		return strings.Contains(r.Stats().PollingReason, "notifications do not arrive")
	})
	if err := s.Enqueue(context.Background(), ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	rcv.WaitAccepted(t, 1, 10*time.Second)
	time.Sleep(300 * time.Millisecond) // time enough for a retry of Listen
	if st := r.Stats(); st.Listening || s.listens.Load() != 1 {
		t.Fatalf("listening %v after %d calls of Listen; want polling, and Listen called once", st.Listening, s.listens.Load())
	}
}
