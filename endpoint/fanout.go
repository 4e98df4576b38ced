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

// RefreshEveryDefault is how often FanOut and Dispatcher read the
// endpoints again when their Config leaves it zero.
const RefreshEveryDefault = 2 * time.Second

// FanOutConfig configures a FanOut.
type FanOutConfig struct {
	// Store holds the endpoints and their deliveries. Required.
	Store store.Endpoints
	// RefreshEvery is how long the endpoints read are used before they are
	// read again (default RefreshEveryDefault): an endpoint added, removed
	// or changed is routed to within that time.
	RefreshEvery time.Duration
	// Written, when set, is called with the endpoints it wrote
	// deliveries for (a Dispatcher's Wake, to deliver them at once).
	Written func(endpoints ...uuid.UUID)
}

// FanOut is the relay's sink in endpoints mode: it routes each event to
// the endpoints whose type filter matches it, writing one delivery row per
// endpoint, and reports it published. It is safe for concurrent use.
type FanOut struct {
	cfg FanOutConfig

	mu       sync.Mutex
	routes   []route
	loadedAt time.Time

	unrouted  atomic.Int64
	delivered atomic.Int64
}

// route is an endpoint that receives deliveries: enabled, or auto-disabled
// (its deliveries wait until it is enabled again).
type route struct {
	id    uuid.UUID
	types []string
}

var _ sink.Sink = (*FanOut)(nil)

// NewFanOut returns a FanOut for cfg.
func NewFanOut(cfg FanOutConfig) (*FanOut, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("endpoint: FanOutConfig.Store is nil")
	}
	if cfg.RefreshEvery <= 0 {
		cfg.RefreshEvery = RefreshEveryDefault
	}
	return &FanOut{cfg: cfg}, nil
}

// Publish writes a delivery of m for each matching endpoint and returns
// nil once they are written (an event no endpoint wants is counted by
// Unrouted). Writing again after a crash is harmless: a delivery already
// written is kept as it is.
func (f *FanOut) Publish(ctx context.Context, m *sink.Message) error {
	routes, err := f.load(ctx)
	if err != nil {
		return err
	}
	var ids []uuid.UUID
	for _, r := range routes {
		if Matches(r.types, m.EventType) {
			ids = append(ids, r.id)
		}
	}
	if len(ids) == 0 {
		f.unrouted.Add(1)
		return nil
	}
	n, err := f.cfg.Store.DeliveryInsert(ctx, []store.Route{{Event: m.Event, Endpoints: ids}})
	if err != nil {
		return fmt.Errorf("endpoint: fan out: %w", err)
	}
	f.delivered.Add(int64(n))
	if f.cfg.Written != nil {
		f.cfg.Written(ids...)
	}
	return nil
}

// load returns the routes, read again when older than RefreshEvery.
func (f *FanOut) load(ctx context.Context) ([]route, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.routes != nil && time.Since(f.loadedAt) < f.cfg.RefreshEvery {
		return f.routes, nil
	}
	all, err := f.cfg.Store.EndpointList(ctx)
	if err != nil {
		return nil, fmt.Errorf("endpoint: read the endpoints: %w", err)
	}
	routes := []route{}
	for _, e := range all {
		if e.State != store.EndpointDisabled {
			routes = append(routes, route{e.ID, e.Types})
		}
	}
	f.routes, f.loadedAt = routes, time.Now()
	return routes, nil
}

// Unrouted counts the events that matched no endpoint.
func (f *FanOut) Unrouted() int64 { return f.unrouted.Load() }

// Written counts the delivery rows written.
func (f *FanOut) Written() int64 { return f.delivered.Load() }

// String names the sink for logs.
func (f *FanOut) String() string {
	return "webhook endpoints: fan-out into one delivery per matching endpoint"
}

// Destination names the sink for traces.
func (f *FanOut) Destination() sink.Destination {
	return sink.Destination{System: "webhook", Name: "endpoints"}
}
