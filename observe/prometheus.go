package observe

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/relay"
)

// MaxEventTypesDefault is the default of Options.MaxEventTypes.
const MaxEventTypesDefault = 50

// Options configures the Prometheus metrics. The zero value means every
// default.
type Options struct {
	// MaxEventTypes is how many distinct event types get a series of their
	// own in the event_type label; later ones are counted as
	// OtherEventType. Default MaxEventTypesDefault.
	MaxEventTypes int
}

// Buckets of the histograms, in seconds.
var (
	// callBuckets are those of the sink calls, claims and inbox handlers:
	// from a millisecond to ten seconds (a webhook's default timeout).
	callBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	// lagBuckets are those of the events' lag: from 5 ms (a relay that
	// listens) to an hour (retries with backoff).
	lagBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
)

// Prometheus holds the metrics of package observe, registered on one
// registry. Relay and Inbox return the observers that feed them;
// NewOutboxSampler adds the outbox gauges. It is safe for concurrent use.
type Prometheus struct {
	reg prometheus.Registerer

	deliveries    *prometheus.CounterVec
	deliveryTypes *cappedTypes[*[len(relay.Outcomes)]prometheus.Counter]
	deliveryTime  prometheus.Histogram
	lag           prometheus.Histogram
	claims        prometheus.Counter
	claimErrors   prometheus.Counter
	claimed       prometheus.Counter
	claimTime     prometheus.Histogram
	renewals      prometheus.Counter
	renewalErrors prometheus.Counter
	leasesLost    prometheus.Counter
	reclaimed     prometheus.Counter
	sinkUp        prometheus.GaugeFunc
	sinkProbes    prometheus.Counter
	// sinkDown counts the relays of this Prometheus that find the sink
	// unreachable now (relay.Observer.SinkState).
	sinkDown atomic.Int64

	inboxEvents *prometheus.CounterVec
	inboxTypes  *cappedTypes[*[len(inbox.Results)]prometheus.Counter]
	handlerTime prometheus.Histogram
}

// NewPrometheus registers the relay's and the inbox's metrics on reg (a
// prometheus.NewRegistry of the caller's, never the global one unless the
// caller passes it) and returns them. It fails when reg refuses one, for
// instance because they are registered there already.
func NewPrometheus(reg prometheus.Registerer, opts Options) (*Prometheus, error) {
	if reg == nil {
		return nil, errors.New("observe: NewPrometheus: nil Registerer")
	}
	if opts.MaxEventTypes == 0 {
		opts.MaxEventTypes = MaxEventTypesDefault
	}
	if opts.MaxEventTypes < 0 {
		return nil, fmt.Errorf("observe: Options.MaxEventTypes %d is negative", opts.MaxEventTypes)
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "postbox", Name: name, Help: help})
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "postbox", Name: name, Help: help, Buckets: buckets})
	}
	p := &Prometheus{
		reg: reg,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "postbox", Name: "deliveries_total",
			Help: "Delivery attempts whose outcome the relay recorded, by event type and outcome (delivered, retry, failed, released)."},
			[]string{"event_type", "outcome"}),
		deliveryTime:  histogram("delivery_duration_seconds", "Duration of the sink's publish call (a webhook request), per attempt.", callBuckets),
		lag:           histogram("event_lag_seconds", "Time from an event's creation (created_at) to its delivery.", lagBuckets),
		claims:        counter("claims_total", "Claim statements that succeeded."),
		claimErrors:   counter("claim_errors_total", "Claim statements that failed."),
		claimed:       counter("claimed_events_total", "Events claimed (an event claimed again for a retry counts again)."),
		claimTime:     histogram("claim_duration_seconds", "Duration of claim statements.", callBuckets),
		renewals:      counter("lease_renewals_total", "Lease renewal statements that succeeded (each renews every event in flight)."),
		renewalErrors: counter("lease_renewal_errors_total", "Lease renewal statements that failed."),
		leasesLost:    counter("leases_lost_total", "Events whose lease another relay took over before this relay sent them."),
		reclaimed:     counter("reclaimed_events_total", "Events of relays whose lease expired that this relay returned to the queue (or failed)."),
		sinkProbes:    counter("relay_sink_probes_total", "Events sent alone to test a sink found unreachable (one at a time, during an outage)."),
		inboxEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "postbox", Name: "inbox_events_total",
			Help: "Events the inbox was given, by event type and outcome (processed, duplicate, failed, rejected)."},
			[]string{"event_type", "outcome"}),
		handlerTime: histogram("inbox_handler_duration_seconds", "Duration of the inbox handler, inside its transaction.", callBuckets),
	}
	p.sinkUp = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "postbox", Name: "relay_sink_up",
		Help: "0 while a relay finds the sink unreachable (connections refused, every request timing out, a broker connection down: it claims nothing but probes), 1 otherwise."},
		func() float64 {
			if p.sinkDown.Load() > 0 {
				return 0
			}
			return 1
		})
	p.deliveryTypes = newCappedTypes(opts.MaxEventTypes, func(eventType string) *[len(relay.Outcomes)]prometheus.Counter {
		var cs [len(relay.Outcomes)]prometheus.Counter
		for i, o := range relay.Outcomes {
			cs[i] = p.deliveries.WithLabelValues(eventType, o.String())
		}
		return &cs
	})
	p.inboxTypes = newCappedTypes(opts.MaxEventTypes, func(eventType string) *[len(inbox.Results)]prometheus.Counter {
		var cs [len(inbox.Results)]prometheus.Counter
		for i, r := range inbox.Results {
			cs[i] = p.inboxEvents.WithLabelValues(eventType, r.String())
		}
		return &cs
	})
	for _, c := range []prometheus.Collector{
		p.deliveries, p.deliveryTime, p.lag, p.claims, p.claimErrors, p.claimed, p.claimTime,
		p.renewals, p.renewalErrors, p.leasesLost, p.reclaimed, p.sinkUp, p.sinkProbes, p.inboxEvents, p.handlerTime,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("observe: register: %w", err)
		}
	}
	return p, nil
}

// Relay returns the observer to set in relay.Config.Observer. Several
// relays may share it: their counts add up, and postbox_relay_sink_up is 0
// while any of them finds the sink unreachable.
func (p *Prometheus) Relay() relay.Observer { return relayObserver{p} }

// Inbox returns the observer to give inbox.New with inbox.WithObserver.
func (p *Prometheus) Inbox() inbox.Observer { return inboxObserver{p} }

// relayObserver is the relay.Observer of a Prometheus.
type relayObserver struct{ p *Prometheus }

// Claimed counts a claim statement and the events it took.
func (o relayObserver) Claimed(n int, took time.Duration, err error) {
	if err != nil {
		o.p.claimErrors.Inc()
		return
	}
	o.p.claims.Inc()
	o.p.claimed.Add(float64(n))
	o.p.claimTime.Observe(took.Seconds())
}

// Attempted counts an attempt by event type and outcome, and times it.
func (o relayObserver) Attempted(a relay.Attempt) {
	if int(a.Outcome) < len(relay.Outcomes) {
		o.p.deliveryTypes.get(a.EventType)[a.Outcome].Inc()
	}
	if !a.Sent {
		return
	}
	o.p.deliveryTime.Observe(a.Duration.Seconds())
	if a.Outcome == relay.OutcomeDelivered {
		o.p.lag.Observe(max(a.Age, 0).Seconds())
	}
}

// LeasesRenewed counts a renewal statement and the leases it found lost.
func (o relayObserver) LeasesRenewed(_, lost int, err error) {
	if err != nil {
		o.p.renewalErrors.Inc()
		return
	}
	o.p.renewals.Inc()
	if lost > 0 {
		o.p.leasesLost.Add(float64(lost))
	}
}

// Reclaimed counts reclaimed events.
func (o relayObserver) Reclaimed(n int) { o.p.reclaimed.Add(float64(n)) }

// SinkState counts the relays that find the sink unreachable: the sink_up
// gauge is 0 while any does.
func (o relayObserver) SinkState(up bool) {
	if up {
		o.p.sinkDown.Add(-1)
	} else {
		o.p.sinkDown.Add(1)
	}
}

// SinkProbed counts a probe.
func (o relayObserver) SinkProbed() { o.p.sinkProbes.Inc() }

// inboxObserver is the inbox.Observer of a Prometheus.
type inboxObserver struct{ p *Prometheus }

// Handled counts a call of Process by event type and result, and times
// its handler.
func (o inboxObserver) Handled(h inbox.Handling) {
	if int(h.Result) < len(inbox.Results) {
		o.p.inboxTypes.get(h.EventType)[h.Result].Inc()
	}
	if h.HandlerRan {
		o.p.handlerTime.Observe(h.HandlerDuration.Seconds())
	}
}
