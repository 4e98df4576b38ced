package endpoint

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// Outcomes of deliveries are settled together: every settleEvery, or once
// settleBatch wait, in one round trip.
const (
	settleBatch = 256
	settleEvery = 10 * time.Millisecond
)

// Dispatcher delivers the deliveries FanOut writes, every enabled endpoint
// in a loop of its own (see the package documentation).
type Dispatcher struct {
	cfg      Config
	client   *http.Client
	attempts *batcher[store.Attempt]
	settles  *batcher[store.DeliveryOutcome]

	mu      sync.Mutex
	workers map[uuid.UUID]*worker
	all     sync.WaitGroup // every worker and its deliveries

	stats struct {
		delivered, retried, failed, dropped, breakerOpened, autoDisabled atomic.Int64
	}
}

// Stats are a Dispatcher's counts since it started.
type Stats struct {
	Delivered, Retried, Failed, Dropped int64
	// BreakerOpened counts the times a breaker opened; AutoDisabled the
	// endpoints disabled for failing too long.
	BreakerOpened, AutoDisabled int64
	// Endpoints is the number of endpoints being delivered to.
	Endpoints int
}

// NewDispatcher returns a Dispatcher for cfg, refusing an invalid Config
// with an error that names the field.
func NewDispatcher(cfg Config) (*Dispatcher, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{cfg: cfg, client: withCapture(cfg.Client), workers: map[uuid.UUID]*worker{}}
	d.attempts = newBatcher(cfg.AttemptsBatch, cfg.AttemptsFlush, func(ctx context.Context, a []store.Attempt) {
		if err := cfg.Store.AttemptInsert(ctx, a); err != nil {
			cfg.Logger.Warn("writing the attempts log failed; these attempts are not logged", "attempts", len(a), "error", err)
		}
	})
	d.settles = newBatcher(settleBatch, settleEvery, func(ctx context.Context, o []store.DeliveryOutcome) {
		if err := cfg.Store.DeliverySettle(ctx, cfg.Owner, o); err != nil {
			cfg.Logger.Warn("settling deliveries failed; they are attempted again once their lease expires", "deliveries", len(o), "error", err)
		}
	})
	return d, nil
}

// Run delivers until ctx is done; then the deliveries in flight finish
// (each within Timeout), the attempts log is written, and it returns nil.
func (d *Dispatcher) Run(ctx context.Context) error {
	var writers sync.WaitGroup
	writers.Go(d.attempts.run)
	writers.Go(d.settles.run)
	d.cfg.Logger.Info("endpoint dispatcher started", "owner", d.cfg.Owner,
		"breaker_failures", d.cfg.BreakerFailures, "disable_after", d.cfg.DisableAfter, "retention", d.cfg.Retention)
	refresh := time.NewTicker(d.cfg.RefreshEvery)
	defer refresh.Stop()
	poll := time.NewTicker(d.cfg.PollInterval)
	defer poll.Stop()
	d.refresh(ctx)
	nextPurge := time.Now()
	for {
		if !time.Now().Before(nextPurge) {
			d.purge(ctx)
			nextPurge = time.Now().Add(d.cfg.PurgeEvery)
		}
		select {
		case <-poll.C:
			d.poll(ctx)
		case <-refresh.C:
			d.refresh(ctx)
		case <-ctx.Done():
			d.mu.Lock()
			for id, w := range d.workers {
				w.stop()
				delete(d.workers, id)
			}
			d.mu.Unlock()
			d.all.Wait()
			close(d.attempts.in)
			close(d.settles.in)
			writers.Wait()
			return nil
		}
	}
}

// refresh reads the endpoints, starts a loop for each enabled one, stops
// the loops of the others, and restarts one whose settings changed (its
// URL, its secrets, limits; a rotation's grace period that ended). It also
// reclaims expired leases.
func (d *Dispatcher) refresh(ctx context.Context) {
	if n, err := d.cfg.Store.DeliveryReclaim(ctx, d.cfg.MaxAttempts); err != nil && ctx.Err() == nil {
		d.cfg.Logger.Warn("reclaiming expired deliveries failed", "error", err)
	} else if n > 0 {
		d.cfg.Logger.Warn("deliveries of a stopped dispatcher reclaimed", "deliveries", n)
	}
	all, err := d.cfg.Store.EndpointList(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.Logger.Warn("reading the endpoints failed", "error", err)
		}
		return
	}
	now := time.Now()
	want := map[uuid.UUID]store.Endpoint{}
	for _, e := range all {
		if e.State == store.EndpointEnabled {
			want[e.ID] = e
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	for id, w := range d.workers {
		if e, ok := want[id]; !ok || settingsKey(e, now) != w.key {
			w.stop()
			delete(d.workers, id)
		}
	}
	for id, e := range want {
		if _, ok := d.workers[id]; ok {
			continue
		}
		w, err := d.newWorker(e, now)
		if err != nil {
			d.cfg.Logger.Error("endpoint not delivered to: its settings are refused", "endpoint", e.ID, "name", e.Name, "error", err)
			continue
		}
		d.workers[id] = w
		d.all.Add(1)
		go func() {
			defer d.all.Done()
			w.run(ctx)
		}()
	}
}

// settingsKey is what a worker is built from: when it changes, the worker
// is built again.
func settingsKey(e store.Endpoint, now time.Time) string {
	return fmt.Sprint(e.URL, "|", strings.Join(e.Secrets(now), " "), "|", e.RatePerSecond, "|", e.Concurrency, "|", e.Shadow)
}

// purge deletes the attempts and finished deliveries older than the
// retention, in bounded batches.
func (d *Dispatcher) purge(ctx context.Context) {
	before := time.Now().Add(-d.cfg.Retention)
	total := 0
	for ctx.Err() == nil {
		n, err := d.cfg.Store.EndpointsPurge(ctx, before, d.cfg.PurgeBatch)
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Logger.Warn("purging old attempts and deliveries failed", "error", err)
			}
			return
		}
		if total += n; n < d.cfg.PurgeBatch {
			break
		}
	}
	if total > 0 {
		d.cfg.Logger.Info("old attempts and deliveries purged", "rows", total, "retention", d.cfg.Retention)
	}
}

// poll wakes the idle endpoints that have deliveries due: the ones
// written by other processes, and retries whose backoff ended. It asks
// for all endpoints in one query, so idle endpoints cost no claims.
func (d *Dispatcher) poll(ctx context.Context) {
	d.mu.Lock()
	ids := make([]uuid.UUID, 0, len(d.workers))
	for id := range d.workers {
		ids = append(ids, id)
	}
	d.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	due, err := d.cfg.Store.DeliveryDue(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.Logger.Warn("looking for due deliveries failed", "error", err)
		}
		return
	}
	if len(due) > 0 {
		d.Wake(due...)
	}
}

// Wake makes the endpoints look for deliveries at once, all of them when
// none is given (FanOut calls it with those it wrote deliveries for).
func (d *Dispatcher) Wake(endpoints ...uuid.UUID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	wake := func(w *worker) {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	if len(endpoints) == 0 {
		for _, w := range d.workers {
			wake(w)
		}
	}
	for _, id := range endpoints {
		if w, ok := d.workers[id]; ok {
			wake(w)
		}
	}
}

// Stats returns the counts since the Dispatcher started.
func (d *Dispatcher) Stats() Stats {
	d.mu.Lock()
	n := len(d.workers)
	d.mu.Unlock()
	return Stats{
		Delivered: d.stats.delivered.Load(), Retried: d.stats.retried.Load(), Failed: d.stats.failed.Load(),
		Dropped: d.stats.dropped.Load(), BreakerOpened: d.stats.breakerOpened.Load(),
		AutoDisabled: d.stats.autoDisabled.Load(), Endpoints: n,
	}
}
