package relay

import (
	"context"
	"time"

	"github.com/postbox-go/postbox/store"
)

// Offered is what became of an event offered to a relay (Relay.Offer):
// what the relay's settle would have recorded had it claimed the event.
type Offered struct {
	// Outcome is OutcomeDelivered; OutcomeRetry, due again at RetryAt;
	// OutcomeFailed, a dead letter (refused for good, or out of attempts);
	// or OutcomeReleased: no attempt counted (the sink was unreachable, or
	// the attempt was cut short by ctx).
	Outcome Outcome
	RetryAt time.Time
	// LastError is why the attempt failed, bounded as the store keeps it;
	// empty when the event was delivered.
	LastError string
	// Sent reports whether the sink was called.
	Sent bool
}

// Offer delivers d, an event that is not in the relay's store, once, as
// the relay delivers the events it claims: through Config.Sink, in a
// publish span when Config.Tracer is set, its outcome decided by the same
// rules (MaxAttempts and RejectedAttempts for d.Attempt, the backoff,
// Retry-After, outages of the sink), reported to Config.Observer and
// counted in Stats. It neither claims, leases nor settles anything: the
// caller records what Offer returns (package endpoint offers an event to
// an idle endpoint's lane and writes a delivery only when the offered
// attempt did not deliver it). Unlike a claimed event's, the outcome is
// counted and observed when it is decided, before the caller records it.
//
// Offer runs in the caller's goroutine under ctx (cut short when ctx ends:
// released). It returns false, without sending, when the relay takes no
// offers now: before Run, once Run's context ended, or while the sink is
// unreachable (the relay probes it with its own claims).
func (r *Relay) Offer(ctx context.Context, d store.ClaimedEvent) (Offered, bool) {
	if !r.accepting.Load() || r.health.isDown() {
		return Offered{}, false
	}
	o := r.deliver(ctx, d)
	r.counts.offered(o.action)
	if o.action == actionRetry {
		// The caller writes it due then: the relay wakes for it, as for
		// the retries it settles.
		r.scheduleRetry(o.retryAt)
	}
	if obs := r.cfg.Observer; obs != nil {
		observeAttempt(obs, &o)
	}
	return Offered{Outcome: outcomeOf[o.action], RetryAt: o.retryAt, LastError: o.lastError, Sent: o.sent}, true
}
