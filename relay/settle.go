package relay

import (
	"context"
	"time"

	"github.com/postbox-go/postbox/store"
)

// settleBatchMax bounds the outcomes recorded by one statement.
const settleBatchMax = 1000

// settleLinger is how long the settler waits for more outcomes while it has
// fewer than settleBatchMax: at moderate rates it turns one statement per
// event or two into one per several milliseconds of deliveries (each
// statement costs the database a fixed share besides its rows: at 30,000
// webhooks/s, 5 ms of lingering cost 8 µs of server CPU per event, 20 ms
// 7 µs), while a flood fills a batch at once. Outcomes are not on the path
// from commit to delivery; they are what a crash of the relay may forget
// (the events are then delivered again). An ordered relay does not linger,
// since successors wait for their predecessor's outcome.
const (
	settleLinger = 20 * time.Millisecond
	// settleLingerStep is how often a lingering settler takes what has
	// accumulated: it sleeps rather than waking for every outcome, which
	// at tens of thousands of outcomes a second was a goroutine wake-up
	// (and often a thread's) per delivery.
	settleLingerStep = time.Millisecond
)

// settle records outcomes as they come: it takes whatever has accumulated
// (at least one), waits settleLinger for more while the batch is small, and
// writes it in one statement, so a flood is settled in large batches. It
// returns when results is closed and everything has been written, or when
// ctx ends.
func (r *Relay) settle(ctx context.Context, results <-chan outcome) {
	batch := make([]outcome, 0, min(settleBatchMax, r.capacity)) // grown by appends up to settleBatchMax
	step := time.NewTimer(settleLingerStep)
	step.Stop() // Go 1.23 timers: Stop and Reset leave no stale tick
	for {
		o, ok := <-results
		if !ok {
			return
		}
		batch = append(batch[:0], o)
		closed := r.collect(results, &batch)
		for until := time.Now().Add(settleLinger); !closed && r.linger(batch); {
			left := time.Until(until)
			if left <= 0 {
				break
			}
			step.Reset(min(left, settleLingerStep))
			<-step.C
			closed = r.collect(results, &batch)
		}
		r.write(ctx, batch)
		if closed {
			return
		}
	}
}

// linger reports whether the settler should wait for more outcomes before
// writing batch: only while it is not full and more can come (events in
// flight beyond those of batch; with little in flight, waiting would only
// hold back the next claim), and never in an ordered relay, whose
// successors wait for their predecessor's outcome. It is asked again at
// every step. (The WAL stream also waits for outcomes, a commit's before the
// next commit's of the same batch, but its batches run many at once: not
// lingering for them made a settle per commit, and at 2,000 commits/s the
// p99 latency 12–40 ms instead of 7–8 ms.)
func (r *Relay) linger(batch []outcome) bool {
	return !r.cfg.Ordered && len(batch) < settleBatchMax && r.inflight.count() > len(batch)
}

// collect appends the outcomes ready in results to batch, until it is full
// or results is closed (it then reports true).
func (r *Relay) collect(results <-chan outcome, batch *[]outcome) (closed bool) {
	for len(*batch) < settleBatchMax {
		select {
		case o, ok := <-results:
			if !ok {
				return true
			}
			*batch = append(*batch, o)
		default:
			return false
		}
	}
	return false
}

// write records one batch, retrying while the database is unreachable. If
// ctx ends first the events stay leased and come back when the lease expires.
func (r *Relay) write(ctx context.Context, batch []outcome) {
	p := store.SettleParams{Owner: r.cfg.Owner, KeepDone: r.cfg.Retention != 0, DedupWindow: max(r.cfg.DedupWindow, 0)}
	held := make([]heldLease, 0, len(batch))
	for _, o := range batch {
		id := o.delivery.ID
		held = append(held, heldLease{id: id, claimed: o.claimed, claim: o.delivery.Lease})
		if o.sent {
			r.pace.record(o.took)
		}
		switch o.action {
		case actionDone:
			p.Done = append(p.Done, id)
		case actionRetry:
			p.Retry = append(p.Retry, store.Retry{ID: id, AvailableAt: o.retryAt, LastError: o.lastError, Lease: o.delivery.Lease})
		case actionFail:
			p.Failed = append(p.Failed, store.Failure{ID: id, LastError: o.lastError, Lease: o.delivery.Lease})
		case actionRelease:
			p.Release = append(p.Release, store.Released{ID: id, Lease: o.delivery.Lease})
		}
	}
	p.Ended = r.inflight.ending(held)
	for failures := 0; ; failures++ {
		callCtx, cancel := context.WithTimeout(ctx, leasedCallTimeout(r.cfg.Lease))
		err := r.cfg.Store.Settle(callCtx, p)
		cancel()
		if err == nil {
			break
		}
		r.counts.settleErrors.Add(1)
		if ctx.Err() != nil {
			r.log.Error("outcomes not recorded; the events will be delivered again after their lease",
				"events", len(batch), "error", logError(err))
			return
		}
		delay := backoff(failures+1, 100*time.Millisecond, 5*time.Second)
		r.log.Error("recording outcomes failed; retrying", "events", len(batch), "error", logError(err), "retry_in", delay)
		if !sleep(ctx, delay) {
			return
		}
	}
	r.counts.delivered.Add(int64(len(p.Done)))
	r.counts.retried.Add(int64(len(p.Retry)))
	r.counts.failed.Add(int64(len(p.Failed)))
	r.counts.released.Add(int64(len(p.Release)))
	for _, retry := range p.Retry {
		r.scheduleRetry(retry.AvailableAt)
	}
	if obs := r.cfg.Observer; obs != nil {
		for i := range batch {
			observeAttempt(obs, &batch[i])
		}
	}
	r.inflight.remove(held)
	for i := range batch {
		if batch[i].settled != nil {
			batch[i].settled <- struct{}{}
		}
	}
	if r.cfg.Ordered && endsARun(batch) {
		r.notify() // the successors of finished runs are now due
	}
}

// outcomeOf is the Outcome of each action.
var outcomeOf = [...]Outcome{
	actionDone:    OutcomeDelivered,
	actionRetry:   OutcomeRetry,
	actionFail:    OutcomeFailed,
	actionRelease: OutcomeReleased,
}

// observeAttempt reports one recorded outcome to obs.
func observeAttempt(obs Observer, o *outcome) {
	obs.Attempted(Attempt{
		EventType:  o.delivery.EventType,
		Outcome:    outcomeOf[o.action],
		Attempt:    o.delivery.Attempt,
		Sent:       o.sent,
		Duration:   o.took,
		Age:        o.age,
		StatusCode: o.statusCode,
	})
}

// endsARun reports whether batch finished (delivered or failed) the last
// event of a job: in ordered mode, the aggregate's next head may then be
// due. An event finished within a run does not: its successor is the run's,
// still leased, and a claim woken for it would find nothing.
func endsARun(batch []outcome) bool {
	for _, o := range batch {
		if o.runEnd && (o.action == actionDone || o.action == actionFail) {
			return true
		}
	}
	return false
}
