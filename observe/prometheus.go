package observe

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/relay"
)

// MaxEventTypesDefault is the default of Options.MaxEventTypes.
const MaxEventTypesDefault = 50

// MaxEndpointsDefault is the default of Options.MaxEndpoints.
const MaxEndpointsDefault = 50

// Options configures the Prometheus metrics. The zero value means every
// default.
type Options struct {
	// MaxEventTypes is how many distinct event types get a series of their
	// own in the event_type label; later ones are counted as
	// OtherEventType. Default MaxEventTypesDefault.
	MaxEventTypes int
	// MaxEndpoints is how many distinct endpoint names get series of
	// their own in the endpoint label (Prometheus.Endpoint); later ones
	// are counted as OtherEndpoint. Default MaxEndpointsDefault.
	MaxEndpoints int
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
// registry. Relay, Endpoint, FanOut and Inbox return the observers that
// feed them; NewOutboxSampler adds the outbox gauges. It is safe for
// concurrent use.
type Prometheus struct {
	reg           prometheus.Registerer
	maxEventTypes int

	deliveries   *prometheus.CounterVec
	deliveryTime *prometheus.HistogramVec
	lag          *prometheus.HistogramVec
	sinkProbes   *prometheus.CounterVec
	sinkUp       *sinkUpCollector
	// outbox holds the series of endpoint "": the single-URL relay's, and
	// the outbox relay's sink state in endpoints mode.
	outbox *destination
	// endpoints hold those of the endpoints, capped.
	endpoints *cappedTypes[*destination]

	fanOut      *prometheus.CounterVec
	fanOutTypes *cappedTypes[*[len(relay.Outcomes)]prometheus.Counter]
	fanOutTime  prometheus.Histogram

	claims        prometheus.Counter
	claimErrors   prometheus.Counter
	claimed       prometheus.Counter
	claimTime     prometheus.Histogram
	renewals      prometheus.Counter
	renewalErrors prometheus.Counter
	leasesLost    prometheus.Counter
	reclaimed     prometheus.Counter

	inboxEvents *prometheus.CounterVec
	inboxTypes  *cappedTypes[*[len(inbox.Outcomes)]prometheus.Counter]
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
	if opts.MaxEndpoints == 0 {
		opts.MaxEndpoints = MaxEndpointsDefault
	}
	if opts.MaxEndpoints < 0 {
		return nil, fmt.Errorf("observe: Options.MaxEndpoints %d is negative", opts.MaxEndpoints)
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "postbox", Name: name, Help: help})
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "postbox", Name: name, Help: help, Buckets: buckets})
	}
	byEndpoint := []string{"endpoint"}
	p := &Prometheus{
		reg:           reg,
		maxEventTypes: opts.MaxEventTypes,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "postbox", Name: "deliveries_total",
			Help: "Delivery attempts whose outcome the relay recorded, by endpoint (\"\" for the single-URL relay), event type and outcome (delivered, retry, failed, released). In endpoints mode the fan-out is counted apart, in postbox_fanout_events_total."},
			[]string{"endpoint", "event_type", "outcome"}),
		deliveryTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "postbox", Name: "delivery_duration_seconds",
			Help: "Duration of the sink's publish call (a webhook request), per attempt, by endpoint (\"\" for the single-URL relay).", Buckets: callBuckets}, byEndpoint),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "postbox", Name: "event_lag_seconds",
			Help: "Time from an event's creation (created_at) to its delivery, by endpoint (\"\" for the single-URL relay).", Buckets: lagBuckets}, byEndpoint),
		sinkProbes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "postbox", Name: "relay_sink_probes_total",
			Help: "Events sent alone to test a sink found unreachable (one at a time, during an outage), by endpoint (\"\" for the single-URL relay and the fan-out)."}, byEndpoint),
		sinkUp: &sinkUpCollector{desc: prometheus.NewDesc("postbox_relay_sink_up",
			"0 while a relay finds the sink unreachable (connections refused, every request timing out, a broker connection down: it claims nothing but probes), 1 otherwise; by endpoint (\"\" for the single-URL relay and the fan-out).",
			byEndpoint, nil)},
		fanOut: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "postbox", Name: "fanout_events_total",
			Help: "Events the outbox relay fanned out to their endpoints' deliveries in endpoints mode, by event type and outcome (delivered: its deliveries written; retry, failed, released). The deliveries themselves are counted in postbox_deliveries_total."},
			[]string{"event_type", "outcome"}),
		fanOutTime:    histogram("fanout_duration_seconds", "Duration of the fan-out's write of an event's deliveries (a batch's, shared by its events), per attempt, in endpoints mode.", callBuckets),
		claims:        counter("claims_total", "Claim statements that succeeded, of every relay (outbox, fan-out, endpoint lanes)."),
		claimErrors:   counter("claim_errors_total", "Claim statements that failed, of every relay (outbox, fan-out, endpoint lanes)."),
		claimed:       counter("claimed_events_total", "Events (endpoint deliveries in a lane) claimed (one claimed again for a retry counts again)."),
		claimTime:     histogram("claim_duration_seconds", "Duration of claim statements.", callBuckets),
		renewals:      counter("lease_renewals_total", "Lease renewal statements that succeeded (each renews every event in flight)."),
		renewalErrors: counter("lease_renewal_errors_total", "Lease renewal statements that failed."),
		leasesLost:    counter("leases_lost_total", "Events whose lease another relay took over before this relay sent them."),
		reclaimed:     counter("reclaimed_events_total", "Events of relays whose lease expired that this relay returned to the queue (or failed)."),
		inboxEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "postbox", Name: "inbox_events_total",
			Help: "Events the inbox was given, by event type and outcome (processed, duplicate, failed, rejected)."},
			[]string{"event_type", "outcome"}),
		handlerTime: histogram("inbox_handler_duration_seconds", "Duration of the inbox handler, inside its transaction.", callBuckets),
	}
	p.outbox = p.newDestination("")
	p.endpoints = newCappedTypes(opts.MaxEndpoints, OtherEndpoint, p.newDestination)
	p.fanOutTypes = newCappedTypes(opts.MaxEventTypes, OtherEventType, func(eventType string) *[len(relay.Outcomes)]prometheus.Counter {
		var cs [len(relay.Outcomes)]prometheus.Counter
		for i, o := range relay.Outcomes {
			cs[i] = p.fanOut.WithLabelValues(eventType, o.String())
		}
		return &cs
	})
	p.inboxTypes = newCappedTypes(opts.MaxEventTypes, OtherEventType, func(eventType string) *[len(inbox.Outcomes)]prometheus.Counter {
		var cs [len(inbox.Outcomes)]prometheus.Counter
		for i, r := range inbox.Outcomes {
			cs[i] = p.inboxEvents.WithLabelValues(eventType, r.String())
		}
		return &cs
	})
	for _, c := range []prometheus.Collector{
		p.deliveries, p.deliveryTime, p.lag, p.claims, p.claimErrors, p.claimed, p.claimTime,
		p.renewals, p.renewalErrors, p.leasesLost, p.reclaimed, p.sinkUp, p.sinkProbes,
		p.fanOut, p.fanOutTime, p.inboxEvents, p.handlerTime,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("observe: register: %w", err)
		}
	}
	return p, nil
}

// destination holds the series of one value of the endpoint label: a
// webhook endpoint's, or "" for the single-URL relay's sink.
type destination struct {
	types        *cappedTypes[*[len(relay.Outcomes)]prometheus.Counter]
	deliveryTime prometheus.Observer
	lag          prometheus.Observer
	sinkProbes   prometheus.Counter
	// sinkDown counts the relays reporting to this destination that find
	// its sink unreachable now (relay.Observer.SinkState).
	sinkDown atomic.Int64
}

// newDestination builds the series of the endpoint label value name, and
// adds them to the sink_up gauge.
func (p *Prometheus) newDestination(name string) *destination {
	d := &destination{
		types: newCappedTypes(p.maxEventTypes, OtherEventType, func(eventType string) *[len(relay.Outcomes)]prometheus.Counter {
			var cs [len(relay.Outcomes)]prometheus.Counter
			for i, o := range relay.Outcomes {
				cs[i] = p.deliveries.WithLabelValues(name, eventType, o.String())
			}
			return &cs
		}),
		deliveryTime: p.deliveryTime.WithLabelValues(name),
		lag:          p.lag.WithLabelValues(name),
		sinkProbes:   p.sinkProbes.WithLabelValues(name),
	}
	p.sinkUp.add(name, d)
	return d
}

// sinkUpCollector is postbox_relay_sink_up: one series per destination,
// 0 while any relay of that destination finds its sink unreachable.
type sinkUpCollector struct {
	desc *prometheus.Desc

	mu    sync.Mutex
	names []string
	dests []*destination
}

func (c *sinkUpCollector) add(name string, d *destination) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = append(c.names, name)
	c.dests = append(c.dests, d)
}

// Describe sends the gauge's description.
func (c *sinkUpCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect sends a series per endpoint label value: two endpoint names
// that share one value (invalid UTF-8 made valid) share its series.
func (c *sinkUpCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	up := make(map[string]bool, len(c.names))
	var order []string
	for i, name := range c.names {
		was, seen := up[name]
		if !seen {
			order = append(order, name)
			was = true
		}
		up[name] = was && c.dests[i].sinkDown.Load() <= 0
	}
	c.mu.Unlock()
	for _, name := range order {
		v := 0.0
		if up[name] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, name)
	}
}

// Relay returns the observer to set in relay.Config.Observer of the
// single-URL relay: its series carry endpoint="". Several relays may
// share it: their counts add up, and postbox_relay_sink_up{endpoint=""}
// is 0 while any of them finds the sink unreachable.
func (p *Prometheus) Relay() relay.Observer { return relayObserver{p, p.outbox} }

// Endpoint returns the observer of the relay that delivers to the webhook
// endpoint name (its lane, in endpoints mode): its delivery series carry
// endpoint=name, for the first Options.MaxEndpoints names given, and
// endpoint=OtherEndpoint for later ones. Its claims, renewals and
// reclaims add to the counters every relay shares. Endpoint("") is
// Relay(). Asking again for the same name returns an observer of the same
// series.
func (p *Prometheus) Endpoint(name string) relay.Observer {
	if name == "" {
		return p.Relay()
	}
	return relayObserver{p, p.endpoints.get(name)}
}

// FanOut returns the observer of the outbox relay in endpoints mode, whose
// sink writes each event's deliveries to its endpoints: its attempts are
// counted apart from deliveries, in postbox_fanout_events_total and
// postbox_fanout_duration_seconds; its sink's outages and probes carry
// endpoint="" (it has no lag of its own: the lanes' deliveries do).
func (p *Prometheus) FanOut() relay.Observer { return fanOutObserver{relayObserver{p, p.outbox}} }

// relayObserver is the relay.Observer of a Prometheus for the deliveries
// to one destination.
type relayObserver struct {
	p  *Prometheus
	to *destination
}

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
		o.to.types.get(a.EventType)[a.Outcome].Inc()
	}
	if !a.Sent {
		return
	}
	o.to.deliveryTime.Observe(a.Duration.Seconds())
	if a.Outcome == relay.OutcomeDelivered {
		o.to.lag.Observe(max(a.Age, 0).Seconds())
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

// SinkState counts the relays that find the destination's sink
// unreachable: its sink_up gauge is 0 while any does.
func (o relayObserver) SinkState(up bool) {
	if up {
		o.to.sinkDown.Add(-1)
	} else {
		o.to.sinkDown.Add(1)
	}
}

// SinkProbed counts a probe.
func (o relayObserver) SinkProbed() { o.to.sinkProbes.Inc() }

// fanOutObserver is the relay.Observer of a Prometheus for the fan-out:
// a relayObserver whose attempts are counted as fan-outs.
type fanOutObserver struct{ relayObserver }

// Attempted counts a fan-out by event type and outcome, and times it.
func (o fanOutObserver) Attempted(a relay.Attempt) {
	if int(a.Outcome) < len(relay.Outcomes) {
		o.p.fanOutTypes.get(a.EventType)[a.Outcome].Inc()
	}
	if a.Sent {
		o.p.fanOutTime.Observe(a.Duration.Seconds())
	}
}

// Inbox returns the observer to give inbox.New with inbox.WithObserver.
func (p *Prometheus) Inbox() inbox.Observer { return inboxObserver{p} }

// inboxObserver is the inbox.Observer of a Prometheus.
type inboxObserver struct{ p *Prometheus }

// Handled counts a call of Process by event type and outcome, and times
// its handler.
func (o inboxObserver) Handled(h inbox.Handling) {
	if i := int(h.Outcome) - 1; i >= 0 && i < len(inbox.Outcomes) { // Outcomes start at 1
		o.p.inboxTypes.get(h.EventType)[i].Inc()
	}
	if h.HandlerRan {
		o.p.handlerTime.Observe(h.HandlerDuration.Seconds())
	}
}
