package relay

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// action is what the settler does with a delivery.
type action int

const (
	actionDone action = iota
	actionRetry
	actionFail
	actionRelease
)

// outcome is the result of one delivery attempt.
type outcome struct {
	delivery store.ClaimedEvent
	// claimed identifies the lease the delivery ran under (when its claim
	// began): settling it must not end a lease of the same event claimed
	// again since.
	claimed   time.Time
	action    action
	retryAt   time.Time
	lastError string
	// sent, took, age and statusCode are what Observer.Attempted reports:
	// whether the sink was called, how long it took, the event's age when
	// it returned, and the HTTP status it reported.
	sent       bool
	took       time.Duration
	age        time.Duration
	statusCode int
	// timedOut: the publish timed out while the sink was unreachable (a
	// probe that timed out is kept until the outage ends). unreachable:
	// the sink could not be reached at all (sink.Unavailable, no
	// gateway's answer).
	timedOut    bool
	unreachable bool
	// settled, when not nil, is told once the outcome is recorded (see
	// job.settled).
	settled chan<- struct{}
	// runEnd: the last outcome of a job, its run's included (job.then):
	// once it is recorded, an ordered claim may find the aggregate's next
	// head.
	runEnd bool
}

// maxErrorLen bounds the error text kept in the outbox row.
const maxErrorLen = 1024

// job is one claimed event handed to the publishers.
type job struct {
	delivery store.ClaimedEvent
	// probe: the claim loop sent it alone, during an outage of the sink,
	// and waits for its outcome.
	probe bool
	// settled, when not nil, receives one value once the outcome is
	// recorded: the stream waits for it before confirming the event.
	settled chan<- struct{}
	// decided, when not nil, receives one value once the outcome is
	// known, before it is recorded: the stream sends the next event of
	// the aggregate then (see startStreamed).
	decided chan<- struct{}
	// then are the rest of an ordered claim's run (see aggregateRun): the
	// successors of delivery in its aggregate, in sequence order, each
	// sent once the one before it was delivered, and released unsent
	// after the first that was not.
	then []store.ClaimedEvent
}

// publish delivers the events of work until it is closed, and hands their
// outcomes to the settler. Once ctx ends (the shutdown) it releases the
// rest without sending them, and so it does during an outage of the sink
// for all but the probes; deliveries run under deliverCtx, which the
// shutdown cancels after ShutdownTimeout.
func (r *Relay) publish(ctx, deliverCtx context.Context, work <-chan job, results chan<- outcome) {
	// The deliveries' context is this publisher's own: the deliveries of
	// all publishers do not contend for deliverCtx's lock.
	c := newCutter(deliverCtx)
	defer c.stop()
	for j := range work {
		r.publishJob(ctx, c, j, results)
	}
}

// publishJob delivers the event of j alone and hands its outcome to the
// settler, unless j is a probe that timed out and is kept (see
// outageTimeouts); then the run that follows it, if any (job.then).
func (r *Relay) publishJob(ctx context.Context, c *cutter, j job, results chan<- outcome) {
	o := r.publishOne(ctx, c, j)
	o.settled = j.settled
	j.tellDecided()
	// An ordered relay keeps no probe: a kept probe is an aggregate's head,
	// and its aggregate would wait for this relay's outage to end while
	// other relays could deliver it. Released, it is probed again, and
	// the culprit probes (see culprits) keep one slow event from passing
	// for an outage.
	kept := j.probe && o.timedOut && !r.cfg.Ordered && r.health.keep(j.delivery, r.cfg.Concurrency)
	if j.probe {
		r.health.probeEnded(o)
	}
	delivered := o.action == actionDone
	for _, d := range j.then {
		if !kept {
			results <- o
		}
		kept = false
		if !delivered {
			// Its predecessor is not delivered: it must not overtake it.
			o = outcome{delivery: d, claimed: r.inflight.claimedAt(d.ID), action: actionRelease}
			continue
		}
		o = r.publishOne(ctx, c, job{delivery: d})
		delivered = o.action == actionDone
	}
	if !kept {
		o.runEnd = true
		results <- o
	}
}

// tellDecided tells j.decided, if any, that the outcome of j's event is
// known.
func (j job) tellDecided() {
	if j.decided != nil {
		j.decided <- struct{}{}
	}
}

// publishOne delivers the event of j, or fails it unsent when the store
// could not read its row, or releases it unsent at shutdown, during an
// outage (unless j is the probe) or when its lease ended.
func (r *Relay) publishOne(ctx context.Context, c *cutter, j job) outcome {
	d := j.delivery
	if d.Invalid != "" {
		return r.unreadable(d)
	}
	if ctx.Err() != nil || !j.probe && r.health.isDown() {
		return outcome{delivery: d, claimed: r.inflight.claimedAt(d.ID), action: actionRelease}
	}
	// The delivery is cut short if its lease is lost or expires meanwhile
	// (see watchLeases).
	leaseCtx, gen := c.begin()
	var o outcome
	claimed, ok := r.inflight.start(d.ID, time.Now().Add(r.sendMargin()), cutOf{c, gen})
	if !ok {
		// Another relay may have taken it over: sending now could
		// overtake its delivery (and, ordered, its successors).
		r.log.Warn("lease expired before the delivery started; released without sending",
			"event_id", d.ID, "aggregate_type", logText(d.AggregateType), "aggregate_id", logText(d.AggregateID), "attempt", d.Attempt)
		o = outcome{delivery: d, action: actionRelease}
	} else {
		o = r.deliver(leaseCtx, d)
	}
	o.claimed = claimed
	return o
}

// unreadable fails d, a row the store could not read as an event
// (store.ClaimedEvent.Invalid), without sending it: whatever is wrong with it
// stays wrong, and its other fields may be zero. Nothing is counted
// against another event, nor against the sink's health.
func (r *Relay) unreadable(d store.ClaimedEvent) outcome {
	why := store.ErrorText("postbox: unreadable row: "+d.Invalid, maxErrorLen)
	r.log.Error("unreadable row; event moved to failed without sending it",
		"event_id", d.ID, "outbox_seq", d.OutboxSeq, "invalid", logText(d.Invalid))
	return outcome{delivery: d, claimed: r.inflight.claimedAt(d.ID), action: actionFail, lastError: why}
}

// deliver publishes one event and decides what becomes of it, in a publish
// span when Config.Tracer is set.
func (r *Relay) deliver(ctx context.Context, d store.ClaimedEvent) outcome {
	msg := &sink.Message{Event: d.Event, Attempt: d.Attempt}
	if r.cfg.Tracer == nil {
		return r.attempt(ctx, d, msg)
	}
	ctx, span := r.startPublish(ctx, d, msg)
	o := r.attempt(ctx, d, msg)
	endPublish(span, o)
	return o
}

// deliveryAttrs are the log attributes of an attempt to deliver d that
// took took. They are built only when logged: a delivery that succeeds
// logs at debug level, usually off.
func deliveryAttrs(d store.ClaimedEvent, took time.Duration) []any {
	return []any{
		"event_id", d.ID, "event_type", logText(d.EventType),
		"aggregate_type", logText(d.AggregateType), "aggregate_id", logText(d.AggregateID),
		"attempt", d.Attempt, "duration", took,
	}
}

// attempt publishes msg, the message of d, and decides what becomes of it.
func (r *Relay) attempt(ctx context.Context, d store.ClaimedEvent, msg *sink.Message) outcome {
	start := time.Now()
	err := r.cfg.Sink.Publish(ctx, msg)
	end := time.Now()
	return r.decide(ctx, d, err, end.Sub(start), end)
}

// decide decides what becomes of d after an attempt, under ctx, that
// returned err at end and took took.
func (r *Relay) decide(ctx context.Context, d store.ClaimedEvent, err error, took time.Duration, end time.Time) outcome {
	sent := outcome{delivery: d, sent: true, took: took, age: end.Sub(d.CreatedAt)}
	if err == nil {
		r.sinkOutcome(nil, 0)
		r.culprits.forget(d.ID)
		if r.log.Enabled(ctx, slog.LevelDebug) {
			r.log.Debug("delivered", deliveryAttrs(d, took)...)
		}
		sent.action = actionDone
		return sent
	}
	attrs := deliveryAttrs(d, took)
	if ctx.Err() != nil {
		// Cut short: it did not count.
		if cause := context.Cause(ctx); errors.Is(cause, errLeaseLost) || errors.Is(cause, errLeaseExpired) {
			r.log.Warn("delivery cut short: "+cause.Error()+"; released", attrs...)
		} else {
			r.log.Info("delivery interrupted by shutdown; released", attrs...)
		}
		sent.action = actionRelease
		return sent
	}
	kind, retryAfter, code := sink.Classify(err)
	msgText := err.Error()
	culprit := kind == sink.Unavailable && code == 0 && r.culprits.has(d.ID)
	if culprit {
		// Found to be the problem, not the sink (see culprits).
		kind, msgText = sink.Rejected, "the sink is unreachable with this event only, and reachable with others: "+msgText
	}
	msgText = store.ErrorText(msgText, maxErrorLen)
	attrs = append(attrs, "status_code", code, "error", logText(msgText))
	sent.statusCode, sent.lastError = code, msgText
	if !culprit && r.sinkOutcome(err, kind) {
		// The sink is down, not the event at fault: the attempt does
		// not count (the outage is logged once, not per event).
		r.log.Debug("delivery failed: the sink is unreachable; released", attrs...)
		sent.action, sent.timedOut = actionRelease, kind != sink.Unavailable
		sent.unreachable = kind == sink.Unavailable && code == 0
		return sent
	}
	switch {
	case kind == sink.Permanent:
		r.log.Error("delivery failed permanently; event moved to failed", attrs...)
	case d.Attempt >= r.cfg.MaxAttempts:
		r.log.Error("delivery failed; attempts exhausted, event moved to failed", attrs...)
	case kind == sink.Rejected && d.Attempt >= r.cfg.RejectedAttempts:
		r.log.Error("delivery rejected; attempts for rejections exhausted, event moved to failed", attrs...)
	default:
		delay := backoff(d.Attempt, r.cfg.BackoffMin, r.cfg.BackoffMax)
		if retryAfter > 0 {
			delay = retryAfterDelay(retryAfter, r.cfg.BackoffMin, r.cfg.BackoffMax)
		}
		r.log.Warn("delivery failed; will retry", append(attrs, "retry_in", delay)...)
		sent.action, sent.retryAt = actionRetry, time.Now().Add(delay)
		return sent
	}
	r.culprits.forget(d.ID)
	sent.action = actionFail
	return sent
}
