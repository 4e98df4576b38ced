package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

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
	// destination names the sink in publish spans (with Config.Tracer).
	destination sink.Destination
	// retries are when the retries this relay scheduled fall due: the
	// claim loop wakes for them rather than waiting for the poll.
	retries retryTimes
	// dozer is the store.Dozer of the current listening connection, nil
	// while there is none or producers always notify (see store.Listening).
	dozer atomic.Pointer[store.Dozer]
	// counts, ready, failing and finding are what Stats, Ready and
	// Failing report.
	counts  counters
	ready   atomic.Bool
	failing atomic.Bool
	// accepting is true while Run takes offers (Offer): from when its
	// publishers start until it stops claiming.
	accepting atomic.Bool
	finding   atomic.Pointer[finding]
	// streamBehind: the stream (Config.Stream) is behind, and the claim
	// loop looks for new events every Config.StreamBehindPoll (see
	// watchStream).
	streamBehind atomic.Bool
	// health follows whether the sink can be reached (see outageTimeouts).
	health *sinkHealth
	// pace follows how long deliveries take, which bounds the events
	// claimed ahead of the publishers.
	pace pace
	// culprits are the events the sink is unreachable with, alone; run
	// counts the probes failing on one event (see culpritProbes).
	culprits culprits
	run      probeRun
}

// New validates cfg, fills its defaults and returns a relay.
func New(cfg Config) (*Relay, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Relay{
		cfg:      cfg,
		log:      cfg.Logger.With("relay", cfg.Owner),
		capacity: cfg.BatchSize + cfg.Concurrency,
		inflight: newInflight(),
		wake:     make(chan struct{}, 1),
		health:   newSinkHealth(),
	}
	if cfg.Tracer != nil {
		r.destination = cfg.Sink.Destination()
	}
	r.finding.Store(notRunning)
	return r, nil
}

// Owner is the name this relay leases events under.
func (r *Relay) Owner() string { return r.cfg.Owner }

// Run delivers events until ctx is cancelled, then stops claiming, lets the
// deliveries in flight finish for up to ShutdownTimeout, releases the rest to
// the queue and returns nil. It returns an error only if the relay cannot
// start.
func (r *Relay) Run(ctx context.Context) error {
	checkCtx, cancel := context.WithTimeout(ctx, storeCallTimeout)
	err := r.cfg.Store.CheckSchema(checkCtx, store.SchemaParams{Ordered: r.cfg.Ordered})
	cancel()
	switch {
	case errors.Is(err, store.ErrNotMigrated), errors.Is(err, store.ErrOrderedNotReady):
		return err // it says what to run
	case err != nil:
		// The database may be down for now: claims retry.
		r.log.Warn("could not check that the tables are migrated", "error", logError(err))
	}
	if r.cfg.Stream != nil {
		checkCtx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		err := r.cfg.Stream.Check(checkCtx)
		cancel()
		if err != nil {
			return err
		}
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
	switch {
	case r.cfg.Stream != nil:
		why := "streaming the outbox's inserts from " + r.cfg.Stream.String()
		r.finding.Store(&finding{pollingReason: why})
		behind := "not more often while the stream is behind (turned off)"
		if r.cfg.StreamBehindPoll > 0 {
			behind = "every " + r.cfg.StreamBehindPoll.String() + " while the stream is behind"
		}
		r.log.Info(fmt.Sprintf("%s; polling every %s for retries and what the stream misses, %s", why, r.cfg.PollInterval, behind))
	case r.cfg.DisableListen:
		const why = "listening is disabled (Config.DisableListen, --no-listen)"
		r.finding.Store(&finding{pollingReason: why})
		r.log.Info(fmt.Sprintf("polling every %s: %s", r.cfg.PollInterval, why))
	default:
		r.finding.Store(&finding{pollingReason: "not listening yet"})
		background.Go(func() { r.listen(maintCtx) })
	}
	background.Go(func() { r.renewLeases(maintCtx) })
	background.Go(func() { r.watchLeases(maintCtx) })
	background.Go(func() { r.reclaimExpired(maintCtx) })
	background.Go(func() { r.expireDelivered(maintCtx) })

	work := make(chan job, r.capacity)
	results := make(chan outcome, r.capacity)
	var publishers sync.WaitGroup
	for range r.publishers() {
		if r.cfg.PublishBatch > 1 {
			publishers.Go(func() { r.publishBatches(ctx, deliverCtx, work, results) })
		} else {
			publishers.Go(func() { r.publish(ctx, deliverCtx, work, results) })
		}
	}
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		r.settle(settleCtx, results)
	}()

	r.log.Info("relay started", "store", r.cfg.Store.String(), "sink", r.cfg.Sink.String(),
		"batch", r.cfg.BatchSize, "concurrency", r.cfg.Concurrency, "publish", r.publishing(),
		"lease", r.cfg.Lease, "ordered", r.cfg.Ordered, "max_attempts", r.cfg.MaxAttempts,
		"probe_interval", r.cfg.ProbeInterval, "dedup_window", max(r.cfg.DedupWindow, 0))
	var streaming sync.WaitGroup
	if r.cfg.Stream != nil {
		streaming.Go(func() { r.follow(ctx, work) })
		if r.cfg.StreamBehindPoll > 0 {
			streaming.Go(func() { r.watchStream(ctx) })
		}
	}
	r.accepting.Store(true)
	r.claimLoop(ctx, work)
	r.accepting.Store(false)
	streaming.Wait()
	r.ready.Store(false)

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
	r.endOutage()
	r.finding.Store(notRunning)
	r.log.Info("relay stopped", "unsettled", r.inflight.count())
	return nil
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
