package relay

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/postbox-go/postbox/sink"
)

// isBatchSink reports whether s publishes batches (Config.PublishBatch).
func isBatchSink(s sink.Sink) bool {
	_, ok := s.(sink.BatchSink)
	return ok
}

// publishers is how many goroutines deliver: Concurrency, each one event at
// a time, or with Config.PublishBatch enough batches to fill Concurrency.
func (r *Relay) publishers() int {
	if r.cfg.PublishBatch > 1 {
		return max(1, r.cfg.Concurrency/r.cfg.PublishBatch)
	}
	return r.cfg.Concurrency
}

// publishBatches is publish for a sink.BatchSink (Config.PublishBatch): it
// takes the jobs waiting in work, up to a batch, and publishes them
// together. A probe is published alone, as publish does, and so is a run
// of an ordered claim (job.then), one event after the other.
func (r *Relay) publishBatches(ctx, deliverCtx context.Context, work <-chan job, results chan<- outcome) {
	bs := r.cfg.Sink.(sink.BatchSink) // New checked it
	c := newCutter(deliverCtx)
	defer c.stop()
	jobs := make([]job, 0, r.cfg.PublishBatch)
	for j := range work {
		if alone(j) {
			r.publishJob(ctx, c, j, results)
			continue
		}
		jobs = append(jobs[:0], j)
		var last *job // a job taken from work that goes alone, after the batch
	more:
		for len(jobs) < r.cfg.PublishBatch {
			select {
			case next, ok := <-work:
				switch {
				case !ok:
					break more
				case alone(next):
					last = &next
					break more
				}
				jobs = append(jobs, next)
			default:
				break more
			}
		}
		for _, o := range r.publishAll(ctx, c, bs, jobs) {
			o.runEnd = true // a job of one event
			results <- o
		}
		if last != nil {
			r.publishJob(ctx, c, *last, results)
		}
	}
}

// alone reports whether j is published on its own, not in a batch: a probe,
// or a run.
func alone(j job) bool { return j.probe || len(j.then) > 0 }

// publishAll delivers the events of jobs in one batch, or releases them
// unsent at shutdown, during an outage, or, one by one, when a lease ended
// before the batch began; the rows the store could not read fail unsent. The batch runs under one context: a lease lost or
// expired meanwhile cuts the whole batch short.
func (r *Relay) publishAll(ctx context.Context, c *cutter, bs sink.BatchSink, jobs []job) []outcome {
	defer func() {
		for _, j := range jobs {
			j.tellDecided()
		}
	}()
	outcomes := make([]outcome, len(jobs))
	if ctx.Err() != nil || r.health.isDown() {
		for i, j := range jobs {
			d := j.delivery
			outcomes[i] = outcome{delivery: d, claimed: r.inflight.claimedAt(d.ID), action: actionRelease, settled: j.settled}
			if d.Invalid != "" {
				outcomes[i] = r.unreadable(d)
				outcomes[i].settled = j.settled
			}
		}
		return outcomes
	}
	batchCtx, gen := c.begin()
	startBy := time.Now().Add(r.sendMargin())
	msgs := make([]*sink.Message, 0, len(jobs))
	sending := make([]int, 0, len(jobs)) // the index in jobs of each of msgs
	var spans []trace.Span
	for i, j := range jobs {
		d := j.delivery
		if d.Invalid != "" {
			outcomes[i] = r.unreadable(d)
			outcomes[i].settled = j.settled
			continue
		}
		claimed, ok := r.inflight.start(d.ID, startBy, cutOf{c, gen})
		outcomes[i] = outcome{delivery: d, claimed: claimed, action: actionRelease, settled: j.settled}
		if !ok {
			r.log.Warn("lease expired before the delivery started; released without sending",
				"event_id", d.ID, "aggregate_type", logText(d.AggregateType), "aggregate_id", logText(d.AggregateID), "attempt", d.Attempt)
			continue
		}
		msg := &sink.Message{Event: d.Event, Attempt: d.Attempt}
		if r.cfg.Tracer != nil {
			_, span := r.startPublish(batchCtx, d, msg)
			spans = append(spans, span)
		}
		msgs = append(msgs, msg)
		sending = append(sending, i)
	}
	if len(msgs) == 0 {
		return outcomes
	}
	errs := make([]error, len(msgs))
	start := time.Now()
	bs.PublishBatch(batchCtx, msgs, errs)
	end := time.Now()
	for k, i := range sending {
		o := r.decide(batchCtx, jobs[i].delivery, errs[k], end.Sub(start), end)
		o.claimed, o.settled = outcomes[i].claimed, outcomes[i].settled
		outcomes[i] = o
		if spans != nil {
			endPublish(spans[k], o)
		}
	}
	return outcomes
}

// publishing says for the start log how events are published.
func (r *Relay) publishing() string {
	if r.cfg.PublishBatch > 1 {
		return fmt.Sprintf("in batches of up to %d (%d publishers)", r.cfg.PublishBatch, r.publishers())
	}
	return "one event per publish"
}
