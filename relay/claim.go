package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/postbox-go/postbox/store"
)

// lingerDelay is how soon the relay claims again after a claim that found
// events but not a full batch. Notifications do not cut it short: while
// events flow, one claim every lingerDelay takes what committed meanwhile,
// instead of one claim per notifying commit.
const lingerDelay = 2 * time.Millisecond

// aggregateRun is how many events of one aggregate an ordered claim takes
// at most (store.ClaimParams.AggregateRun): its head and the successors
// after it, delivered one after the other by one publisher. One event per
// aggregate per claim made an aggregate's backlog drain at one event per
// claim's round trip: after a blip of the sink, half a minute to catch up.
// Sixteen deliveries in a row stay well within a lease, which is renewed
// meanwhile.
const aggregateRun = 16

// runJobs makes the jobs of an ordered claim: one per aggregate, its events
// (a run) in sequence order, the first in delivery and the rest in then.
func runJobs(batch []store.ClaimedEvent) []job {
	batch = slices.Clone(batch)
	slices.SortStableFunc(batch, func(a, b store.ClaimedEvent) int { return cmp.Compare(a.OutboxSeq, b.OutboxSeq) })
	type key struct{ typ, id string }
	at := make(map[key]int, len(batch))
	jobs := make([]job, 0, len(batch))
	for _, d := range batch {
		k := key{d.AggregateType, d.AggregateID}
		if i, ok := at[k]; ok {
			jobs[i].then = append(jobs[i].then, d)
			continue
		}
		at[k] = len(jobs)
		jobs = append(jobs, job{delivery: d})
	}
	return jobs
}

// claimLoop claims due events whenever there is room in flight, hands them
// to the publishers, and otherwise waits for a freed slot, a notification, a
// due retry or the poll. How long it waits after each claim is the doze
// protocol's decision (see doze); how many events it asks for, claimSize's.
func (r *Relay) claimLoop(ctx context.Context, work chan<- job) {
	poll := time.NewTimer(0)
	defer poll.Stop()
	failures := 0
	var (
		dz     doze
		cursor claimCursor
	)
	size := newClaimSize(r.cfg.BatchSize)
	defer r.deliverKept(work, true)
	for ctx.Err() == nil {
		if r.health.isDown() {
			// An outage: claim nothing but probes (see outageTimeouts).
			if err := r.probe(ctx, poll, work); err != nil && ctx.Err() == nil {
				failures++
				r.claimFailed(ctx, err, failures, nil)
			}
			continue
		}
		r.deliverKept(work, false)
		room := r.cfg.Concurrency + r.pace.ahead(r.cfg.BatchSize, r.cfg.Concurrency, r.cfg.Lease)
		held, heldBytes := r.inflight.load()
		free, freeBytes := room-held, r.cfg.ClaimBytes-heldBytes
		// A claim waits for a quarter of the room, and of ClaimBytes: each
		// claim reads past the events held, so many small ones cost the
		// database more than a few large ones, and the publishers still
		// have three quarters queued meanwhile.
		if free < max(1, min(r.cfg.BatchSize, room)/4) || freeBytes < max(1, r.cfg.ClaimBytes/4) {
			select {
			case <-r.inflight.freed:
			case <-ctx.Done():
			}
			continue
		}
		limit := min(free, size.limit)
		var after store.ClaimPosition
		if !r.cfg.Ordered {
			after = cursor.next(time.Now())
		}
		begun := time.Now()
		batch, err := r.claim(ctx, limit, freeBytes, after)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			cursor.reset()
			failures++
			r.claimFailed(ctx, err, failures, &size)
			continue
		}
		failures = 0
		claimedBytes := 0
		for _, d := range batch {
			claimedBytes += len(d.Payload)
		}
		if r.cfg.Ordered {
			for _, j := range runJobs(batch) {
				work <- j
			}
		} else {
			for _, d := range batch {
				work <- job{delivery: d}
			}
		}
		// Full: all it could take, in events or in bytes (a store stops
		// before the event that would take it past its bound).
		full := len(batch) == limit || claimedBytes > freeBytes/2
		took := time.Since(begun)
		size.succeeded(limit, full, took, leasedCallTimeout(r.cfg.Lease))
		cursor.claimed(batch, full, took)
		dz.follow(r.dozer.Load())
		wait := r.untilNextClaim()
		if len(batch) > 0 {
			dz.foundEvents(ctx, len(batch))
			if full {
				continue // a backlog: claim again at once
			}
			// Events are flowing: look again shortly. While producers
			// notify this relay, a notification ends the wait sooner.
			r.waitFor(ctx, poll, min(wait, lingerDelay), dz.producersNotify())
			continue
		}
		switch dz.afterEmptyClaim(ctx) {
		case lookAgainSoon:
			r.waitFor(ctx, poll, min(wait, lingerDelay), false)
		case claimOnceMore:
		case backOffWhileCommitting:
			if dz.stuck() {
				r.log.Warn("cannot doze: a transaction keeps holding the producers' lock (see migration 0004 of the PostgreSQL store); claiming every 64ms meanwhile")
			}
			r.waitFor(ctx, poll, min(wait, dz.notReadyDelay()), dz.producersNotify())
		case waitForWakeUp:
			r.waitFor(ctx, poll, wait, true)
		}
	}
}

// claim leases up to limit due events of up to maxBytes of payload (at
// least one event) after the position after (zero: from the head) to this
// relay and records them in flight.
func (r *Relay) claim(ctx context.Context, limit, maxBytes int, after store.ClaimPosition) ([]store.ClaimedEvent, error) {
	// The claim sees every event committed before it: a wake-up already
	// received asks for nothing more.
	select {
	case <-r.wake:
	default:
	}
	// A claim cut short by the shutdown may have committed all the same:
	// it runs to its end, and what it took is released by the
	// publishers, which see the shutdown.
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leasedCallTimeout(r.cfg.Lease))
	defer cancel()
	if limit == 1 {
		maxBytes = 0 // one event is taken whatever its size: nothing to measure
	}
	claimed := time.Now()
	batch, err := r.cfg.Store.Claim(claimCtx, store.ClaimParams{
		Owner: r.cfg.Owner, Limit: limit, Lease: r.cfg.Lease, Ordered: r.cfg.Ordered, After: after,
		MaxBytes: int64(maxBytes), AggregateRun: aggregateRun,
	})
	if err := r.claimed(batch, claimed, err); err != nil {
		return nil, err
	}
	if !r.ready.Load() {
		r.ready.Store(true)
		r.failing.Store(false)
	}
	return batch, nil
}

// claimed records a claim begun at start that returned batch and err: for
// the Observer, and, when it succeeded, its events in flight.
func (r *Relay) claimed(batch []store.ClaimedEvent, start time.Time, err error) error {
	if obs := r.cfg.Observer; obs != nil {
		obs.Claimed(len(batch), time.Since(start), err)
	}
	if err != nil {
		return err
	}
	r.inflight.add(batch, start, r.cfg.Lease)
	r.counts.claimed.Add(int64(len(batch)))
	return nil
}

// claimFailed records a claim that failed, the failures-th in a row, and
// waits before the next. A claim that timed out shrinks size, unless it is
// nil (a probe's claim, of one event).
func (r *Relay) claimFailed(ctx context.Context, err error, failures int, size *claimSize) {
	r.ready.Store(false)
	r.failing.Store(true)
	r.counts.claimErrors.Add(1)
	delay := backoff(failures, 100*time.Millisecond, 5*time.Second)
	if size != nil && timedOut(err) && size.timedOut() {
		r.log.Warn(fmt.Sprintf("claim timed out; the next claims take at most %d events", size.limit),
			"error", logError(err), "timeout", leasedCallTimeout(r.cfg.Lease), "retry_in", delay)
	} else {
		r.log.Error("claim failed", "error", logError(err), "retry_in", delay)
	}
	sleep(ctx, delay)
}

// timedOut reports whether err says that a store call ran out of time.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || isTimeout(err)
}

// waitFor waits d, or until ctx ends, or less if woken is true and a
// wake-up comes.
func (r *Relay) waitFor(ctx context.Context, poll *time.Timer, d time.Duration, woken bool) {
	var wake <-chan struct{}
	if woken {
		wake = r.wake
	}
	poll.Reset(d)
	select {
	case <-wake:
	case <-poll.C:
	case <-ctx.Done():
	}
}

// untilNextClaim is how long the claim loop may sleep: the poll interval
// (Config.StreamBehindPoll while the stream is behind), or less when a retry this
// relay scheduled falls due sooner.
func (r *Relay) untilNextClaim() time.Duration {
	wait := r.cfg.PollInterval
	if r.streamBehind.Load() {
		wait = min(wait, r.cfg.StreamBehindPoll)
	}
	if until, ok := r.retries.next(time.Now()); ok {
		wait = min(wait, until)
	}
	return wait
}

// notify wakes the claim loop, if it waits for a wake-up.
func (r *Relay) notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
