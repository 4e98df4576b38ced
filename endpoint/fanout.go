package endpoint

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint/filter"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// FanOut is the sink of the relay that drains the outbox in endpoints mode
// (Supervisor.FanOut): it routes each event to the endpoints whose type
// filter matches it, offers it directly to the lanes of those that are
// measured fast (see direct.go), writes one delivery for each of the
// others (and for each offer that did not deliver it), wakes their lanes,
// and reports the event published. It is a sink.BatchSink: a batch of
// events is offered at once and its deliveries written in one statement.
// It is safe for concurrent use.
type FanOut struct {
	store        store.Endpoints
	refreshEvery time.Duration
	// written is told the endpoints it wrote pending deliveries for.
	written func(endpoints []uuid.UUID)
	// offerable returns the lanes, among those of endpoints, that take
	// offers of a batch of n events now (lane.takesOffers; nil when there
	// is none), how long an offer may wait for one of an endpoint's slots,
	// and what to call once the batch's offers ended (Supervisor.offerable).
	offerable func(endpoints []uuid.UUID, n int) (map[uuid.UUID]*lane, time.Duration, func())
	// within is SupervisorConfig.DirectWithin, ordered SupervisorConfig.Relay.Ordered.
	within  time.Duration
	ordered bool
	// workers run the offers.
	workers *workers
	log     *slog.Logger

	mu       sync.Mutex
	routes   []route
	loadedAt time.Time
	// filters are the endpoints' compiled filters by expression, kept
	// from one read of the endpoints to the next; badFilters the
	// expressions that do not compile, by endpoint, logged once.
	filters    map[string]*filter.Filter
	badFilters map[uuid.UUID]string
	// filterLogged is when a filter's evaluation error was last logged,
	// by endpoint (at most one line a minute each).
	filterLogged sync.Map

	unrouted, routed, deliveries, offered, direct, filtered, filterErrors atomic.Int64
}

// route is an endpoint that receives deliveries: enabled, or auto-disabled
// (its deliveries wait until it is enabled again).
type route struct {
	id    uuid.UUID
	types []string
	// filter is the endpoint's content filter (nil: none); refused, an
	// endpoint whose stored filter does not compile: it gets no event.
	filter  *filter.Filter
	refused bool
}

// filterLogEvery is how often one endpoint's filter errors are logged.
const filterLogEvery = time.Minute

// wants reports whether r's endpoint wants m: by its type and subject
// (see Wants), and its filter, if any, holds. A filter whose
// evaluation fails (a key the payload lacks, the cost limit, a payload
// that is not JSON) does not hold: the event is not the endpoint's,
// counted by FilterErrors and logged at most once a minute per endpoint.
// in is m's filter input, made once per event when a filter needs it.
func (f *FanOut) wants(r *route, m *sink.Message, in **filter.Input) bool {
	if r.refused || !Wants(r.id, r.types, m.Event) {
		return false
	}
	if r.filter == nil {
		return true
	}
	if *in == nil {
		*in = filter.NewInput(m.Event)
	}
	ok, err := r.filter.Match(*in)
	if err != nil {
		f.filterErrors.Add(1)
		now := time.Now()
		if last, seen := f.filterLogged.Load(r.id); !seen || now.Sub(last.(time.Time)) >= filterLogEvery {
			f.filterLogged.Store(r.id, now)
			f.log.Warn("endpoint filter failed on an event: the event is not sent to the endpoint (such errors are logged at most once a minute per endpoint)",
				"endpoint", r.id, "event_id", m.ID, "event_type", m.EventType, "error", err)
		}
		return false
	}
	if !ok {
		f.filtered.Add(1)
	}
	return ok
}

var _ sink.BatchSink = (*FanOut)(nil)

// Publish delivers m to, or writes a delivery of m for, each matching
// endpoint, and returns nil once each has it or its delivery is written
// (an event no endpoint wants is counted by Unrouted). Publishing again
// after a crash writes no delivery twice (one already written is kept as
// it is), but the endpoints that got the event directly (and, in
// unordered mode, those with its delivery still queued) get it again,
// with the same webhook-id.
func (f *FanOut) Publish(ctx context.Context, m *sink.Message) error {
	errs := []error{nil}
	f.PublishBatch(ctx, []*sink.Message{m}, errs)
	return errs[0]
}

// PublishBatch routes every message of msgs, offers them to the lanes
// that take offers, writes the deliveries left in one statement
// (store.Endpoints.DeliveryInsert), and sets errs[i] to what Publish would
// have returned for msgs[i]: nil for the messages every endpoint got (or
// no endpoint wants), the statement's error for the others when it
// failed (they are published again later: the endpoints that got them
// directly get them again, with the same webhook-id). Once an offer
// delivered, the statement runs even if ctx ends meanwhile (for up to
// insertTimeout): a shutdown then settles the events instead of sending
// them again.
func (f *FanOut) PublishBatch(ctx context.Context, msgs []*sink.Message, errs []error) {
	routes, err := f.load(ctx)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return
	}
	matched := make([][]uuid.UUID, len(msgs))
	var endpoints []uuid.UUID
	seen := map[uuid.UUID]bool{}
	var routedEvents int64
	for i, m := range msgs {
		errs[i] = nil
		var in *filter.Input
		for k := range routes {
			r := &routes[k]
			if f.wants(r, m, &in) {
				matched[i] = append(matched[i], r.id)
				if !seen[r.id] {
					seen[r.id] = true
					endpoints = append(endpoints, r.id)
				}
			}
		}
		if len(matched[i]) == 0 {
			f.unrouted.Add(1)
		} else {
			routedEvents++
		}
	}
	if len(endpoints) == 0 {
		return
	}
	results := f.offer(ctx, msgs, matched, endpoints)
	var (
		batch   []store.Route
		routed  []int // the index in msgs of each route of batch
		woken   []uuid.UUID
		touched = map[uuid.UUID]bool{}
	)
	for i, m := range msgs {
		if len(matched[i]) == 0 {
			continue
		}
		r := store.Route{Event: m.Event}
		for j, id := range matched[i] {
			t, write := store.Tried{}, true
			if results != nil {
				t, write = results[i][j].tried, !results[i][j].delivered
			}
			if !write {
				continue
			}
			r.Endpoints = append(r.Endpoints, id)
			if results != nil {
				r.Tried = append(r.Tried, t)
			}
			if (t.Status == "" || t.Status == store.StatusPending) && !touched[id] {
				touched[id] = true
				woken = append(woken, id)
			}
		}
		if len(r.Endpoints) > 0 {
			batch = append(batch, r)
			routed = append(routed, i)
		}
	}
	if len(batch) == 0 {
		f.routed.Add(routedEvents)
		return
	}
	insertCtx := ctx
	if results != nil {
		var cancel context.CancelFunc
		insertCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), insertTimeout)
		defer cancel()
	}
	n, err := f.store.DeliveryInsert(insertCtx, batch)
	if err != nil {
		err = fmt.Errorf("endpoint: fan out: %w", err)
		for _, i := range routed {
			errs[i] = err
		}
		return
	}
	f.routed.Add(routedEvents)
	f.deliveries.Add(int64(n))
	if f.written != nil && len(woken) > 0 {
		f.written(woken)
	}
}

// insertTimeout bounds the statement that writes a batch's deliveries once
// offers were made: it is not cut by the batch's context (see
// PublishBatch).
const insertTimeout = 10 * time.Second

// offerResult is what one offer left: delivered (nothing to write), or
// the delivery to write; the zero offerResult is an event not offered.
type offerResult struct {
	delivered bool
	tried     store.Tried
}

// offer offers each message to the lanes of its matched endpoints that take
// offers, all at once, and returns what each left (by message, then
// matched endpoint; the zero offerResult where no offer was sent), or nil
// when no lane takes offers. In ordered mode only endpoints with no
// delivery queued are offered (an event delivered directly must not
// overtake a queued one of its aggregate), and no event of an aggregate
// that has two in the batch (the relay over the outbox claims one per
// aggregate when ordered; a FanOut fed otherwise writes them in order). In
// unordered mode an endpoint with deliveries queued is offered events too:
// its lane drains the queue beside them, the two sharing its slots.
func (f *FanOut) offer(ctx context.Context, msgs []*sink.Message, matched [][]uuid.UUID, endpoints []uuid.UUID) [][]offerResult {
	if f.offerable == nil || f.within <= 0 {
		return nil
	}
	lanes, wait, done := f.offerable(endpoints, len(msgs))
	if len(lanes) == 0 {
		return nil
	}
	defer done()
	if f.ordered {
		ids := make([]uuid.UUID, 0, len(lanes))
		for id := range lanes {
			ids = append(ids, id)
		}
		queued, err := f.store.DeliveryPending(ctx, ids)
		if err != nil {
			// Nothing is offered: every delivery is written, as without
			// direct delivery.
			if ctx.Err() == nil {
				f.log.Warn("looking for queued deliveries failed; this batch is written for the lanes, none delivered directly", "error", err)
			}
			return nil
		}
		for _, id := range queued {
			delete(lanes, id)
		}
		if len(lanes) == 0 {
			return nil
		}
	}
	var twice map[[2]string]bool
	if f.ordered {
		twice = aggregatesTwice(msgs)
	}
	out := make([][]offerResult, len(msgs))
	batches := make(map[uuid.UUID]*offers, len(lanes))
	now := time.Now()
	for i, m := range msgs {
		out[i] = make([]offerResult, len(matched[i]))
		if twice[[2]string{m.AggregateType, m.AggregateID}] {
			continue
		}
		for j, id := range matched[i] {
			l := lanes[id]
			if l == nil {
				continue
			}
			b := batches[id]
			if b == nil {
				b = &offers{l: l}
				batches[id] = b
			}
			b.events = append(b.events, offered{d: store.ClaimedEvent{Event: m.Event, Attempt: 1, CreatedAt: now}, out: &out[i][j]})
		}
	}
	slotWait, stop := context.WithTimeout(ctx, wait)
	defer stop()
	tried := func(l *lane, res *offerResult, o relay.Offered) {
		t, write := l.tried(o)
		*res = offerResult{delivered: !write, tried: t}
		if o.Sent {
			f.offered.Add(1)
		}
		if !write {
			f.direct.Add(1)
		}
	}
	var wg sync.WaitGroup
	for _, b := range batches {
		for range b.runners() {
			wg.Add(1)
			f.workers.run(func() {
				defer wg.Done()
				b.run(ctx, slotWait, tried)
			})
		}
	}
	wg.Wait()
	return out
}

// load returns the routes, read again when older than RefreshEvery (the
// supervisor sets them at every refresh).
func (f *FanOut) load(ctx context.Context) ([]route, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.routes != nil && time.Since(f.loadedAt) < f.refreshEvery {
		return f.routes, nil
	}
	all, err := f.store.EndpointList(ctx)
	if err != nil {
		return nil, fmt.Errorf("endpoint: read the endpoints: %w", err)
	}
	f.setRoutesLocked(all, time.Now())
	return f.routes, nil
}

// setRoutes routes to the endpoints all, read at when.
func (f *FanOut) setRoutes(all []store.Endpoint, when time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setRoutesLocked(all, when)
}

func (f *FanOut) setRoutesLocked(all []store.Endpoint, when time.Time) {
	routes := []route{}
	filters := map[string]*filter.Filter{}
	bad := map[uuid.UUID]string{}
	for _, e := range all {
		if e.State == store.EndpointDisabled {
			continue
		}
		r := route{id: e.ID, types: e.Types}
		if e.Filter != "" {
			r.filter = f.filters[e.Filter]
			if r.filter == nil {
				var err error
				if r.filter, err = filter.Compile(e.Filter); err != nil {
					// Written by other means than postbox endpoints (which
					// checks it): the endpoint gets nothing rather than
					// everything, which its filter was there to prevent.
					r.refused = true
					bad[e.ID] = e.Filter
					if f.badFilters[e.ID] != e.Filter {
						f.log.Error("endpoint filter does not compile: the endpoint gets no event until its filter is mended (postbox endpoints update --filter)",
							"endpoint", e.ID, "endpoint_name", e.Name, "error", err)
					}
				}
			}
			if r.filter != nil {
				filters[e.Filter] = r.filter
			}
		}
		routes = append(routes, r)
	}
	f.routes, f.loadedAt, f.filters, f.badFilters = routes, when, filters, bad
}

// Unrouted counts the events that matched no endpoint (published without a
// delivery).
func (f *FanOut) Unrouted() int64 { return f.unrouted.Load() }

// Filtered counts the times an endpoint's filter turned an event of its
// types away; FilterErrors the evaluations that failed (each turning the
// event away too, see wants).
func (f *FanOut) Filtered() int64     { return f.filtered.Load() }
func (f *FanOut) FilterErrors() int64 { return f.filterErrors.Load() }

// Routed counts the events the fan-out routed to at least one endpoint.
func (f *FanOut) Routed() int64 { return f.routed.Load() }

// Written counts the deliveries written (one per event and matching
// endpoint that did not get it directly; one already written, by an event
// published again, is not counted again). Deliveries made are the lanes'
// (Supervisor.Stats).
func (f *FanOut) Written() int64 { return f.deliveries.Load() }

// Offered counts the events offered to a lane and sent (delivered
// directly or not: Offered minus Direct is the direct attempts that
// failed, each written for its lane as its settle would have left it).
func (f *FanOut) Offered() int64 { return f.offered.Load() }

// Direct counts the events delivered directly: offered to an endpoint's
// lane, which delivered them without a delivery being written.
func (f *FanOut) Direct() int64 { return f.direct.Load() }

// String names the sink for logs.
func (f *FanOut) String() string {
	if f.within > 0 {
		return fmt.Sprintf("endpoints: fan-out to each matching endpoint, directly to idle endpoints answering within %v, else into one delivery its lane delivers", f.within)
	}
	return "endpoints: fan-out into one delivery per matching endpoint, each endpoint's lane delivering its own"
}

// Destination names the sink for traces.
func (f *FanOut) Destination() sink.Destination {
	return sink.Destination{System: "webhook", Name: "endpoints"}
}

// aggregatesTwice returns the aggregates that have more than one event in
// msgs.
func aggregatesTwice(msgs []*sink.Message) map[[2]string]bool {
	seen := make(map[[2]string]bool, len(msgs))
	var twice map[[2]string]bool
	for _, m := range msgs {
		k := [2]string{m.AggregateType, m.AggregateID}
		if seen[k] {
			if twice == nil {
				twice = map[[2]string]bool{}
			}
			twice[k] = true
		}
		seen[k] = true
	}
	return twice
}
