package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func newSink(t *testing.T, url string, timeout time.Duration) *webhook.Sink {
	t.Helper()
	s, err := webhook.New(webhook.Config{URL: url, Secrets: []string{secret}, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start runs a relay until the test ends (or stop is called) and waits for
// Run to return: relaytest.Start, keeping the delivered events unless the
// test sets a Retention.
func start(t *testing.T, cfg relay.Config) (stop func()) {
	t.Helper()
	if cfg.Retention == 0 {
		cfg.Retention = time.Hour // keep delivered events, to inspect them
	}
	return relaytest.Start(t, cfg).Stop
}

// payload is what the test events carry, to check order at the receiver.
type payload struct {
	EventID string `json:"event_id"`
	Agg     string `json:"agg"`
	N       int    `json:"n"`
}

func ev(agg string, n int) postbox.Event {
	id := postbox.NewID()
	b, _ := json.Marshal(payload{EventID: id.String(), Agg: agg, N: n})
	return postbox.Event{ID: id, AggregateType: "order", AggregateID: agg, EventType: "order.updated", Payload: b}
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stats(t *testing.T, s store.Outbox) store.StatusCounts {
	t.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func record(t *testing.T, s store.Outbox, id uuid.UUID) store.Record {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The article's plain-SQL producer, a relay, and a receiver that checks the
// Standard Webhooks signature with its own code.
func TestArticleInsertIsDeliveredSigned(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, nil)
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second)})

	ctx := context.Background()
	var id uuid.UUID
	err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "set local search_path = "+pgx.Identifier{s.Schema()}.Sanitize()); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key)
			values ('order', '42', 'order.created', '{"order_id": 42, "amount": 1250}', 'order.created:' || 42)
			returning id`).Scan(&id)
	})
	if err != nil {
		t.Fatal(err)
	}
	rcv.WaitAccepted(t, 1, 10*time.Second)
	got := rcv.Accepted()[0]
	if got.ID != id.String() {
		t.Fatalf("webhook-id %q, want the outbox row id %s", got.ID, id)
	}
	if got.EventType != "order.created" || got.AggregateType != "order" || got.AggregateID != "42" {
		t.Fatalf("event headers: %+v", got)
	}
	var body map[string]any
	if err := json.Unmarshal(got.Body, &body); err != nil || body["order_id"] != 42.0 || body["amount"] != 1250.0 {
		t.Fatalf("body %s", got.Body)
	}
	waitFor(t, "the event to be done", 5*time.Second, func() bool { return record(t, s, id).Status == store.StatusDone })
	if rcv.BadSignatures() != 0 {
		t.Fatalf("%d requests with bad signatures", rcv.BadSignatures())
	}
}

func TestReceiverFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		respond receiver.Respond
		// check inspects the event after the relay settled it.
		wantStatus   string
		wantAttempts int
		wantRetryIn  time.Duration // 0: no retry pending
		backoffMin   time.Duration // default 20ms
	}{
		{
			name: "fails 3 times then accepts",
			respond: func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, n int) int {
				if n <= 3 {
					return http.StatusServiceUnavailable
				}
				return http.StatusOK
			},
			wantStatus: store.StatusDone, wantAttempts: 4,
		},
		{
			name: "410 gone fails at once",
			respond: func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
				return http.StatusGone
			},
			wantStatus: store.StatusFailed, wantAttempts: 1,
		},
		{
			name: "400 is retried a bounded number of times",
			respond: func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
				return http.StatusBadRequest
			},
			wantStatus: store.StatusFailed, wantAttempts: relay.RejectedAttemptsDefault,
		},
		{
			name: "hangs past the timeout",
			respond: func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, n int) int {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
				return http.StatusOK
			},
			wantStatus: store.StatusPending, wantAttempts: 1, wantRetryIn: time.Hour, backoffMin: time.Hour,
		},
		{
			name: "closes the connection",
			respond: func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, n int) int {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
				return receiver.Answered
			},
			wantStatus: store.StatusPending, wantAttempts: 1, wantRetryIn: time.Hour, backoffMin: time.Hour,
		},
		{
			name: "429 with Retry-After",
			respond: func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, n int) int {
				w.Header().Set("Retry-After", "300")
				return http.StatusTooManyRequests
			},
			wantStatus: store.StatusPending, wantAttempts: 1, wantRetryIn: 5 * time.Minute,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := pgtest.Store(t).Driver()
			rcv := receiver.New(t, secret, tc.respond)
			backoffMin := tc.backoffMin
			if backoffMin == 0 {
				backoffMin = 20 * time.Millisecond
			}
			start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 300*time.Millisecond),
				BackoffMin: backoffMin, BackoffMax: 3 * time.Hour, PollInterval: 20 * time.Millisecond})
			e := ev("1", 1)
			before := time.Now()
			if err := s.Enqueue(context.Background(), e); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the outcome", 15*time.Second, func() bool {
				r := record(t, s, e.ID)
				return r.Status == tc.wantStatus && r.Attempts == tc.wantAttempts
			})
			r := record(t, s, e.ID)
			wantRetries := tc.wantAttempts
			if tc.wantStatus == store.StatusDone {
				wantRetries--
			}
			if r.Retries != wantRetries {
				t.Fatalf("retries %d, want %d", r.Retries, wantRetries)
			}
			if r.Status != store.StatusDone && r.LastError == "" {
				t.Fatal("no last error kept")
			}
			if tc.wantRetryIn > 0 {
				lo, hi := before.Add(tc.wantRetryIn), time.Now().Add(2*tc.wantRetryIn)
				if r.AvailableAt.Before(lo) || r.AvailableAt.After(hi) {
					t.Fatalf("next attempt at %v, want between %v and %v", r.AvailableAt, lo, hi)
				}
			}
			if n := rcv.Attempts(e.ID.String()); n != tc.wantAttempts {
				t.Fatalf("receiver saw %d attempts, want %d", n, tc.wantAttempts)
			}
		})
	}
}

func TestTwoRelaysDeliverEveryEventOnce(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, nil)
	const n = 3000
	events := make([]postbox.Event, n)
	for i := range events {
		events[i] = ev(fmt.Sprint(i%50), i)
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), BatchSize: 50, Concurrency: 16})
	}
	rcv.WaitAccepted(t, n, 60*time.Second)
	waitFor(t, "all events done", 10*time.Second, func() bool { return stats(t, s).Done == n })
	seen := map[string]int{}
	for _, d := range rcv.Accepted() {
		seen[d.ID]++
	}
	for _, e := range events {
		if c := seen[e.ID.String()]; c != 1 {
			t.Fatalf("event %s delivered %d times", e.ID, c)
		}
	}
}

// checkOrder asserts that, per aggregate, the accepted deliveries carry
// n = 0, 1, 2, ... in order, each once.
func checkOrder(t *testing.T, accepted []receiver.Delivery, perAggregate map[string]int) {
	t.Helper()
	next := map[string]int{}
	for _, d := range accepted {
		var p payload
		if err := json.Unmarshal(d.Body, &p); err != nil {
			t.Fatal(err)
		}
		if p.N != next[p.Agg] {
			t.Fatalf("aggregate %s: got event %d, want %d", p.Agg, p.N, next[p.Agg])
		}
		next[p.Agg]++
	}
	for agg, want := range perAggregate {
		if next[agg] != want {
			t.Fatalf("aggregate %s: %d events delivered, want %d", agg, next[agg], want)
		}
	}
}

func TestOrderedUnderRetriesWithTwoRelays(t *testing.T) {
	t.Parallel()
	s := pgtest.OrderedStore(t).Driver()
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(1, 2))
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, n int) int {
		mu.Lock()
		fail := rnd.Float64() < 0.3
		mu.Unlock()
		if fail {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	const aggregates, perAggregate = 20, 15
	want := map[string]int{}
	var events []postbox.Event
	for i := range perAggregate {
		for a := range aggregates {
			events = append(events, ev(fmt.Sprint(a), i))
			want[fmt.Sprint(a)] = perAggregate
		}
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Ordered: true,
			BackoffMin: 5 * time.Millisecond, BackoffMax: 40 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	}
	rcv.WaitAccepted(t, len(events), 90*time.Second)
	checkOrder(t, rcv.Accepted(), want)
}

// Producers whose transactions commit out of sequence order (a row with a
// higher seq becomes visible first) while the relay runs: nothing is
// skipped, and ordered mode still keeps each aggregate's order.
func TestOutOfOrderCommitsAreNotSkipped(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			newStore := pgtest.Store
			if ordered {
				newStore = pgtest.OrderedStore
			}
			s := newStore(t).Driver()
			rcv := receiver.New(t, secret, nil)
			start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Ordered: ordered,
				PollInterval: 50 * time.Millisecond})
			const producers, perProducer = 8, 25
			var wg sync.WaitGroup
			for p := range producers {
				wg.Go(func() {
					agg := fmt.Sprint(p)
					rnd := rand.New(rand.NewPCG(uint64(p), 7))
					for i := range perProducer {
						err := pgx.BeginFunc(context.Background(), s.Pool(), func(tx pgx.Tx) error {
							if err := s.EnqueueTx(context.Background(), tx, ev(agg, i)); err != nil {
								return err
							}
							// Hold the transaction open so that others take
							// later sequence numbers and commit first.
							time.Sleep(time.Duration(rnd.IntN(15)) * time.Millisecond)
							return nil
						})
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			want := map[string]int{}
			for p := range producers {
				want[fmt.Sprint(p)] = perProducer
			}
			rcv.WaitAccepted(t, producers*perProducer, 30*time.Second)
			if ordered {
				checkOrder(t, rcv.Accepted(), want)
			}
			ids := map[string]bool{}
			for _, d := range rcv.Accepted() {
				ids[d.ID] = true
			}
			if len(ids) != producers*perProducer {
				t.Fatalf("%d distinct events delivered, want %d", len(ids), producers*perProducer)
			}
			if rcv.BadSignatures() != 0 {
				t.Fatal("bad signatures")
			}
		})
	}
}

func TestEveryAttemptIsSignedWithAFreshTimestamp(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second),
		BackoffMin: 1100 * time.Millisecond, BackoffMax: 1200 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	e := ev("1", 1)
	if err := s.Enqueue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	rcv.WaitAccepted(t, 1, 10*time.Second)
	ts := rcv.Timestamps(e.ID.String())
	if len(ts) != 2 || ts[1] <= ts[0] {
		t.Fatalf("timestamps of the two attempts: %v, want increasing", ts)
	}
}

func TestGracefulStopReleasesWhatIsNotDelivered(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	release := make(chan struct{})
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, n int) int {
		<-release
		return http.StatusOK
	})
	defer close(release)
	events := make([]postbox.Event, 40)
	for i := range events {
		events[i] = ev(fmt.Sprint(i), 0)
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	stop := start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, time.Minute), Concurrency: 4, BatchSize: 10,
		ShutdownTimeout: 200 * time.Millisecond})
	waitFor(t, "deliveries in flight", 5*time.Second, func() bool { return stats(t, s).Processing > 0 })
	stop()
	st := stats(t, s)
	if st.Processing != 0 || st.Pending != int64(len(events)) {
		t.Fatalf("after a graceful stop: %+v, want every event pending again", st)
	}
	for _, e := range events {
		if r := record(t, s, e.ID); r.Attempts != 0 {
			t.Fatalf("a released event counts %d attempts, want 0", r.Attempts)
		}
	}
}

// A retry is attempted when it falls due, not at the next poll.
func TestRetryDoesNotWaitForThePoll(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second),
		BackoffMin: 50 * time.Millisecond, BackoffMax: 100 * time.Millisecond, PollInterval: time.Hour})
	if err := s.Enqueue(context.Background(), ev("1", 1)); err != nil {
		t.Fatal(err)
	}
	rcv.WaitAccepted(t, 1, 5*time.Second)
}

// With the default retention, a delivered event is deleted when its
// delivery is recorded.
func TestDeliveredEventsAreDeletedByDefault(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, nil)
	relaytest.Start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second)})
	e := ev("1", 1)
	if err := s.Enqueue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	rcv.WaitAccepted(t, 1, 5*time.Second)
	waitFor(t, "the delivered event to be deleted", 5*time.Second, func() bool {
		_, err := s.Get(context.Background(), e.ID)
		return errors.Is(err, store.ErrNotFound)
	})
	if st := stats(t, s); st != (store.StatusCounts{}) {
		t.Fatalf("stats after delivery: %+v, want all zero", st)
	}
}
