package relay

import (
	"sync/atomic"
	"time"
)

// Stats are a relay's counts since New, and how it finds events now: what a
// health check or a metrics exporter reads (Relay.Stats). The counts only
// grow. Outcomes (Delivered, Retried, Failed, Released) are counted once
// they are recorded in the store: an outcome that could not be recorded
// before the shutdown is not counted, and its event is delivered again
// after its lease. Offered events (Relay.Offer) are counted when their
// outcome is decided.
type Stats struct {
	// Claimed counts the events this relay claimed; an event claimed again
	// for a retry counts again.
	Claimed int64
	// Delivered counts the events the sink accepted (a 2xx, a broker's
	// acknowledgement).
	Delivered int64
	// Retried counts the failed attempts after which another attempt was
	// scheduled.
	Retried int64
	// Failed counts the events moved to the dead-letter state (failed):
	// refused for good, or out of attempts.
	Failed int64
	// Released counts the events this relay gave back to the queue without
	// counting an attempt: at shutdown, when their lease expired or was
	// lost before or during their delivery, or while the sink was
	// unreachable (sent and failed, or held and not sent). An event another relay had
	// taken over meanwhile counts too, though the store leaves it alone.
	Released int64
	// Reclaimed counts the events of relays whose lease expired (crashed,
	// or stalled past it) that this relay returned to the queue, or failed
	// when they had used all attempts.
	Reclaimed int64
	// LostLeases counts the events whose lease a renewal found lost to
	// another relay (this one was stalled past the lease) before their
	// delivery started: this relay does not send them.
	LostLeases int64
	// ClaimErrors counts the claims that failed (each is tried again after
	// a backoff).
	ClaimErrors int64
	// SettleErrors counts the attempts to record outcomes that failed
	// (each is tried again after a backoff).
	SettleErrors int64
	// Probes counts the events sent alone to test the sink while it was
	// unreachable (see Config.ProbeInterval).
	Probes int64
	// InFlight is the number of events this relay holds now: claimed, and
	// not yet settled or released.
	InFlight int
	// SinkDown reports whether the relay finds the sink unreachable now
	// (connections refused, every request timing out, a broker connection
	// down): it then claims nothing but a probe at a time, and its failures
	// count no attempt. SinkDownSince is when the outage began, SinkError
	// the error that began it. Relay.SinkAvailable is !SinkDown.
	SinkDown      bool
	SinkDownSince time.Time
	SinkError     string
	// Listening reports whether notifications wake the relay, on Channel
	// (it polls every Config.PollInterval as well). When it does not,
	// PollingReason says why it only polls: listening is disabled, the
	// store cannot listen, the listening connection failed (and is being
	// tried again), or Run is not running.
	Listening     bool
	Channel       string
	PollingReason string
}

// counters are the counts of Stats, kept with atomics: the claim loop, the
// settler and the background loops add to them without a lock.
type counters struct {
	claimed, delivered, retried, failed, released atomic.Int64
	reclaimed, lostLeases                         atomic.Int64
	claimErrors, settleErrors, probes             atomic.Int64
}

// finding is how the relay finds events: listening on a channel, or only
// polling, for a reason.
type finding struct {
	listening     bool
	channel       string
	pollingReason string
}

// notRunning is how a relay finds events before Run starts and after it
// returns.
var notRunning = &finding{pollingReason: "the relay is not running"}

// Stats returns the relay's counts since New and how it finds events now.
// It is cheap, and safe to call from any goroutine while Run runs.
func (r *Relay) Stats() Stats {
	f := r.finding.Load()
	sink := r.health.state()
	return Stats{
		Claimed:       r.counts.claimed.Load(),
		Delivered:     r.counts.delivered.Load(),
		Retried:       r.counts.retried.Load(),
		Failed:        r.counts.failed.Load(),
		Released:      r.counts.released.Load(),
		Reclaimed:     r.counts.reclaimed.Load(),
		LostLeases:    r.counts.lostLeases.Load(),
		ClaimErrors:   r.counts.claimErrors.Load(),
		SettleErrors:  r.counts.settleErrors.Load(),
		Probes:        r.counts.probes.Load(),
		InFlight:      r.inflight.count(),
		SinkDown:      sink.down,
		SinkDownSince: sink.since,
		SinkError:     sink.cause,
		Listening:     f.listening,
		Channel:       f.channel,
		PollingReason: f.pollingReason,
	}
}

// Ready reports whether the relay delivers: Run has started its publishers,
// its settler and its background loops, and its last claim succeeded. It is
// false before the first claim, after a claim that failed (until one
// succeeds), and from the moment Run stops claiming at shutdown. A relay
// that cannot listen and polls is ready. Safe to call from any goroutine,
// for instance a health check.
func (r *Relay) Ready() bool { return r.ready.Load() }

// Failing reports whether the relay's last claim failed (the database
// unreachable, a table missing): Ready is false then, as it is before
// the first claim, which Failing tells apart. Safe to call from any
// goroutine.
func (r *Relay) Failing() bool { return r.failing.Load() }

// offered counts the outcome of an offered event (Relay.Offer) as the
// settler counts a recorded one.
func (c *counters) offered(a action) {
	switch a {
	case actionDone:
		c.delivered.Add(1)
	case actionRetry:
		c.retried.Add(1)
	case actionFail:
		c.failed.Add(1)
	case actionRelease:
		c.released.Add(1)
	}
}

// SinkAvailable reports whether the relay finds its sink reachable: false
// during an outage (see Stats.SinkDown), true otherwise, before Run and
// after it returns included. Safe to call from any goroutine.
func (r *Relay) SinkAvailable() bool { return !r.health.isDown() }
