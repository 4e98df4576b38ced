package endpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// enqueue writes n events of type typ, each of its own aggregate, into the
// outbox of s.
func enqueue(t *testing.T, s store.Outbox, typ string, n int) []uuid.UUID {
	t.Helper()
	events := make([]postbox.Event, n)
	ids := make([]uuid.UUID, n)
	for i := range events {
		ids[i] = uuid.Must(uuid.NewV7())
		events[i] = postbox.Event{ID: ids[i], AggregateType: "order", AggregateID: strconv.Itoa(i), EventType: typ,
			Payload: []byte(`{"n":` + strconv.Itoa(i) + `}`)}
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	return ids
}

// An idle endpoint gets events straight from the fan-out: each exactly
// once, with no delivery written, and its attempts logged; with direct
// delivery off (DirectWithin negative) every delivery is written first.
func TestDirectDeliveryWritesNoDelivery(t *testing.T) {
	t.Parallel()
	for _, direct := range []bool{true, false} {
		t.Run(map[bool]string{true: "direct", false: "off"}[direct], func(t *testing.T) {
			s := pgStore(t)
			rc := receiver.New(t, secret, nil)
			e := addEndpoint(t, s, "a", rc.URL, nil)
			sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
				c.KeepDelivered = false
				if !direct {
					c.DirectWithin = -1
				}
			})
			waitFor(t, 10*time.Second, "the lane running", func() bool { return sup.Stats().Lanes == 1 })
			startRelay(t, s, sup.FanOut(), nil)
			// The first event's delivery is written: the lane measures the
			// endpoint with it.
			enqueue(t, s, "warm.up", 1)
			waitFor(t, 10*time.Second, "the warm-up delivered", func() bool { return sup.Stats().Delivered == 1 })
			const n = 200
			enqueue(t, s, "order.created", n)
			rc.WaitAccepted(t, n+1, 30*time.Second)
			waitFor(t, 10*time.Second, "every delivery recorded", func() bool { return sup.Stats().Delivered == n+1 })
			if got := len(rc.Accepted()); got != n+1 {
				t.Errorf("received %d requests, want each of the %d events once", got, n+1)
			}
			st := sup.Stats()
			if st.Direct+st.Written != n+1 {
				t.Errorf("stats %+v: each delivery is made directly or written first", st)
			}
			if direct && st.Direct == 0 || !direct && st.Direct != 0 {
				t.Errorf("stats %+v: want deliveries made directly only when DirectWithin is not negative", st)
			}
			if c := counts(t, s, e.ID); c != (store.DeliveryCounts{}) {
				t.Errorf("counts = %+v, want no delivery left", c)
			}
			waitFor(t, 10*time.Second, "every attempt logged", func() bool {
				a, err := s.AttemptList(context.Background(), e.ID, 2*n)
				return err == nil && len(a) == n+1
			})
		})
	}
}

// An offered attempt that fails is written as the lane would have settled
// it: a 503 as a retry (one attempt counted, delivered later by the lane,
// the receiver seeing a second attempt), a 410 as a dead letter at once.
func TestDirectFailuresAreWrittenAsTheLaneSettles(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	var mu sync.Mutex
	answer := map[string]int{} // the first answer to an event, by payload
	rc := receiver.New(t, secret, func(_ http.ResponseWriter, _ *http.Request, d receiver.Delivery, n int) int {
		mu.Lock()
		defer mu.Unlock()
		if n == 1 {
			return answer[string(d.Body)]
		}
		return 0
	})
	e := addEndpoint(t, s, "a", rc.URL, nil)
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) { c.KeepDelivered = false })
	waitFor(t, 10*time.Second, "the lane running", func() bool { return sup.Stats().Lanes == 1 })
	f := sup.FanOut()
	// Measured first (written, delivered by the lane), so that the next
	// events are offered.
	fanOut(t, f, "warm.up")
	waitFor(t, 10*time.Second, "the first delivery", func() bool { return sup.Stats().Delivered == 1 })
	mu.Lock()
	answer[`{"n":0}`] = http.StatusServiceUnavailable
	answer[`{"n":1}`] = http.StatusGone
	mu.Unlock()
	ids := fanOut(t, f, "order.retried", "order.gone")
	if st := sup.Stats(); st.Offered != 2 || st.Direct != 0 || st.Written != 3 {
		t.Fatalf("stats %+v: want the warm-up written, the two others offered, failed and written", st)
	}
	retried, gone := ids["order.retried"][0], ids["order.gone"][0]
	waitFor(t, 10*time.Second, "the retry delivered by the lane", func() bool { return rc.Attempts(retried.String()) == 2 })
	if n := rc.Attempts(gone.String()); n != 1 {
		t.Errorf("the event answered 410 was sent %d times, want once", n)
	}
	page, err := s.FailedList(context.Background(), store.FailedListParams{FailedFilter: store.FailedFilter{Endpoint: e.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if dead := page.Events; len(dead) != 1 || dead[0].ID != gone || dead[0].Retries != 1 || dead[0].LastError == "" {
		t.Errorf("dead letters = %+v, want the event answered 410, after 1 attempt, with its error", dead)
	}
}

// An endpoint much slower than the others is never offered events: its
// deliveries are written for its lane (they wait there while it does not
// answer), while the fast endpoint gets every event directly.
func TestSlowEndpointIsLeftToItsLane(t *testing.T) {
	// Not parallel: the fast endpoint must be measured within 25 ms, which
	// the load of tests run beside it may prevent.
	s := pgStore(t)
	release := make(chan struct{})
	fast := receiver.New(t, secret, nil)
	slow := receiver.New(t, secret, func(_ http.ResponseWriter, _ *http.Request, d receiver.Delivery, _ int) int {
		if d.EventType == "warm.up" {
			time.Sleep(300 * time.Millisecond) // measured slow
			return 0
		}
		<-release
		return 0
	})
	addEndpoint(t, s, "fast", fast.URL, nil)
	e := addEndpoint(t, s, "slow", slow.URL, nil)
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) { c.KeepDelivered = false; c.DirectWithin = 25 * time.Millisecond })
	waitFor(t, 10*time.Second, "both lanes running", func() bool { return sup.Stats().Lanes == 2 })
	fanOut(t, sup.FanOut(), "warm.up")
	waitFor(t, 10*time.Second, "the warm-up delivered to both", func() bool { return sup.Stats().Delivered == 2 })
	const n = 20
	fanOut(t, sup.FanOut(), make20("order.created")...)
	fast.WaitAccepted(t, n+1, 30*time.Second)
	if c := counts(t, s, e.ID); c.Pending+c.Processing != n {
		t.Errorf("the slow endpoint's deliveries: %+v, want its %d written and waiting", c, n)
	}
	if st := sup.Stats(); st.Offered != n || st.Direct != n {
		t.Errorf("stats %+v: want the fast endpoint's %d offered and delivered directly, none of the slow one's", st, n)
	}
	close(release)
	slow.WaitAccepted(t, n+1, 30*time.Second)
}

// make20 returns typ 20 times.
func make20(typ string) []string {
	out := make([]string, 20)
	for i := range out {
		out[i] = typ
	}
	return out
}

// In ordered mode a batch holding two events of one aggregate (a FanOut fed
// by a relay that is not ordered) offers neither: both are written, and
// the lane delivers them in order.
func TestOrderedBatchWithAnAggregateTwiceIsWritten(t *testing.T) {
	t.Parallel()
	s := pgtest.OrderedStore(t).Driver()
	rc := receiver.New(t, secret, nil)
	addEndpoint(t, s, "a", rc.URL, nil)
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) { c.KeepDelivered = false; c.Relay.Ordered = true })
	waitFor(t, 10*time.Second, "the lane running", func() bool { return sup.Stats().Lanes == 1 })
	fanOut(t, sup.FanOut(), "warm.up")
	waitFor(t, 10*time.Second, "the warm-up delivered", func() bool { return sup.Stats().Delivered == 1 })
	var msgs []*sink.Message
	for n := range 2 {
		msgs = append(msgs, &sink.Message{Attempt: 1, Event: postbox.Event{ID: uuid.Must(uuid.NewV7()), AggregateType: "order",
			AggregateID: "same", EventType: "order.changed", Payload: []byte(`{"n":` + strconv.Itoa(n) + `}`)}})
	}
	msgs = append(msgs, &sink.Message{Attempt: 1, Event: postbox.Event{ID: uuid.Must(uuid.NewV7()), AggregateType: "order",
		AggregateID: "other", EventType: "order.changed", Payload: []byte(`{"n":9}`)}})
	errs := make([]error, len(msgs))
	sup.FanOut().PublishBatch(context.Background(), msgs, errs)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := sup.Stats(); st.Offered != 1 || st.Written != 3 {
		t.Errorf("stats %+v: want the other aggregate's event offered, the two of one aggregate written", st)
	}
	rc.WaitAccepted(t, 4, 10*time.Second)
	var order []int
	for _, d := range rc.Accepted() {
		if d.AggregateID == "same" {
			var p struct{ N int }
			if err := json.Unmarshal(d.Body, &p); err != nil {
				t.Fatal(err)
			}
			order = append(order, p.N)
		}
	}
	if len(order) != 2 || order[0] != 0 || order[1] != 1 {
		t.Errorf("the aggregate's events arrived as n %v, want 0 then 1", order)
	}
}

// failingInsert is a store whose DeliveryInsert fails while fail is set.
type failingInsert struct {
	store.Endpoints
	fail atomic.Bool
}

func (f *failingInsert) DeliveryInsert(ctx context.Context, routes []store.Route) (int, error) {
	if f.fail.Load() {
		return 0, errors.New("injected: the database is unreachable")
	}
	return f.Endpoints.DeliveryInsert(ctx, routes)
}

// When the deliveries of a batch cannot be written after an offer
// delivered, the event is not reported published (the relay over the
// outbox publishes it again): nothing is lost, and the endpoint that got
// it directly gets it again, with the same webhook-id, as documented.
func TestDirectThenFailedInsertPublishesAgain(t *testing.T) {
	// Not parallel: both endpoints must be measured within 25 ms, which
	// the load of tests run beside it may prevent.
	pg := pgStore(t)
	s := &failingInsert{Endpoints: pg}
	fast := receiver.New(t, secret, nil)
	var failFirst atomic.Bool
	failFirst.Store(true)
	flaky := receiver.New(t, secret, func(_ http.ResponseWriter, _ *http.Request, d receiver.Delivery, _ int) int {
		if d.EventType != "warm.up" && failFirst.CompareAndSwap(true, false) {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	addEndpoint(t, pg, "fast", fast.URL, nil)
	addEndpoint(t, pg, "flaky", flaky.URL, nil)
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) { c.KeepDelivered = false })
	waitFor(t, 10*time.Second, "both lanes running", func() bool { return sup.Stats().Lanes == 2 })
	fanOut(t, sup.FanOut(), "warm.up")
	waitFor(t, 10*time.Second, "the warm-up delivered to both", func() bool { return sup.Stats().Delivered == 2 })

	m := &sink.Message{Attempt: 1, Event: postbox.Event{ID: uuid.Must(uuid.NewV7()), AggregateType: "order",
		AggregateID: "1", EventType: "order.created", Payload: []byte(`{"n":1}`)}}
	s.fail.Store(true)
	if err := sup.FanOut().Publish(context.Background(), m); err == nil {
		t.Fatal("Publish reported the event published although its retry's delivery was not written")
	}
	if n := fast.Attempts(m.ID.String()); n != 1 {
		t.Fatalf("the fast endpoint got the event %d times directly, want 1", n)
	}
	s.fail.Store(false)
	if err := sup.FanOut().Publish(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	flaky.WaitAccepted(t, 2, 10*time.Second)
	waitFor(t, 10*time.Second, "the second direct delivery", func() bool { return fast.Attempts(m.ID.String()) == 2 })
	for _, d := range fast.Accepted() {
		if d.EventType == "order.created" && d.ID != m.ID.String() {
			t.Errorf("a re-sent delivery carries webhook-id %s, want the event's %s", d.ID, m.ID)
		}
	}
}
