package endpoint

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// FanOut is the sink of the relay that drains the outbox in endpoints mode
// (Supervisor.FanOut): it routes each event to the endpoints whose type
// filter matches it, writing one delivery per endpoint, wakes their lanes,
// and reports the event published. It is a sink.BatchSink: a batch of
// events is written in one statement. It is safe for concurrent use.
type FanOut struct {
	store        store.Endpoints
	refreshEvery time.Duration
	// written is told the endpoints it wrote deliveries for.
	written func(endpoints []uuid.UUID)

	mu       sync.Mutex
	routes   []route
	loadedAt time.Time

	unrouted, routed, deliveries atomic.Int64
}

// route is an endpoint that receives deliveries: enabled, or auto-disabled
// (its deliveries wait until it is enabled again).
type route struct {
	id    uuid.UUID
	types []string
}

var _ sink.BatchSink = (*FanOut)(nil)

// Publish writes a delivery of m for each matching endpoint and returns
// nil once they are written (an event no endpoint wants is counted by
// Unrouted). Writing again after a crash is harmless: a delivery already
// written is kept as it is.
func (f *FanOut) Publish(ctx context.Context, m *sink.Message) error {
	errs := []error{nil}
	f.PublishBatch(ctx, []*sink.Message{m}, errs)
	return errs[0]
}

// PublishBatch writes the deliveries of every message of msgs in one
// statement (store.Endpoints.DeliveryInsert) and sets errs[i] to what
// Publish would have returned for msgs[i]: nil for the messages no
// endpoint wants, the statement's error for the others when it failed.
func (f *FanOut) PublishBatch(ctx context.Context, msgs []*sink.Message, errs []error) {
	routes, err := f.load(ctx)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return
	}
	var (
		batch   []store.Route
		routed  []int // the index in msgs of each route of batch
		woken   []uuid.UUID
		touched = map[uuid.UUID]bool{}
	)
	for i, m := range msgs {
		errs[i] = nil
		var ids []uuid.UUID
		for _, r := range routes {
			if Matches(r.types, m.EventType) {
				ids = append(ids, r.id)
				if !touched[r.id] {
					touched[r.id] = true
					woken = append(woken, r.id)
				}
			}
		}
		if len(ids) == 0 {
			f.unrouted.Add(1)
			continue
		}
		batch = append(batch, store.Route{Event: m.Event, Endpoints: ids})
		routed = append(routed, i)
	}
	if len(batch) == 0 {
		return
	}
	n, err := f.store.DeliveryInsert(ctx, batch)
	if err != nil {
		err = fmt.Errorf("endpoint: fan out: %w", err)
		for _, i := range routed {
			errs[i] = err
		}
		return
	}
	f.routed.Add(int64(len(batch)))
	f.deliveries.Add(int64(n))
	if f.written != nil {
		f.written(woken)
	}
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
	for _, e := range all {
		if e.State != store.EndpointDisabled {
			routes = append(routes, route{e.ID, e.Types})
		}
	}
	f.routes, f.loadedAt = routes, when
}

// Unrouted counts the events that matched no endpoint (published without a
// delivery).
func (f *FanOut) Unrouted() int64 { return f.unrouted.Load() }

// Routed counts the events the fan-out wrote deliveries for.
func (f *FanOut) Routed() int64 { return f.routed.Load() }

// Written counts the deliveries written (one per event and matching
// endpoint; one already written, by an event published again, is not
// counted again). Deliveries made are the lanes' (Supervisor.Stats).
func (f *FanOut) Written() int64 { return f.deliveries.Load() }

// String names the sink for logs.
func (f *FanOut) String() string {
	return "webhook endpoints: fan-out into one delivery per matching endpoint, each endpoint's lane delivering its own"
}

// Destination names the sink for traces.
func (f *FanOut) Destination() sink.Destination {
	return sink.Destination{System: "webhook", Name: "endpoints"}
}
