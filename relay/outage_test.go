package relay_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// switchedEndpoint serves a receiver on a fixed 127.0.0.1 port that the
// test takes down (every connection is then refused) and brings back.
type switchedEndpoint struct {
	t       *testing.T
	addr    string
	handler http.Handler
	mu      sync.Mutex
	srv     *http.Server
}

func newSwitchedEndpoint(t *testing.T, rcv *receiver.Receiver) *switchedEndpoint {
	e := &switchedEndpoint{t: t, addr: "127.0.0.1:0", handler: rcv.Server.Config.Handler}
	e.up()
	t.Cleanup(e.down)
	return e
}

func (e *switchedEndpoint) url() string { return "http://" + e.addr }

// up listens again on the endpoint's port.
func (e *switchedEndpoint) up() {
	e.mu.Lock()
	defer e.mu.Unlock()
	ln, err := net.Listen("tcp", e.addr)
	if err != nil {
		e.t.Fatalf("listening on %s again: %v", e.addr, err)
	}
	e.addr = ln.Addr().String()
	e.srv = &http.Server{Handler: e.handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = e.srv.Serve(ln) }()
}

// down closes the listener and every connection: connections are refused.
func (e *switchedEndpoint) down() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		_ = e.srv.Close()
		e.srv = nil
	}
}

// countingSink counts the publishes of the sink it wraps, and the most in
// progress at once since reset.
type countingSink struct {
	sink.Sink
	calls, inFlight atomic.Int64
	// maxInFlight is the most publishes at once among those begun since
	// the last reset (fresh counts them): a publish sent before it, which
	// may still wait for its timeout, is not one of them.
	maxInFlight atomic.Int64
	fresh       atomic.Pointer[atomic.Int64]
}

func (s *countingSink) Publish(ctx context.Context, m *sink.Message) error {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	fresh := s.fresh.Load()
	if fresh == nil {
		s.fresh.CompareAndSwap(nil, new(atomic.Int64))
		fresh = s.fresh.Load()
	}
	n := fresh.Add(1)
	defer fresh.Add(-1)
	for {
		seen := s.maxInFlight.Load()
		if n <= seen || s.maxInFlight.CompareAndSwap(seen, n) {
			break
		}
	}
	s.calls.Add(1)
	return s.Sink.Publish(ctx, m)
}

// reset starts the counts again: calls, and the most publishes at once
// among those begun from now on.
func (s *countingSink) reset() {
	s.calls.Store(0)
	s.fresh.Store(new(atomic.Int64))
	s.maxInFlight.Store(0)
}

// produce enqueues one event every few milliseconds until the returned
// function is called, which returns how many were enqueued.
func produce(t *testing.T, s store.Outbox) (stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			if err := s.Enqueue(context.Background(), ev("agg", i)); err != nil {
				t.Errorf("enqueue: %v", err)
				return
			}
			n.Add(1)
			time.Sleep(3 * time.Millisecond)
		}
	}()
	var once sync.Once
	stop = func() int {
		once.Do(func() {
			cancel()
			<-done
		})
		return int(n.Load())
	}
	t.Cleanup(func() { stop() })
	return stop
}

// retriesCounted is the sum of the failed attempts recorded in the outbox.
func retriesCounted(t *testing.T, s *postgres.Driver) int64 {
	t.Helper()
	var n int64
	err := s.Pool().QueryRow(context.Background(),
		"select coalesce(sum(retries), 0) from "+pgx.Identifier{s.Schema(), "outbox_events"}.Sanitize()).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// An endpoint down for many retry periods under a steady load: the relay
// stops claiming and probes one event at a time, no attempt counts, nothing
// is dead-lettered, and everything is delivered once the endpoint is back.
func TestSinkOutageDeadLettersNothing(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, nil)
	ep := newSwitchedEndpoint(t, rcv)
	counted := &countingSink{Sink: newSink(t, ep.url(), 2*time.Second)}
	rec := &recorder{}
	r := newRelay(t, relay.Config{Store: s, Sink: counted, Observer: rec, MaxAttempts: 3,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		ProbeInterval: 40 * time.Millisecond, BatchSize: 20, Concurrency: 4, PollInterval: 20 * time.Millisecond, Retention: time.Hour})
	relaytest.Run(t, r)
	stopProducing := produce(t, s)
	waitFor(t, "first deliveries", 10*time.Second, func() bool { return len(rcv.Accepted()) >= 10 })
	if !r.SinkAvailable() {
		t.Fatal("the sink is reported down while it delivers")
	}

	ep.down()
	waitFor(t, "the relay to see the sink down", 10*time.Second, func() bool { return !r.SinkAvailable() })
	waitFor(t, "the events held to be released", 10*time.Second, func() bool { return r.Stats().InFlight <= 1 })
	counted.reset()
	claimedBefore, retriesBefore, probesBefore := r.Stats().Claimed, retriesCounted(t, s), r.Stats().Probes
	// Many times MaxAttempts × BackoffMax.
	waitFor(t, "probes while down", 20*time.Second, func() bool { return r.Stats().Probes >= probesBefore+15 })

	st := r.Stats()
	if !st.SinkDown || st.SinkError == "" || st.SinkDownSince.IsZero() {
		t.Fatalf("stats while down: %+v", st)
	}
	if got := counted.maxInFlight.Load(); got != 1 {
		t.Fatalf("%d publishes at once while the sink was down, want 1 (one probe at a time)", got)
	}
	// One event per probe, and one more every third probe: after three
	// probes in a row that failed with one event, the next probe is another
	// one, the first held (see TestConnectionBrokenByOneEventIsNoEndlessOutage).
	if claimed, calls := st.Claimed-claimedBefore, counted.calls.Load(); claimed > calls+calls/3+1 {
		t.Fatalf("%d events claimed while the sink was down, for %d probes: the relay kept claiming", claimed, calls)
	}
	if got := retriesCounted(t, s); got != retriesBefore {
		t.Fatalf("failed attempts counted while the sink was down: %d, then %d", retriesBefore, got)
	}
	if got := stats(t, s).Failed; got != 0 {
		t.Fatalf("%d events dead-lettered during the outage", got)
	}

	ep.up()
	waitFor(t, "the relay to see the sink back", 10*time.Second, r.SinkAvailable)
	produced := stopProducing()
	waitFor(t, "every event delivered", 20*time.Second, func() bool {
		st := stats(t, s)
		return st.Done == int64(produced) && st.Failed == 0
	})
	st = r.Stats()
	if st.Failed != 0 || st.SinkDown {
		t.Fatalf("stats after the outage: %+v", st)
	}
	if got := rec.snapshot(); fmt.Sprint(got.sinkStates) != "[false true]" || int64(got.probes) != st.Probes {
		t.Fatalf("observer saw sink states %v and %d probes; want [false true] and %d", got.sinkStates, got.probes, st.Probes)
	}
}

// An endpoint that answers 500 with a body for every event is reachable:
// the relay does not pause, and the event is dead-lettered after
// MaxAttempts as before.
func TestAnswerAboutTheEventStillCounts(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, _ *http.Request, _ receiver.Delivery, _ int) int {
		http.Error(w, "database is on fire", http.StatusInternalServerError)
		return receiver.Answered
	})
	r := newRelay(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 2*time.Second), MaxAttempts: 3,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		ProbeInterval: 40 * time.Millisecond, PollInterval: 20 * time.Millisecond, Retention: time.Hour})
	relaytest.Run(t, r)
	e := ev("1", 1)
	if err := s.Enqueue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the event to fail", 10*time.Second, func() bool { return record(t, s, e.ID).Status == store.StatusFailed })
	if got := record(t, s, e.ID); got.Attempts != 3 || got.Retries != 3 {
		t.Fatalf("attempts %d, retries %d: want 3 and 3", got.Attempts, got.Retries)
	}
	if st := r.Stats(); st.SinkDown || st.Probes != 0 || !r.SinkAvailable() {
		t.Fatalf("an endpoint that answers was taken for down: %+v", st)
	}
}

// An endpoint that accepts connections but answers no request before the
// timeout is down too: after a few timeouts in a row the relay pauses and
// probes, and no event runs out of attempts however long it lasts.
func TestEveryRequestTimingOutIsAnOutage(t *testing.T) {
	// Not parallel: its good deliveries must be answered within the
	// 50 ms timeout, which the load of tests run beside it may delay.
	s := pgtest.Store(t).Driver()
	var hanging atomic.Bool
	hanging.Store(true)
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, _ receiver.Delivery, _ int) int {
		if hanging.Load() {
			<-r.Context().Done()
			return receiver.Answered
		}
		return http.StatusOK
	})
	counted := &countingSink{Sink: newSink(t, rcv.URL, 50*time.Millisecond)}
	r := newRelay(t, relay.Config{Store: s, Sink: counted, MaxAttempts: 3,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		ProbeInterval: 40 * time.Millisecond, BatchSize: 20, Concurrency: 4, PollInterval: 20 * time.Millisecond, Retention: time.Hour})
	relaytest.Run(t, r)
	stopProducing := produce(t, s)
	waitFor(t, "the relay to see the sink down", 10*time.Second, func() bool { return !r.SinkAvailable() })
	// Besides the probe under way, the probes that timed out are kept.
	waitFor(t, "the events held to be released", 10*time.Second, func() bool {
		st := r.Stats()
		return st.InFlight <= 1+int(st.Probes)
	})
	// A publish sent before the outage began may still wait for its
	// timeout (50 ms) beside the probe under way.
	waitFor(t, "the publishes sent before the outage to time out", 10*time.Second, func() bool { return counted.inFlight.Load() <= 1 })
	counted.reset()
	retriesBefore, probesBefore := retriesCounted(t, s), r.Stats().Probes
	waitFor(t, "probes while down", 20*time.Second, func() bool { return r.Stats().Probes >= probesBefore+10 })
	if got := counted.maxInFlight.Load(); got != 1 {
		t.Fatalf("%d publishes at once while the sink was down, want 1", got)
	}
	if got := retriesCounted(t, s); got != retriesBefore {
		t.Fatalf("failed attempts counted while the sink was down: %d, then %d", retriesBefore, got)
	}
	if got := stats(t, s).Failed; got != 0 {
		t.Fatalf("%d events dead-lettered while every request timed out", got)
	}
	hanging.Store(false)
	waitFor(t, "the relay to see the sink back", 10*time.Second, r.SinkAvailable)
	produced := stopProducing()
	waitFor(t, "every event delivered", 20*time.Second, func() bool {
		st := stats(t, s)
		return st.Done == int64(produced) && st.Failed == 0
	})
}

// The sink's own verdict, sink.Unavailable, starts an outage at once, and
// the failed publish does not count.
func TestUnavailableDoesNotCountAnAttempt(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	var up atomic.Bool
	fake := &scriptedSink{publish: func(context.Context, *sink.Message) error {
		if up.Load() {
			return nil
		}
		return &sink.Error{Kind: sink.Unavailable, Err: errors.New("broker connection down")}
	}}
	r := newRelay(t, relay.Config{Store: s, Sink: fake, MaxAttempts: 1,
		ProbeInterval: 20 * time.Millisecond, PollInterval: 20 * time.Millisecond, Retention: time.Hour})
	relaytest.Run(t, r)
	e := ev("1", 1)
	if err := s.Enqueue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "probes", 10*time.Second, func() bool { return r.Stats().Probes >= 3 })
	if got := record(t, s, e.ID); got.Status != store.StatusPending && got.Status != store.StatusProcessing || got.Retries != 0 {
		t.Fatalf("after probes of an unavailable sink: status %s, retries %d", got.Status, got.Retries)
	}
	up.Store(true)
	waitFor(t, "the event delivered", 10*time.Second, func() bool { return record(t, s, e.ID).Status == store.StatusDone })
}

// scriptedSink answers as its publish function says.
type scriptedSink struct {
	publish func(context.Context, *sink.Message) error
}

func (s *scriptedSink) Publish(ctx context.Context, m *sink.Message) error { return s.publish(ctx, m) }
func (s *scriptedSink) String() string                                     { return "scripted sink" }
func (s *scriptedSink) Destination() sink.Destination {
	return sink.Destination{System: "scripted", Name: "test"}
}

// One event whose every request times out, alone in the outbox, is taken
// for an outage; it must not block the others: the next probe is another
// event, its success ends the outage, and the slow event runs out of
// attempts as before.
func TestOneSlowEventDoesNotBlockTheOthers(t *testing.T) {
	// Not parallel: its good deliveries must be answered within the
	// 50 ms timeout, which the load of tests run beside it may delay.
	s := pgtest.Store(t).Driver()
	slow := ev("slow", 1)
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, _ int) int {
		if d.ID == slow.ID.String() {
			<-r.Context().Done()
			return receiver.Answered
		}
		return http.StatusOK
	})
	r := newRelay(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 50*time.Millisecond), MaxAttempts: 3,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		ProbeInterval: 40 * time.Millisecond, PollInterval: 20 * time.Millisecond, Retention: time.Hour})
	relaytest.Run(t, r)
	if err := s.Enqueue(context.Background(), slow); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relay to take the timeouts for an outage", 10*time.Second, func() bool { return r.Stats().Probes >= 1 })
	probesBefore := r.Stats().Probes
	for i := range 5 {
		if err := s.Enqueue(context.Background(), ev("fast", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the sink back", 20*time.Second, r.SinkAvailable)
	// The probe under way, maybe one more of the slow event, then a
	// fast one.
	if probes := r.Stats().Probes - probesBefore; probes > 3 {
		t.Fatalf("%d probes before one reached the sink: the slow event was probed again and again", probes)
	}
	waitFor(t, "the other events delivered, the slow one failed", 20*time.Second, func() bool {
		st := stats(t, s)
		return st.Done == 5 && st.Failed == 1
	})
	if got := record(t, s, slow.ID); got.Status != store.StatusFailed || got.Retries != 3 {
		t.Fatalf("the slow event: status %s, retries %d; want failed after 3", got.Status, got.Retries)
	}
}

// A relay stopped during an outage gives back every event it holds, the
// probes kept after a timeout included, without counting an attempt.
func TestStopDuringAnOutageReleasesEverything(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, _ receiver.Delivery, _ int) int {
		<-r.Context().Done()
		return receiver.Answered
	})
	r := newRelay(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 50*time.Millisecond), MaxAttempts: 3,
		ProbeInterval: 20 * time.Millisecond, Concurrency: 4, PollInterval: 20 * time.Millisecond})
	stop := relaytest.Run(t, r).Stop
	for i := range 20 {
		if err := s.Enqueue(context.Background(), ev("agg", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "probes that timed out", 10*time.Second, func() bool { return r.Stats().Probes >= 3 })
	retries := retriesCounted(t, s)
	stop()
	if st := r.Stats(); st.InFlight != 0 || st.Failed != 0 {
		t.Fatalf("after the stop: %+v", st)
	}
	if st := stats(t, s); st.Processing != 0 || st.Pending != 20 {
		t.Fatalf("outbox after the stop: %+v, want 20 pending, none leased", st)
	}
	if got := retriesCounted(t, s); got != retries {
		t.Fatalf("failed attempts counted at the stop: %d, then %d", retries, got)
	}
}

// Found by postbox chaos: the only events left were probes that timed out
// and were kept for after the outage. A probe claims a new event, and
// there was none, so the outage never ended and the kept events were
// never sent. With nothing else to probe with, the relay probes with an
// event it kept.
func TestOutageEndsWhenOnlyKeptProbesRemain(t *testing.T) {
	// Not parallel: its good deliveries must be answered within the
	// 50 ms timeout, which the load of tests run beside it may delay.
	s := pgtest.Store(t).Driver()
	var hanging atomic.Bool
	hanging.Store(true)
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, _ receiver.Delivery, _ int) int {
		if hanging.Load() {
			<-r.Context().Done()
			return receiver.Answered
		}
		return http.StatusOK
	})
	r := newRelay(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 50*time.Millisecond), MaxAttempts: 100,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		ProbeInterval: 40 * time.Millisecond, BatchSize: 20, Concurrency: 4, PollInterval: 20 * time.Millisecond, Retention: time.Hour})
	relaytest.Run(t, r)
	for i := range 4 {
		if err := s.Enqueue(context.Background(), ev(strconv.Itoa(i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the relay to see the sink down", 10*time.Second, func() bool { return !r.SinkAvailable() })
	// Every event has been a probe that timed out, and is kept: there is
	// nothing new to probe with.
	waitFor(t, "every event kept as a probe that timed out", 10*time.Second, func() bool {
		st := r.Stats()
		return st.Probes >= 4 && st.InFlight == 4
	})
	hanging.Store(false)
	waitFor(t, "every event delivered once the sink answers", 10*time.Second, func() bool {
		return stats(t, s).Done == 4
	})
}

// An ordered relay whose sink times out does not keep the head it probed
// with until its outage ends: the head's aggregate would wait for that
// relay alone, while another relay, whose sink answers, could deliver it.
func TestOrderedRelayInAnOutageKeepsNoHead(t *testing.T) {
	s := pgtest.OrderedStore(t).Driver()
	hanging := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, _ receiver.Delivery, _ int) int {
		<-r.Context().Done()
		return receiver.Answered
	})
	down := newRelay(t, relay.Config{Store: s, Sink: newSink(t, hanging.URL, 50*time.Millisecond), Ordered: true,
		MaxAttempts: 100, BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		ProbeInterval: 40 * time.Millisecond, PollInterval: 20 * time.Millisecond, Owner: "down"})
	relaytest.Run(t, down)
	events := []postbox.Event{ev("A", 0), ev("A", 1), ev("A", 2), ev("A", 3)}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relay to find its sink down and probe", 10*time.Second, func() bool { return down.Stats().Probes >= 2 })
	ok := receiver.New(t, secret, nil)
	relaytest.Start(t, relay.Config{Store: s, Sink: newSink(t, ok.URL, 5*time.Second), Ordered: true,
		PollInterval: 20 * time.Millisecond, Owner: "up"})
	ok.WaitAccepted(t, len(events), 15*time.Second)
	checkOrder(t, ok.Accepted(), map[string]int{"A": len(events)})
}
