package endpoint

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// Direct delivery. Writing a delivery for every (event, endpoint) and
// deleting it once delivered costs the database three row writes per
// delivery (the delivery, its delete, the lane's lease), where the relay of
// one URL spends less than one per event: ten endpoints delivered that way
// ran at 0.4 of the single URL's events/s. So the fan-out first offers each
// event to the lanes of the endpoints measured fast
// (lane.takesOffers: recent attempts within SupervisorConfig.DirectWithin or a few
// times the median endpoint's, no rate limit, and in ordered mode nothing
// queued), which deliver it at once through
// their relay (relay.Relay.Offer: the same sink chain, retry policy,
// outage rule, observer and attempts log as a claimed delivery), and writes
// a delivery only for the endpoints that did not get it: not offered,
// released (unreachable: due at once, no attempt counted), to be retried
// (one attempt counted, due after the backoff), or failed (a dead letter at
// once). The outbox event is done once they are written, so a crash before
// that delivers the event again to every endpoint, with the same
// webhook-id, as a crash of the relay of one URL does.

// directPace follows how long one endpoint's attempts take (every attempt,
// offered or claimed, through the attempts log): the fan-out offers events
// only to an endpoint whose attempts are known to be fast, so that a slow
// endpoint never holds the others' events back.
type directPace struct {
	mu sync.Mutex
	// known: at least one attempt was measured; until then the endpoint's
	// deliveries are written for its lane, which measures them.
	known bool
	// mean is an exponentially weighted mean of the attempts' durations,
	// last the last one's.
	mean, last time.Duration
}

// paceWeight is the weight of the newest attempt in directPace.mean.
const paceWeight = 0.2

// record adds an attempt that took took.
func (p *directPace) record(took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.known {
		p.known, p.mean = true, took
	} else {
		p.mean += time.Duration(paceWeight * float64(took-p.mean))
	}
	p.last = took
}

// fast reports whether the endpoint's attempts are known to take at most
// d (the mean and the last one).
func (p *directPace) fast(d time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.known && p.mean <= d && p.last <= d
}

// measured returns the mean, and whether any attempt was measured.
func (p *directPace) measured() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mean, p.known
}

// directSpread: an endpoint is fast enough for the fan-out's offers when its
// attempts take at most SupervisorConfig.DirectWithin, or at most directSpread times
// the median endpoint's. The relative bound keeps direct delivery on when
// every attempt slows together (a busy machine, every partner far away),
// which only makes each fan-out batch take longer, and leaves out the
// endpoint much slower than the rest, which would hold their events back.
// An offer waits for one of its endpoint's slots as long as the median
// endpoint takes to deliver directSpread times the batch (its mean over
// its concurrency, times the batch's events), at least DirectWithin: so an
// endpoint of low concurrency does not make every batch wait for it; what
// it cannot take in time is written for its lane.
const directSpread = 4

// directBounds returns how long the attempts of an endpoint taking offers
// may take, and how long an offer of a batch of n events may wait for one
// of its endpoint's slots, given the means and the concurrencies of the
// endpoints measured so far (both sorted in place).
func directBounds(within time.Duration, means, perSlot []time.Duration, n int) (attempt, wait time.Duration) {
	if len(means) == 0 {
		return within, within
	}
	// The lower median: of two endpoints, the faster sets the bound.
	slices.Sort(means)
	slices.Sort(perSlot)
	mid := (len(means) - 1) / 2
	return max(within, directSpread*means[mid]), max(within, directSpread*time.Duration(n)*perSlot[mid])
}

// takesOffers reports whether the fan-out may offer l events (in ordered
// mode, before it asks the store whether l has deliveries queued): l runs,
// its endpoint has no rate limit (a token bucket would hold the fan-out),
// and its attempts are known to take at most bound. An endpoint not
// measured yet gets its deliveries written: its lane's first attempts
// measure it, and no fan-out batch waits for an endpoint that may turn out
// slow.
func (l *lane) takesOffers(bound time.Duration) bool {
	if bound <= 0 || l.stopping || l.e.RatePerSecond > 0 {
		return false
	}
	return l.pace.fast(bound)
}

// offers are the events of one fan-out batch offered to one lane: its
// runners (up to the endpoint's concurrency) each take one of the
// endpoint's slots (shared with the lane's own deliveries: slotted) and
// deliver the events in turn, so that a batch's offers wait for a slot in
// a few goroutines, not one each.
type offers struct {
	l *lane
	// events are the events to offer, with where each one's result goes.
	events []offered
	// next is the index in events of the next one to take.
	next atomic.Int64
}

// offered is one event to offer, and where its outcome goes.
type offered struct {
	d   store.ClaimedEvent
	out *offerResult
}

// runners is how many runners deliver the offers at once.
func (o *offers) runners() int { return min(cap(o.l.slots), len(o.events)) }

// run is one runner: it takes a slot, waiting until slotWait ends (the
// batch's one deadline), and delivers the events not taken yet through
// the lane's relay (relay.Relay.Offer), under ctx, while slotWait has not
// ended; an event it does not take stays not offered (its delivery is
// written).
func (o *offers) run(ctx, slotWait context.Context, tried func(*lane, *offerResult, relay.Offered)) {
	l := o.l
	select {
	case l.slots <- struct{}{}:
	default:
		select {
		case l.slots <- struct{}{}:
		case <-slotWait.Done():
			return
		}
	}
	defer func() { <-l.slots }()
	ctx = context.WithValue(ctx, slotHeld{}, true)
	for slotWait.Err() == nil {
		k := int(o.next.Add(1)) - 1
		if k >= len(o.events) {
			return
		}
		e := o.events[k]
		r, ok := l.relay.Offer(ctx, e.d)
		if !ok {
			return // the lane takes no offers now: the rest are written
		}
		tried(l, e.out, r)
	}
}

// tried is how the delivery of an event offered to l is written, given
// what the offer returned (nothing when it was delivered: the supervisor
// offers nothing when delivered deliveries are kept).
func (l *lane) tried(o relay.Offered) (store.Tried, bool) {
	switch o.Outcome {
	case relay.OutcomeDelivered:
		return store.Tried{}, false
	case relay.OutcomeRetry:
		return store.Tried{Status: store.StatusPending, Attempts: 1, RetryAt: o.RetryAt, LastError: o.LastError}, true
	case relay.OutcomeFailed:
		status := store.StatusFailed
		if l.e.Shadow {
			status = store.StatusDropped
		}
		return store.Tried{Status: status, Attempts: 1, LastError: o.LastError}, true
	}
	// Released: due at once, no attempt counted; the lane probes.
	return store.Tried{}, true
}

// workers runs the fan-out's offers in goroutines that outlive them: an
// offer walks deep into the HTTP client, and a goroutine started for each
// grew its stack through it every time (12 % of the relay's CPU in endpoints
// mode). A task goes to an idle worker, or to a new one when none is idle;
// a worker idle for workerIdle ends.
type workers struct {
	tasks chan func()
}

// workerIdle is how long a worker waits for its next task.
const workerIdle = 10 * time.Second

func newWorkers() *workers { return &workers{tasks: make(chan func())} }

// run runs task in a worker.
func (w *workers) run(task func()) {
	select {
	case w.tasks <- task:
	default:
		go w.work(task)
	}
}

func (w *workers) work(task func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		task()
		idle.Reset(workerIdle)
		select {
		case task = <-w.tasks:
		case <-idle.C:
			return
		}
	}
}

// slotted is the outermost sink middleware of an endpoint: each of its
// deliveries, claimed by its lane or offered by the fan-out, holds one of
// the endpoint's slots (lane.slots, as many as its concurrency) while it
// runs, so that the two share the endpoint's concurrency and an offer
// waits for a slot no longer than its batch's deadline. An offer's runner
// holds its slot already (slotHeld in the context); a claimed delivery
// waits for one under its own context.
type slotted struct {
	next  sink.Sink
	slots chan struct{}
}

// slotHeld marks the context of a delivery whose runner holds a slot.
type slotHeld struct{}

func (s *slotted) Publish(ctx context.Context, m *sink.Message) error {
	if ctx.Value(slotHeld{}) == nil {
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-s.slots }()
	}
	return s.next.Publish(ctx, m)
}

func (s *slotted) String() string { return s.next.String() }

func (s *slotted) Destination() sink.Destination { return s.next.Destination() }
