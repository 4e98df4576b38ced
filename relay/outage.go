package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// How the relay tells an outage of the sink from a failure of one event:
//
//   - A failure the sink classifies sink.Unavailable (the webhook sink: a
//     connection refused, a DNS failure, an unreachable network, a TLS
//     certificate the endpoint cannot be verified with; a broker sink: its
//     connection is down) starts an outage at once.
//   - A timeout (an error with Timeout() true: the request got no answer in
//     time) is ambiguous, one slow event or a dead endpoint, and so is a
//     gateway's answer (sink.Unavailable with a status code: the webhook
//     sink's 502 and 504, a load balancer that cannot reach the endpoint,
//     or that endpoint failing on this one event): outageTimeouts of them
//     in a row, with no other outcome in between, start an outage. The
//     ones before it count as attempts.
//   - Any other outcome (a success, an answer about the event such as a 4xx
//     or a 5xx, a broker's nack, a dropped connection) shows the sink
//     reachable: it ends the run of timeouts, and an outage.
//
// During an outage the relay claims nothing but its probes: one event at a
// time, sent alone, after a wait that grows from probeFirst to
// Config.ProbeInterval. Events held when the outage began are released
// unsent, and a publish that fails for the outage is released too: neither
// counts an attempt, so no event reaches MaxAttempts while the sink is down.
// A probe that timed out is kept instead (leased, up to Concurrency of
// them) until the outage ends: the next probe is another event, so one
// event whose requests time out (a slow handler, not a dead endpoint)
// cannot pass for an outage that never ends. An ordered relay keeps none:
// its probe is an aggregate's head, which other relays may be able to
// deliver; the culprit probes below tell a slow event from a dead sink.
// Likewise a probe a gateway answered makes its event suspect: the next
// probe skips it (releases it unsent) when another event can be claimed,
// so that one event a gateway always fails cannot hold the outage, and
// the outbox behind it, forever;
// probed again alone, with no other event to take, its answer counts an
// attempt, so it ends failed like any event the endpoint keeps failing.
// And a probe that found the sink unreachable culpritProbes times in a row
// with one event (a message that breaks the connection itself) gives way
// to another event, the first one held: if that one gets through, the held
// event is a culprit (see culprits) and is sent at once, its failures
// counting as rejections. The first probe (or late delivery) that reaches
// the sink ends the outage, the events kept are delivered, and the relay
// claims at full speed again. When no other event is left to probe with, a kept one is
// probed again.
const (
	outageTimeouts = 3
	probeFirst     = 100 * time.Millisecond
)

// sinkHealth follows whether the sink can be reached. The publishers report
// every outcome to it; the claim loop asks it whether to probe.
type sinkHealth struct {
	// healthy is true while the sink is up and no timeout is being
	// counted: the publishers' outcomes and questions then need no lock
	// (see settled).
	healthy atomic.Bool
	mu      sync.Mutex
	// down, since and cause describe the outage under way, if any.
	down  bool
	since time.Time
	cause string
	// timeouts counts the timeouts and gateway answers in a row.
	timeouts int
	// answered: a gateway answered during the outage, since the last
	// probe began (the probe was answered, unless a late delivery was).
	answered bool
	// suspect is the event of the last probe a gateway answered; repeat:
	// the probe under way is the suspect again, there being no other.
	suspect uuid.UUID
	repeat  bool
	// probes counts the probes of the outage under way.
	probes int
	// probed receives a probe's outcome once it is known.
	probed chan outcome
	// kept are the probes that timed out during the outage, still leased:
	// the claim loop delivers them once it is over, or hands them over for
	// release when it stops (no probe is kept after that: keeping).
	kept    []store.ClaimedEvent
	keeping bool
}

func newSinkHealth() *sinkHealth {
	h := &sinkHealth{probed: make(chan outcome, 1), keeping: true}
	h.healthy.Store(true)
	return h
}

// settled updates healthy after a change of down or timeouts; h.mu is held.
func (h *sinkHealth) settled() {
	h.healthy.Store(!h.down && h.timeouts == 0)
}

// outage is what an outage under way looks like from outside.
type outage struct {
	down  bool
	since time.Time
	cause string
}

func (h *sinkHealth) state() outage {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down {
		return outage{}
	}
	return outage{down: true, since: h.since, cause: h.cause}
}

func (h *sinkHealth) isDown() bool {
	if h.healthy.Load() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}

// change is what one outcome changed in the sink's health.
type change int

const (
	unchanged change = iota
	wentDown
	cameBack
)

// record records the outcome of a publish: err nil when it was delivered,
// else err and its kind. It reports whether the sink is unreachable (the
// failure is then not the event's, and is released) and the change, with
// how long the outage lasted when it came back.
func (h *sinkHealth) record(err error, kind sink.Kind, now time.Time) (unreachable bool, c change, lasted time.Duration) {
	if err == nil && h.healthy.Load() {
		return false, unchanged, 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	defer h.settled()
	switch {
	case err == nil:
	case kind == sink.Unavailable && !gatewayAnswer(err):
		return true, h.goDown(err, now), 0
	case kind == sink.Unavailable && h.down:
		if h.repeat {
			// The suspect probed again alone: its answer counts.
			return false, unchanged, 0
		}
		h.answered = true
		return true, unchanged, 0
	case kind == sink.Unavailable, kind == sink.Retryable && isTimeout(err):
		h.timeouts++
		if h.down || h.timeouts >= outageTimeouts {
			return true, h.goDown(err, now), 0
		}
		return false, unchanged, 0
	}
	h.timeouts = 0
	if !h.down {
		return false, unchanged, 0
	}
	h.down = false
	return false, cameBack, now.Sub(h.since)
}

// goDown starts an outage caused by err, unless one is under way.
func (h *sinkHealth) goDown(err error, now time.Time) change {
	if h.down {
		return unchanged
	}
	h.down, h.since, h.cause, h.probes = true, now, causeOf(err), 0
	h.answered, h.suspect, h.repeat = false, uuid.Nil, false
	return wentDown
}

// gatewayAnswer reports whether err, a sink.Unavailable failure, is an
// answer from a gateway in front of the sink (it has a status code), not a
// failure to reach anything.
func gatewayAnswer(err error) bool {
	_, _, code := sink.Classify(err)
	return code != 0
}

// beginProbe tells the health that a probe of d begins, and reports
// whether d is the suspect: the event of the last probe a gateway
// answered (see outageTimeouts).
func (h *sinkHealth) beginProbe(d store.ClaimedEvent) (suspect bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answered, h.repeat = false, false
	return h.suspect != uuid.Nil && d.ID == h.suspect
}

// probeAlone tells the health that the probe under way is the suspect
// again, there being no other event to probe with: a gateway's answer to
// it counts an attempt.
func (h *sinkHealth) probeAlone() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.repeat = true
}

// endProbe tells the health that the probe of d has its outcome: d
// becomes the suspect when a gateway answered it.
func (h *sinkHealth) endProbe(d store.ClaimedEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.answered {
		h.suspect = d.ID
	}
	h.answered, h.repeat = false, false
}

// causeOf is the text of err without the kind a *sink.Error prefixes it
// with (the outage says it already).
func causeOf(err error) string {
	var e *sink.Error
	if errors.As(err, &e) && e.StatusCode == 0 && e.Err != nil {
		return e.Err.Error()
	}
	return err.Error()
}

// keep keeps d, a probe that timed out, until the outage ends, unless it
// ended meanwhile, limit are kept already or the claim loop stopped; it
// reports whether it did.
func (h *sinkHealth) keep(d store.ClaimedEvent, limit int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down || !h.keeping || len(h.kept) >= limit {
		return false
	}
	h.kept = append(h.kept, d)
	return true
}

// takeOneKept returns the probe kept first, and forgets it; ok is false
// when none is kept.
func (h *sinkHealth) takeOneKept() (d store.ClaimedEvent, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.kept) == 0 {
		return d, false
	}
	d = h.kept[0]
	h.kept = h.kept[1:]
	return d, true
}

// takeKept returns the probes kept, and forgets them; with last (the claim
// loop stops) no probe is kept from then on.
func (h *sinkHealth) takeKept(last bool) []store.ClaimedEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := h.kept
	h.kept = nil
	if last {
		h.keeping = false
	}
	return kept
}

// end ends the outage under way, if any, when Run returns, and reports
// whether there was one.
func (h *sinkHealth) end() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := h.down
	h.down, h.timeouts, h.keeping = false, 0, true
	h.settled()
	return was
}

// nextProbe counts a probe and returns how long to wait before it: full
// jitter between probeFirst and a ceiling that doubles with each probe of
// the outage, up to every.
func (h *sinkHealth) nextProbe(every time.Duration) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probes++
	return backoff(h.probes, min(probeFirst, every), every)
}

// probeEnded tells the claim loop the outcome of the probe it sent.
func (h *sinkHealth) probeEnded(o outcome) {
	select {
	case h.probed <- o:
	default:
	}
}

// isTimeout reports whether err says an operation got no answer in time.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// sinkOutcome records the outcome of a publish with the sink's health (err
// nil when it was delivered, else err and its kind), and reports whether
// the sink is unreachable. It logs an outage once when it begins and once
// when it ends, and tells the observer.
func (r *Relay) sinkOutcome(err error, kind sink.Kind) (unreachable bool) {
	unreachable, c, lasted := r.health.record(err, kind, time.Now())
	switch c {
	case wentDown:
		why := "sink unreachable: "
		switch {
		case kind != sink.Unavailable:
			why = fmt.Sprintf("sink unreachable (%d requests in a row timed out): ", outageTimeouts)
		case gatewayAnswer(err):
			why = fmt.Sprintf("sink unreachable (%d gateway answers in a row): ", outageTimeouts)
		}
		r.log.Warn(why+logText(causeOf(err)).String()+"; pausing claims, probing with one event at a time, at most "+
			r.cfg.ProbeInterval.String()+" apart; failures while it is down count no attempt",
			"sink", r.cfg.Sink.String())
	case cameBack:
		r.log.Info("sink reachable again; claiming resumes", "sink", r.cfg.Sink.String(), "outage", lasted.Round(time.Millisecond))
		r.notify()
	default:
		return unreachable
	}
	if obs := r.cfg.Observer; obs != nil {
		obs.SinkState(c == cameBack)
	}
	return unreachable
}

// probe is the claim loop's step during an outage: after the probe's wait,
// it claims one event, sends it alone and waits for its outcome. It
// returns the claim's error.
func (r *Relay) probe(ctx context.Context, poll *time.Timer, work chan<- job) error {
	r.waitFor(ctx, poll, r.health.nextProbe(r.cfg.ProbeInterval), false)
	if ctx.Err() != nil || !r.health.isDown() {
		return nil
	}
	batch, err := r.claim(ctx, 1, r.cfg.ClaimBytes, store.ClaimPosition{})
	if err != nil {
		return err
	}
	if len(batch) == 0 {
		// Nothing new to probe with: probe with an event kept, or the
		// outage would never end while only kept events remain.
		d, ok := r.health.takeOneKept()
		if !ok {
			return nil
		}
		batch = append(batch, d)
	}
	probe := batch[0]
	var held *store.ClaimedEvent
	if r.run.stuck(probe) {
		// The sink was unreachable at every probe of this event: probe
		// with another, holding this one, to tell whether it is the
		// problem (see culprits).
		if other, err := r.claim(ctx, 1, r.cfg.ClaimBytes, store.ClaimPosition{}); err == nil && len(other) == 1 {
			held, probe = &batch[0], other[0]
		}
	}
	if r.health.beginProbe(probe) && held == nil {
		// A gateway answered this event at the last probe: probe with
		// another, and release it unsent (the publishers do, the sink
		// being down).
		other, err := r.claim(ctx, 1, r.cfg.ClaimBytes, store.ClaimPosition{})
		switch {
		case err == nil && len(other) == 1:
			work <- job{delivery: probe}
			probe = other[0]
		case err == nil:
			r.health.probeAlone()
		}
	}
	r.counts.probes.Add(1)
	if obs := r.cfg.Observer; obs != nil {
		obs.SinkProbed()
	}
	work <- job{delivery: probe, probe: true}
	select {
	case o := <-r.health.probed:
		r.health.endProbe(probe)
		r.run.ended(probe, o)
		if held != nil {
			r.judgeHeld(*held, o, work)
		}
	case <-ctx.Done():
		if held != nil {
			work <- job{delivery: *held} // released: the relay stops
		}
	}
	return nil
}

// judgeHeld hands held, an event the sink was unreachable with at every
// probe, back to the publishers once o, the outcome of a probe with
// another event, is known. That probe got through: held is a culprit,
// and is sent at once, its failures counting from now on. It did not:
// the sink is down, and held is released.
func (r *Relay) judgeHeld(held store.ClaimedEvent, o outcome, work chan<- job) {
	if o.action == actionDone {
		r.culprits.add(held.ID)
		r.log.Warn(fmt.Sprintf("the sink was unreachable at %d probes in a row with one event, and reachable with another: "+
			"that event's failures count as rejections from now on", culpritProbes),
			"event_id", held.ID, "event_type", logText(held.EventType),
			"aggregate_type", logText(held.AggregateType), "aggregate_id", logText(held.AggregateID))
	}
	work <- job{delivery: held}
}

// deliverKept hands the probes kept during the outage that ended to the
// publishers; last, when the claim loop stops, they release them.
func (r *Relay) deliverKept(work chan<- job, last bool) {
	for _, d := range r.health.takeKept(last) {
		work <- job{delivery: d}
	}
}

// endOutage forgets an outage under way when Run returns, so that an
// observer shared by relays does not count this one as seeing it.
func (r *Relay) endOutage() {
	if r.health.end() {
		if obs := r.cfg.Observer; obs != nil {
			obs.SinkState(true)
		}
	}
}
