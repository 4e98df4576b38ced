package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

// idleWait is how long a worker that found nothing to deliver waits when
// nothing wakes it; Dispatcher.poll wakes it within PollInterval once it
// has deliveries due.
const idleWait = time.Minute

// worker delivers one endpoint's deliveries: its own claims, slots, rate
// limit and breaker.
type worker struct {
	d       *Dispatcher
	ep      store.Endpoint
	key     string
	sink    *webhook.Sink
	limiter *tokenBucket
	breaker *breaker
	slots   chan struct{}
	wake    chan struct{}
	stop    context.CancelFunc
	ctx     context.Context

	mu           sync.Mutex
	failingSince time.Time
	// disabling is set by the first attempt that disables the endpoint.
	disabling atomic.Bool
}

func (d *Dispatcher) newWorker(e store.Endpoint, now time.Time) (*worker, error) {
	s, err := webhook.New(webhook.Config{
		URL: e.URL, Secrets: e.Secrets(now), Timeout: d.cfg.Timeout,
		MaxConcurrency: e.Concurrency, Client: d.client,
	})
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	return &worker{
		d: d, ep: e, key: settingsKey(e, now), sink: s, limiter: newTokenBucket(e.RatePerSecond),
		breaker: &breaker{threshold: d.cfg.BreakerFailures, pauseMin: d.cfg.BreakerPauseMin, pauseMax: d.cfg.BreakerPauseMax},
		slots:   make(chan struct{}, e.Concurrency), wake: make(chan struct{}, 1),
		stop: stop, ctx: ctx, failingSince: e.FailingSince,
	}, nil
}

// run claims and delivers until ctx is done or the worker is stopped; it
// returns once its deliveries in flight have ended.
func (w *worker) run(ctx context.Context) {
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	stop := context.AfterFunc(ctx, w.stop)
	defer stop()
	log := w.d.cfg.Logger.With("endpoint", w.ep.ID, "name", w.ep.Name)
	log.Info("delivering to endpoint", "sink", w.sink.String(), "types", w.ep.Types,
		"rate_per_second", w.ep.RatePerSecond, "shadow", w.ep.Shadow)
	for w.ctx.Err() == nil {
		limit, wait := w.breaker.allow(time.Now(), w.freeSlots())
		if wait > 0 {
			w.sleep(wait)
			continue
		}
		limit = min(limit, w.limiter.available())
		got := w.takeSlots(limit)
		if got == 0 {
			return
		}
		claimed, err := w.claim(got)
		w.releaseSlots(got - len(claimed))
		if w.ctx.Err() != nil { // stopped during the claim
			w.release(claimed)
			w.releaseSlots(len(claimed))
			return
		}
		if err != nil {
			log.Warn("claiming deliveries failed", "error", err)
			w.breaker.abandon()
			w.sleep(w.d.cfg.PollInterval)
			continue
		}
		if len(claimed) == 0 {
			w.breaker.abandon() // a probe that found nothing to deliver
			w.sleep(idleWait)   // until the fan-out or the dispatcher's poll wakes it
			continue
		}
		for _, dl := range claimed {
			_ = w.limiter.wait(context.Background()) // at most a second: claims are bounded by the burst
			inFlight.Add(1)
			go func() {
				defer inFlight.Done()
				defer w.releaseSlots(1)
				w.deliver(dl, log)
			}()
		}
	}
}

// claim takes up to n deliveries, within Timeout. The worker's stop does
// not cut it: a claim that the server committed while the client gave up
// would leave its deliveries leased, and not attempted, until the lease
// expired.
func (w *worker) claim(n int) ([]store.EndpointDelivery, error) {
	ctx, cancel := context.WithTimeout(context.Background(), w.d.cfg.Timeout)
	defer cancel()
	return w.d.cfg.Store.DeliveryClaim(ctx, store.DeliveryClaimParams{
		EndpointID: w.ep.ID, Owner: w.d.cfg.Owner, Limit: n, Lease: w.d.cfg.Lease,
	})
}

// release puts back deliveries claimed once the worker stopped (the
// endpoint disabled or changed, the dispatcher stopping), due at once and
// not attempted: a disabled endpoint receives nothing more.
func (w *worker) release(claimed []store.EndpointDelivery) {
	for _, dl := range claimed {
		w.d.settles.add(store.DeliveryOutcome{EventID: dl.ID, EndpointID: w.ep.ID, Status: store.StatusPending,
			AvailableAt: time.Now(), LastError: dl.LastError})
	}
}

func (w *worker) freeSlots() int { return cap(w.slots) - len(w.slots) }

// takeSlots waits for free slots, half the endpoint's concurrency (so
// that claims take several deliveries at once) or limit if less, then
// takes up to limit; 0 when the worker stopped.
func (w *worker) takeSlots(limit int) int {
	n := 0
	for n < max(1, min(limit, cap(w.slots)/2)) {
		select {
		case w.slots <- struct{}{}:
			n++
		case <-w.ctx.Done():
			w.releaseSlots(n)
			return 0
		}
	}
	for n < limit {
		select {
		case w.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

func (w *worker) releaseSlots(n int) {
	for range n {
		<-w.slots
	}
}

// sleep waits for d, a wake-up or the worker's end.
func (w *worker) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.wake:
	case <-w.ctx.Done():
	}
}

// deliver makes one attempt, logs it and settles the delivery; once the
// worker stopped, it releases the delivery instead.
func (w *worker) deliver(dl store.EndpointDelivery, log *slog.Logger) {
	if w.ctx.Err() != nil {
		w.release([]store.EndpointDelivery{dl})
		return
	}
	cfg := w.d.cfg
	var a answer
	start := time.Now()
	err := w.sink.Publish(withAnswer(context.Background(), &a), &sink.Message{Event: dl.Event, Attempt: dl.Attempt})
	now := time.Now()
	status, body := a.read()
	attempt := store.Attempt{EndpointID: w.ep.ID, EventID: dl.ID, EventType: dl.EventType, Attempt: dl.Attempt,
		StatusCode: status, Duration: now.Sub(start), Response: body, At: now}
	out := store.DeliveryOutcome{EventID: dl.ID, EndpointID: w.ep.ID, Status: store.StatusDone}
	if err != nil {
		attempt.Error = err.Error()
		out.LastError = err.Error()
		kind, retryAfter, _ := sink.Classify(err)
		switch {
		case kind == sink.Permanent, kind == sink.Rejected && dl.Attempt >= cfg.RejectedAttempts, dl.Attempt >= cfg.MaxAttempts:
			out.Status = store.StatusFailed
			if w.ep.Shadow {
				out.Status = store.StatusDropped
			}
		default:
			out.Status = store.StatusPending
			out.AvailableAt = now.Add(max(backoff(dl.Attempt, cfg.BackoffMin, cfg.BackoffMax), retryAfter))
		}
	}
	w.d.attempts.add(attempt)
	w.d.settles.add(out)
	w.count(out.Status)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	w.health(ctx, err == nil, now, log)
}

func (w *worker) count(status string) {
	s := &w.d.stats
	switch status {
	case store.StatusDone:
		s.delivered.Add(1)
	case store.StatusPending:
		s.retried.Add(1)
	case store.StatusFailed:
		s.failed.Add(1)
	case store.StatusDropped:
		s.dropped.Add(1)
	}
}

// health feeds the breaker and the failing period with an attempt's
// result, and disables the endpoint once it failed for DisableAfter.
func (w *worker) health(ctx context.Context, ok bool, now time.Time, log *slog.Logger) {
	// A shadow endpoint never alerts: its news are logged at info level.
	warn := log.Warn
	if w.ep.Shadow {
		warn = log.Info
	}
	opened, closed, pause := w.breaker.record(ok, now)
	switch {
	case opened:
		w.d.stats.breakerOpened.Add(1)
		warn("endpoint failing: breaker open, deliveries paused", "pause", pause)
	case closed:
		log.Info("endpoint answers again: breaker closed")
	}
	w.mu.Lock()
	since := w.failingSince
	w.mu.Unlock()
	if ok {
		if !since.IsZero() {
			w.setFailingSince(time.Time{})
			if err := w.d.cfg.Store.EndpointRecovered(ctx, w.ep.ID); err != nil {
				log.Warn("recording the endpoint's recovery failed", "error", err)
			}
		}
		return
	}
	if since.IsZero() {
		var err error
		if since, err = w.d.cfg.Store.EndpointFailing(ctx, w.ep.ID, now); err != nil {
			if !errors.Is(err, store.ErrEndpointNotFound) {
				log.Warn("recording the endpoint's failure failed", "error", err)
			}
			return
		}
		w.setFailingSince(since)
	}
	if now.Sub(since) < w.d.cfg.DisableAfter || !w.disabling.CompareAndSwap(false, true) {
		return
	}
	err := w.d.cfg.Store.EndpointSetState(ctx, w.ep.ID, store.EndpointAutoDisabled)
	if err != nil {
		log.Warn("disabling the failing endpoint failed; the next failure tries again", "error", err)
		w.disabling.Store(false)
		return
	}
	w.d.stats.autoDisabled.Add(1)
	warn(fmt.Sprintf("endpoint disabled: every attempt failed for %v; its deliveries wait, postbox endpoints enable %s delivers them", now.Sub(since).Round(time.Second), w.ep.ID),
		"failing_since", since)
	w.stop()
}

func (w *worker) setFailingSince(t time.Time) {
	w.mu.Lock()
	w.failingSince = t
	w.mu.Unlock()
}

// backoff is the delay before attempt+1: exponential from min, capped at
// max, with jitter (between half and all of it).
func backoff(attempt int, minDelay, maxDelay time.Duration) time.Duration {
	d := minDelay << min(attempt-1, 30)
	if d > maxDelay || d <= 0 {
		d = maxDelay
	}
	return d/2 + rand.N(d/2+1)
}
