// Package relay drains an outbox into a sink: it claims committed events in
// batches under a lease, publishes them concurrently, and settles the
// outcomes in batched statements, with exponential backoff, a dead-letter
// state, lease renewal and reclaiming, optional per-aggregate order and a
// graceful shutdown.
//
// The pipeline, per relay instance:
//
//	claim ──► work queue ──► Concurrency publishers ──► settler
//	  ▲  (LISTEN/NOTIFY or poll)                          │
//	  └──────────── free slots ◄──────────────────────────┘
//
// The claim is one short statement; no transaction or row lock is held
// while a publisher waits on the network. Up to BatchSize + Concurrency
// events are in flight, so the next batch is claimed while the current one
// is being delivered.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// lingerDelay is how soon the relay claims again after a claim that found
// events but not a full batch. Notifications do not cut it short: while
// events flow, one claim every lingerDelay takes what committed meanwhile,
// instead of one claim per notifying commit.
const lingerDelay = 2 * time.Millisecond

// claimTimeout bounds one claim statement.
const claimTimeout = 10 * time.Second

// flowBatch is the claim size that shows events flowing at once (a few
// events committed together are not yet a flow).
const flowBatch = 4

// dozeTries is how many dozes in a row may find producers committing before
// the relay stops dozing and backs off (2 ms, then doubling up to 64 ms).
const dozeTries = 2

// dozeStuckWarning is the number of failed dozes in a row (about 10 s of
// them) after which the relay warns that it cannot doze.
const dozeStuckWarning = 160

// finalSettleTimeout bounds recording the last outcomes at shutdown, after
// the deliveries have finished or been cut short.
const finalSettleTimeout = 5 * time.Second

// Relay delivers the events of one outbox. Create it with New and start it
// with Run; several relays (in one process or many) may drain one outbox.
type Relay struct {
	cfg      Config
	log      *slog.Logger
	capacity int
	inflight *inflight
	wake     chan struct{}
	// retries are when the retries this relay scheduled fall due: the
	// claim loop wakes for them rather than waiting for the poll.
	retries retryTimes
	// dozer is the store.Dozer of the current listening connection, nil
	// while there is none or producers always notify (see store.Listening).
	dozer atomic.Pointer[store.Dozer]
}

// New validates cfg, fills its defaults and returns a relay.
func New(cfg Config) (*Relay, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Relay{
		cfg:      cfg,
		log:      cfg.Logger.With("relay", cfg.Owner),
		capacity: cfg.BatchSize + cfg.Concurrency,
		inflight: newInflight(),
		wake:     make(chan struct{}, 1),
	}, nil
}

// Owner is the name this relay leases events under.
func (r *Relay) Owner() string { return r.cfg.Owner }

// Run delivers events until ctx is cancelled, then stops claiming, lets the
// deliveries in flight finish for up to ShutdownTimeout, releases the rest to
// the queue and returns nil. It returns an error only if the relay cannot
// start.
func (r *Relay) Run(ctx context.Context) error {
	switch err := r.cfg.Store.CheckSchema(ctx, store.SchemaParams{Ordered: r.cfg.Ordered}); {
	case errors.Is(err, store.ErrNotMigrated), errors.Is(err, store.ErrOrderedNotReady):
		return err // it says what to run
	case err != nil:
		// The database may be down for now: claims retry.
		r.log.Warn("could not check that the tables are migrated", "error", err)
	}
	// Deliveries and settling outlive ctx: they end on their own terms
	// during the shutdown.
	deliverCtx, cancelDeliveries := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDeliveries()
	settleCtx, cancelSettle := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSettle()
	maintCtx, stopMaintenance := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMaintenance()

	var background sync.WaitGroup
	if r.cfg.DisableListen {
		r.log.Info(fmt.Sprintf("polling every %s: listening is disabled (Config.DisableListen, --no-listen)", r.cfg.PollInterval))
	} else {
		background.Go(func() { r.listen(maintCtx) })
	}
	background.Go(func() { r.renewLeases(maintCtx) })
	background.Go(func() { r.reclaimExpired(maintCtx) })
	if r.cfg.Retention > 0 {
		background.Go(func() { r.purgeDelivered(maintCtx) })
	}

	work := make(chan store.Delivery, r.capacity)
	results := make(chan outcome, r.capacity)
	var publishers sync.WaitGroup
	for range r.cfg.Concurrency {
		publishers.Go(func() {
			for d := range work {
				switch {
				case ctx.Err() != nil:
					results <- outcome{delivery: d, action: actionRelease}
				case !r.inflight.start(d.ID, time.Now().Add(r.sendMargin())):
					// Another relay may have taken it over: sending now
					// could overtake its delivery (and, ordered, its
					// successors).
					r.log.Warn("lease expired before the delivery started; released without sending",
						"event_id", d.ID, "aggregate_type", d.AggregateType, "aggregate_id", d.AggregateID, "attempt", d.Attempt)
					results <- outcome{delivery: d, action: actionRelease}
				default:
					results <- r.deliver(deliverCtx, d)
				}
			}
		})
	}
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		r.settle(settleCtx, results)
	}()

	r.log.Info("relay started", "store", r.cfg.Store.String(), "sink", r.cfg.Sink.String(),
		"batch", r.cfg.BatchSize, "concurrency", r.cfg.Concurrency,
		"lease", r.cfg.Lease, "ordered", r.cfg.Ordered, "max_attempts", r.cfg.MaxAttempts)
	r.claimLoop(ctx, work)

	// Shutdown: no more claims; deliveries in flight get ShutdownTimeout.
	close(work)
	r.log.Info("relay stopping", "in_flight", r.inflight.count())
	deadline := time.AfterFunc(r.cfg.ShutdownTimeout, cancelDeliveries)
	publishers.Wait()
	deadline.Stop()
	close(results)
	select {
	case <-settled:
	case <-time.After(finalSettleTimeout):
		// The database is unreachable: what is not settled comes back
		// after its lease expires, and is delivered again.
		cancelSettle()
		<-settled
	}
	stopMaintenance()
	background.Wait()
	r.log.Info("relay stopped", "unsettled", r.inflight.count())
	return nil
}

// claimLoop claims due events whenever there is room in flight, and sleeps
// until a notification, a freed slot or the poll interval otherwise.
func (r *Relay) claimLoop(ctx context.Context, work chan<- store.Delivery) {
	minClaim := max(1, min(r.cfg.BatchSize, r.cfg.Concurrency)/4)
	poll := time.NewTimer(0)
	defer poll.Stop()
	failures := 0
	var dz dozing
	for ctx.Err() == nil {
		free := r.capacity - r.inflight.count()
		if free < minClaim {
			select {
			case <-r.inflight.freed:
			case <-ctx.Done():
			}
			continue
		}
		limit := min(free, r.cfg.BatchSize)
		// The claim sees every event committed before it: a wake-up
		// already received asks for nothing more.
		select {
		case <-r.wake:
		default:
		}
		// A claim cut short by the shutdown may have committed all the
		// same: it runs to its end, and what it took is released by the
		// publishers, which see the shutdown.
		claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
		claimed := time.Now()
		batch, err := r.cfg.Store.Claim(claimCtx, store.ClaimParams{
			Owner: r.cfg.Owner, Limit: limit, Lease: r.cfg.Lease, Ordered: r.cfg.Ordered,
		})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			delay := backoff(failures, 100*time.Millisecond, 5*time.Second)
			r.log.Error("claim failed", "error", err, "retry_in", delay)
			sleep(ctx, delay)
			continue
		}
		failures = 0
		r.inflight.add(batch, claimed.Add(r.cfg.Lease))
		for _, d := range batch {
			work <- d
		}
		dz.use(r.dozer.Load())
		wait := r.untilNextClaim()
		if len(batch) > 0 {
			dz.found(ctx, len(batch))
			if len(batch) == limit {
				continue // a backlog: claim again at once
			}
			// Events are flowing: look again shortly. While producers
			// notify this relay, a notification ends the wait sooner.
			if !r.waitFor(ctx, poll, min(wait, lingerDelay), dz.marked) {
				return
			}
			continue
		}
		if dz.flow {
			// Events were flowing: one empty claim is a gap between
			// commits more often than the end of the flow. Look once
			// more before dozing (and making every producer notify).
			dz.flow = false
			if !sleep(ctx, min(wait, lingerDelay)) {
				return
			}
			continue
		}
		dz.flowing = 0
		if dz.dozer != nil && !dz.checked {
			ready, err := dz.doze(ctx)
			switch {
			case err != nil:
				// Not listening: poll until the listener is back.
			case !ready:
				// Producers are committing: their events come soon.
				if dz.busy == dozeStuckWarning {
					r.log.Warn("cannot doze: a transaction keeps holding the producers' lock (see migration 0004 of the PostgreSQL store); claiming every 64ms meanwhile")
				}
				// While still dozing, a notification ends the wait.
				delay := lingerDelay << max(0, min(dz.busy-dozeTries, 5))
				if !r.waitFor(ctx, poll, min(wait, delay), dz.marked) {
					return
				}
				continue
			default:
				// Producers notify from now on; one more claim sees
				// what those that did not are committing.
				continue
			}
		}
		dz.checked = false
		r.waitFor(ctx, poll, wait, true)
	}
}

// waitFor waits d, or less if woken is true and a wake-up comes. It
// reports false when ctx ends.
func (r *Relay) waitFor(ctx context.Context, poll *time.Timer, d time.Duration, woken bool) bool {
	var wake <-chan struct{}
	if woken {
		wake = r.wake
	}
	poll.Reset(d)
	select {
	case <-wake:
	case <-poll.C:
	case <-ctx.Done():
		return false
	}
	return true
}

// dozing is the claim loop's side of store.Dozer: producers notify the
// relay while it dozes, from an empty claim until events flow again.
type dozing struct {
	dozer store.Dozer
	// marked: producers may be notifying this relay.
	marked bool
	// checked: the relay dozed, no producer that missed it is committing,
	// and the claim that followed found nothing: it may wait.
	checked bool
	// flow: the relay stopped dozing because events flow, and has not
	// seen an empty claim since.
	flow bool
	// flowing counts the claims in a row that found events; busy, the
	// dozes in a row that found producers committing.
	flowing, busy int
}

// use follows the listening connection: a new one starts awake.
func (d *dozing) use(current *store.Dozer) {
	var dz store.Dozer
	if current != nil {
		dz = *current
	}
	if dz != d.dozer {
		*d = dozing{dozer: dz}
	}
}

// found records a claim that found n events. From the second such claim in
// a row, or one that found flowBatch, events flow: the relay claims on its
// own, and producers stop notifying it.
func (d *dozing) found(ctx context.Context, n int) {
	d.checked, d.busy = false, 0
	d.flowing++
	if (d.flowing >= 2 || n >= flowBatch) && d.marked && d.dozer.Wake(ctx) == nil {
		d.marked, d.flow = false, true
	}
}

// doze dozes after an empty claim; when it reports true the next claim is
// the last before waiting.
func (d *dozing) doze(ctx context.Context) (bool, error) {
	ready, err := d.dozer.Doze(ctx)
	if err != nil {
		return false, err
	}
	d.marked = true
	if !ready {
		d.busy++
		// Producers keep committing: every one notifies a dozing relay,
		// and notifying commits take turns. After a second try the relay
		// stops dozing and looks for their events on its own.
		if d.busy >= dozeTries && d.dozer.Wake(ctx) == nil {
			d.marked = false
		}
		return false, nil
	}
	d.checked, d.busy = true, 0
	return true, nil
}

// untilNextClaim is how long the claim loop may sleep: the poll interval,
// or less when a retry this relay scheduled falls due sooner.
func (r *Relay) untilNextClaim() time.Duration {
	wait := r.cfg.PollInterval
	if until, ok := r.retries.next(time.Now()); ok {
		wait = min(wait, until)
	}
	return wait
}

// scheduleRetry records that an event falls due again at t, and wakes the
// claim loop to shorten its sleep when t is the earliest.
func (r *Relay) scheduleRetry(t time.Time) {
	if r.retries.add(t) {
		r.notify()
	}
}

// listenRetryMax caps the wait between attempts to listen again.
const listenRetryMax = 30 * time.Second

// listen wakes the claim loop on every notification, and tries again with
// backoff when the store cannot listen for now (the claim loop polls
// meanwhile). It logs how the relay finds events: listening on a channel,
// or polling, and why.
func (r *Relay) listen(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		ready := func(l store.Listening) {
			if failures > 0 {
				r.log.Info("listening again for new events", "channel", l.Channel)
			} else {
				r.log.Info(fmt.Sprintf("listening for new events on %s; polling every %s as well", l.Channel, r.cfg.PollInterval))
			}
			failures = 0
			if l.Dozer != nil {
				r.dozer.Store(&l.Dozer)
			}
			r.notify() // events may have come while not listening
		}
		err := r.cfg.Store.Listen(ctx, ready, r.notify)
		r.dozer.Store(nil)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrCannotListen) {
			r.log.Info(fmt.Sprintf("polling every %s: %v", r.cfg.PollInterval, err))
			return
		}
		if err == nil {
			err = errors.New("the store stopped listening")
		}
		failures++
		delay := backoff(failures, 100*time.Millisecond, listenRetryMax)
		if failures == 1 || failures%10 == 0 {
			r.log.Warn(fmt.Sprintf("polling every %s until listening works: %v", r.cfg.PollInterval, err),
				"failures", failures, "retry_in", delay)
		}
		sleep(ctx, delay)
	}
}

func (r *Relay) notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// renewLeases extends the lease of every event in flight, three times per
// lease period, so long deliveries are not taken over by another relay. Each
// renewal moves the local deadline of the events it kept; an event it lost
// (another relay reclaimed it) is not sent if it has not been yet.
func (r *Relay) renewLeases(ctx context.Context) {
	tick := time.NewTicker(r.cfg.Lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ids := r.inflight.ids()
		if len(ids) == 0 {
			continue
		}
		started := time.Now()
		kept, err := r.cfg.Store.ExtendLease(ctx, r.cfg.Owner, ids, r.cfg.Lease)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Error("lease renewal failed", "events", len(ids), "error", err)
			}
			continue
		}
		if lost := r.inflight.renewed(ids, kept, started.Add(r.cfg.Lease)); lost > 0 {
			r.log.Warn("leases lost to another relay (this relay was stalled past their expiry); their events are not sent again by this relay",
				"events", lost)
		}
	}
}

// sendMargin is how much of its lease an event must have left for a
// delivery to start.
func (r *Relay) sendMargin() time.Duration { return r.cfg.Lease / 10 }

// reclaimExpired returns the events of crashed relays to the queue, at start
// and twice per lease period.
func (r *Relay) reclaimExpired(ctx context.Context) {
	every := min(max(r.cfg.Lease/2, 100*time.Millisecond), 30*time.Second)
	for {
		reclaimed, err := r.cfg.Store.ReclaimExpired(ctx, store.ReclaimParams{MaxAttempts: r.cfg.MaxAttempts})
		if err != nil && ctx.Err() == nil {
			r.log.Error("reclaiming expired leases failed", "error", err)
		}
		for _, x := range reclaimed {
			r.log.Warn("reclaimed the events of a relay whose lease expired", "expired_relay", x.Owner, "events", x.Events)
		}
		if len(reclaimed) > 0 {
			r.notify()
		}
		if !sleep(ctx, every) {
			return
		}
	}
}

// purgeDelivered deletes delivered events older than the retention, in
// batches, once a minute.
func (r *Relay) purgeDelivered(ctx context.Context) {
	const batch = 1000
	for sleep(ctx, time.Minute) {
		before := time.Now().Add(-r.cfg.Retention)
		for ctx.Err() == nil {
			n, err := r.cfg.Store.PurgeDone(ctx, before, batch)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Error("purging delivered events failed", "error", err)
				}
				break
			}
			if n < batch {
				break
			}
		}
	}
}

// sleep waits for d or ctx; it reports whether the whole time passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// inflight tracks the events this relay holds a lease on, with the local
// deadline of each lease: when it was taken or last renewed, plus the lease.
// The deadline is known without asking the database, and errs early: it
// counts from before the statement that set it.
type inflight struct {
	mu     sync.Mutex
	leases map[uuid.UUID]lease
	freed  chan struct{}
}

// lease is what the relay knows of one event it holds.
type lease struct {
	deadline time.Time
	// started: the delivery began (its deadline no longer matters).
	started bool
}

func newInflight() *inflight {
	return &inflight{leases: map[uuid.UUID]lease{}, freed: make(chan struct{}, 1)}
}

// add records a claimed batch, leased until deadline.
func (f *inflight) add(ds []store.Delivery, deadline time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range ds {
		f.leases[d.ID] = lease{deadline: deadline}
	}
}

// start reports whether the lease of id lasts beyond t, and if so records
// that its delivery starts.
func (f *inflight) start(id uuid.UUID, t time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.leases[id]
	if !ok || !l.deadline.After(t) {
		return false
	}
	l.started = true
	f.leases[id] = l
	return true
}

// renewed moves the deadline of the kept ids (a renewal of asked ids) and
// ends that of the others still in flight; it reports how many of those
// were lost before their delivery started.
func (f *inflight) renewed(asked, kept []uuid.UUID, deadline time.Time) (lost int) {
	keep := make(map[uuid.UUID]bool, len(kept))
	for _, id := range kept {
		keep[id] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range asked {
		l, ok := f.leases[id]
		switch {
		case !ok:
			continue // settled meanwhile
		case keep[id]:
			l.deadline = deadline
		default:
			l.deadline = time.Time{}
			if !l.started {
				lost++
			}
		}
		f.leases[id] = l
	}
	return lost
}

func (f *inflight) remove(ids []uuid.UUID) {
	f.mu.Lock()
	for _, id := range ids {
		delete(f.leases, id)
	}
	f.mu.Unlock()
	select {
	case f.freed <- struct{}{}:
	default:
	}
}

func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.leases)
}

func (f *inflight) ids() []uuid.UUID {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]uuid.UUID, 0, len(f.leases))
	for id := range f.leases {
		out = append(out, id)
	}
	return out
}
