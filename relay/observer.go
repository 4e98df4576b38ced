package relay

import (
	"fmt"
	"time"
)

// Observer receives what a relay does, for metrics: every claim, every
// delivery attempt once its outcome is recorded, every lease renewal, every
// lease lost, every reclaim, and the outages of the sink with their probes. Set it in Config.Observer; package observe
// has a Prometheus implementation. The relay calls every method, from
// several goroutines at once (implementations must be safe for concurrent
// use), on its own hot path: a method must return quickly and never block
// on I/O. A nil Observer costs nothing.
type Observer interface {
	// Claimed is called after each claim statement: the events it took,
	// how long the statement took, and its error (nil when it succeeded;
	// n is then 0).
	Claimed(n int, took time.Duration, err error)
	// Attempted is called for each delivery attempt once its outcome is
	// recorded in the store, as Stats counts it: an outcome the relay
	// could not record is not reported (the event comes back after its
	// lease and is attempted again).
	Attempted(a Attempt)
	// LeasesRenewed is called after each lease renewal statement: the
	// events whose lease it asked to extend, those of them whose lease it
	// found lost to another relay before their delivery started (as
	// Stats.LostLeases counts them; a delivery under way is cut short and
	// released instead), and its error (nil when it succeeded; lost is
	// then 0).
	LeasesRenewed(asked, lost int, err error)
	// Reclaimed is called when this relay returned to the queue (or
	// failed, out of attempts) n events of relays whose lease expired.
	Reclaimed(n int)
	// SinkState is called when the relay finds the sink unreachable (up
	// false: an outage begins, see Stats.SinkDown) and when it reaches it
	// again (up true), and with up true when Run returns during an
	// outage: every false is followed by one true.
	SinkState(up bool)
	// SinkProbed is called for each probe sent during an outage.
	SinkProbed()
}

// Outcome is what became of one delivery attempt.
type Outcome uint8

const (
	// OutcomeDelivered: the sink accepted the event.
	OutcomeDelivered Outcome = iota
	// OutcomeRetry: the attempt failed; another is scheduled.
	OutcomeRetry
	// OutcomeFailed: the event moved to the dead-letter state (failed):
	// refused for good, or out of attempts.
	OutcomeFailed
	// OutcomeReleased: the event went back to the queue without counting
	// an attempt: at shutdown, because its lease expired or was lost, or
	// because the sink was unreachable. The sink may not have been called
	// (Attempt.Sent).
	OutcomeReleased
)

// Outcomes are every Outcome, in the order of their values.
var Outcomes = [...]Outcome{OutcomeDelivered, OutcomeRetry, OutcomeFailed, OutcomeReleased}

// String returns "delivered", "retry", "failed" or "released": the words
// of metrics labels.
func (o Outcome) String() string {
	switch o {
	case OutcomeDelivered:
		return "delivered"
	case OutcomeRetry:
		return "retry"
	case OutcomeFailed:
		return "failed"
	case OutcomeReleased:
		return "released"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Attempt is one delivery attempt, as Observer.Attempted receives it. It
// is passed by value and holds no reference to the event's payload.
type Attempt struct {
	// EventType is the event's type, such as "order.created".
	EventType string
	// Outcome is what became of the attempt.
	Outcome Outcome
	// Attempt is the number of the attempt, starting at 1.
	Attempt int
	// Sent reports whether the sink was called: false for an event
	// released without being sent (shutdown, lease lost before the
	// delivery started). Duration and Age are zero then.
	Sent bool
	// Duration is how long the sink's Publish took.
	Duration time.Duration
	// Age is the event's age when Publish returned: that moment minus the
	// event's CreatedAt (the store's clock, so clocks apart skew it).
	Age time.Duration
	// StatusCode is the HTTP status of a webhook answer when the sink
	// reported one (sink.Classify), else 0; 0 too for a delivered event.
	StatusCode int
}

// Observers returns an Observer that tells each of obs, in turn, what the
// relay does: how a relay reports to several observers at once (metrics,
// the presence table). Nil observers are left out; with none left it
// returns nil (nothing observed, at no cost), with one, that one.
func Observers(obs ...Observer) Observer {
	var all observers
	for _, o := range obs {
		if o != nil {
			all = append(all, o)
		}
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return all
}

// observers is the Observer of Observers.
type observers []Observer

func (all observers) Claimed(n int, took time.Duration, err error) {
	for _, o := range all {
		o.Claimed(n, took, err)
	}
}

func (all observers) Attempted(a Attempt) {
	for _, o := range all {
		o.Attempted(a)
	}
}

func (all observers) LeasesRenewed(asked, lost int, err error) {
	for _, o := range all {
		o.LeasesRenewed(asked, lost, err)
	}
}

func (all observers) Reclaimed(n int) {
	for _, o := range all {
		o.Reclaimed(n)
	}
}

func (all observers) SinkState(up bool) {
	for _, o := range all {
		o.SinkState(up)
	}
}

func (all observers) SinkProbed() {
	for _, o := range all {
		o.SinkProbed()
	}
}
