package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

// Defaults of the Config fields left zero.
const (
	BreakerFailuresDefault = 5
	BreakerPauseMinDefault = 5 * time.Second
	BreakerPauseMaxDefault = 5 * time.Minute
	DisableAfterDefault    = 5 * 24 * time.Hour
	RetentionDefault       = 7 * 24 * time.Hour
	RefreshEveryDefault    = 2 * time.Second
	PollIntervalDefault    = time.Second
	AttemptsFlushDefault   = 200 * time.Millisecond
	AttemptsBatchDefault   = 500
	DirectWithinDefault    = 25 * time.Millisecond
)

// lanePollInterval is the PollInterval of every lane's relay: the
// supervisor wakes a lane when deliveries are written for it (the fan-out)
// or fall due (its due-poll), and the relay wakes itself for the retries it
// scheduled, so the lane's own poll is only a safety net (for a wake-up
// lost with a connection: ten lanes claim once a second between them).
const lanePollInterval = 10 * time.Second

// SupervisorConfig configures endpoints mode. Only Store is required; a zero field
// takes its default, a negative one is refused (but DirectWithin).
type SupervisorConfig struct {
	// Store holds the endpoints, their deliveries and the attempts log: a
	// store's driver, such as (*postgres.Store).Driver(). Required.
	Store store.Endpoints
	// Relay is the template of every lane's relay.Config. Set per lane:
	// Store (the lane), Sink (the endpoint's sink chain), Owner
	// (Relay.Owner plus the endpoint, so leases name both), Concurrency
	// (the endpoint's), Observer (from Observer below), Retention
	// (SupervisorConfig.Retention: delivered rows and attempts kept), DedupWindow
	// (-1: keys are the outbox's), PollInterval (long: the supervisor wakes
	// lanes), Stream (nil), DisableListen (false: the wake-ups are
	// in-process, no connection pooler stands in their way), and Logger
	// (Relay.Logger, or Logger, with the endpoint; a shadow endpoint's lane
	// logs at info level at most: it never alerts). Everything else
	// (Lease, BackoffMin/Max, MaxAttempts, RejectedAttempts, ProbeInterval,
	// Ordered, Tracer, BatchSize, ClaimBytes, ShutdownTimeout...) applies
	// to every lane exactly as to a relay. PublishBatch above 1 is refused:
	// a lane publishes one event at a time, whatever its sink (publish
	// batches apply to the relay draining the outbox into the FanOut,
	// which is a sink.BatchSink).
	Relay relay.Config
	// Webhook is the template of every http or https endpoint's
	// webhook.Config: URL, Secrets, MaxConcurrency and Client are set per
	// endpoint; Scheme, Timeout, MaxMessageBytes, MaxResponseBody,
	// UserAgent... are kept. Its Timeout (webhook.TimeoutDefault when
	// zero) bounds the publishes of the other endpoints too, and their
	// sink's opening (see OpenSink).
	Webhook webhook.Config
	// Keyring opens the endpoints' sealed secrets (store.Endpoint.Sealed,
	// see Seal). Required: an endpoint written by postbox endpoints add has
	// its secrets sealed (one written before migration 0014, whose secrets
	// are in clear, is delivered too, until postbox endpoints rekey seals
	// it). An endpoint sealed by a key the keyring lacks gets no lane,
	// logged once with the key's id.
	Keyring *keyring.Keyring
	// Client returns the HTTP client of one http or https endpoint's
	// deliveries (postbox relay: the SSRF-guarded client, allowing private
	// addresses when e.AllowPrivate). Default: one unguarded client for
	// all.
	Client func(e store.Endpoint) *http.Client
	// Kinds are the sinks other than webhooks that an endpoint's URL may
	// name by its scheme, with their URL parameters (the program's list,
	// as for postbox relay --sink: nats.URL, amqp.URL, kafka.URL); see
	// OpenSink. A lane opens its endpoint's sink before it starts, without
	// holding the others back: while its broker cannot be reached, it is
	// tried again at every refresh and the endpoint's deliveries wait. An
	// endpoint whose scheme no kind has is not delivered to (logged once);
	// its deliveries wait. Nil: endpoints are webhooks only.
	Kinds []sink.URLKind
	// Observer returns the relay.Observer of one endpoint's lane (nil func
	// or nil result: none).
	Observer func(e store.Endpoint) relay.Observer
	// BreakerFailures consecutive failed attempts to one endpoint open its
	// breaker (BreakerFailuresDefault): its lane then finds the endpoint
	// unreachable (sink.Unavailable), as a relay finds a sink that refuses
	// connections, and probes it, counting no attempt. The breaker lets
	// the first probe through after BreakerPauseMin, and each probe that
	// fails doubles the pause, up to BreakerPauseMax.
	BreakerFailures                  int
	BreakerPauseMin, BreakerPauseMax time.Duration
	// DisableAfter: an endpoint whose attempts all failed for this long is
	// disabled (store.EndpointAutoDisabled) and its lane stopped
	// (DisableAfterDefault, 5 days); enabling it delivers what waits.
	DisableAfter time.Duration
	// Retention is how long attempts, dropped deliveries and (with
	// KeepDelivered) delivered ones are kept (RetentionDefault, 7 days);
	// each lane purges its own.
	Retention time.Duration
	// KeepDelivered keeps each delivered delivery, marked done, until
	// Retention. Otherwise (the default, and the fast setting, as the
	// relay's for outbox events) a delivery is deleted once delivered: the
	// attempts log keeps the record of every attempt. A delivery kept also
	// keeps the fan-out from writing it again when the relay over the
	// outbox crashed before recording the event fanned out: deleted, it is
	// delivered again then, with the same webhook-id (an inbox absorbs it).
	KeepDelivered bool
	// RefreshEvery is how often the endpoints are read again: lanes are
	// started, stopped and restarted, and the fan-out routes, within it
	// (RefreshEveryDefault).
	RefreshEvery time.Duration
	// PollInterval is how often one query looks for due deliveries of
	// every lane (store.Endpoints.DeliveryDue), waking those that have
	// some: deliveries written by other processes, retries of another
	// relay (PollIntervalDefault).
	PollInterval time.Duration
	// DirectWithin: the fan-out offers each event directly to the lane of
	// every matching endpoint that has no rate limit, whose recent attempts
	// took at most DirectWithin or at most 4 times the median endpoint's
	// (measured by its attempts; an endpoint not measured yet gets its
	// deliveries written), and, with Relay.Ordered, no delivery queued; an
	// offer waits for one of the endpoint's slots until its batch's
	// deadline (the time the median endpoint takes for 4 batches, at least
	// DirectWithin). A delivery is written only for the endpoints that did
	// not get the event (see direct.go) (DirectWithinDefault). With
	// Relay.Ordered the relay over the outbox must be ordered too (postbox
	// relay --ordered is both): the fan-out writes, and does not offer, the
	// events of an aggregate that has two in one batch. Negative: no event is offered, every delivery
	// is written first; so it is with KeepDelivered, whose kept deliveries
	// are what stops an event published again after a crash of the relay
	// over the outbox from reaching an endpoint twice (an offer would not
	// look for them).
	DirectWithin time.Duration
	// AttemptsFlush and AttemptsBatch: attempts are written together, every
	// AttemptsFlush or once AttemptsBatch are waiting
	// (AttemptsFlushDefault, AttemptsBatchDefault).
	AttemptsFlush time.Duration
	AttemptsBatch int
	// OperatorEvents, when not nil, has the supervisor write operator
	// events into an outbox (see OperatorEventsConfig and
	// EventEndpointFailing): an endpoint failing for a while, recovered,
	// or disabled, and dead-letter groups that grew. Nil: none.
	OperatorEvents *OperatorEventsConfig
	// Logger receives the supervisor's logs, and the lanes' when
	// Relay.Logger is nil. Default: slog.Default().
	Logger *slog.Logger
}

// withDefaults fills the zero fields and validates the rest, with an error
// that names the field.
func (c SupervisorConfig) withDefaults() (SupervisorConfig, error) {
	if c.Store == nil {
		return c, errors.New("endpoint: SupervisorConfig.Store is required")
	}
	if c.Keyring == nil {
		return c, errors.New("endpoint: SupervisorConfig.Keyring is required: the endpoints' secrets are sealed under the operator's key (postbox relay reads it from " +
			keyring.EnvVar + " or --secrets-key-file; postbox keys generate --type secrets-key makes one)")
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"BreakerPauseMin", &c.BreakerPauseMin, BreakerPauseMinDefault},
		{"BreakerPauseMax", &c.BreakerPauseMax, BreakerPauseMaxDefault},
		{"DisableAfter", &c.DisableAfter, DisableAfterDefault},
		{"Retention", &c.Retention, RetentionDefault},
		{"RefreshEvery", &c.RefreshEvery, RefreshEveryDefault},
		{"PollInterval", &c.PollInterval, PollIntervalDefault},
		{"AttemptsFlush", &c.AttemptsFlush, AttemptsFlushDefault},
	}
	if c.DirectWithin == 0 {
		c.DirectWithin = DirectWithinDefault
	}
	for _, d := range durations {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < 0:
			return c, fmt.Errorf("endpoint: SupervisorConfig.%s %v is negative", d.name, *d.v)
		}
	}
	ints := []struct {
		name string
		v    *int
		def  int
	}{
		{"BreakerFailures", &c.BreakerFailures, BreakerFailuresDefault},
		{"AttemptsBatch", &c.AttemptsBatch, AttemptsBatchDefault},
	}
	for _, n := range ints {
		switch {
		case *n.v == 0:
			*n.v = n.def
		case *n.v < 0:
			return c, fmt.Errorf("endpoint: SupervisorConfig.%s %d is negative", n.name, *n.v)
		}
	}
	if c.BreakerPauseMax < c.BreakerPauseMin {
		return c, fmt.Errorf("endpoint: SupervisorConfig.BreakerPauseMax %v is below BreakerPauseMin %v", c.BreakerPauseMax, c.BreakerPauseMin)
	}
	if c.OperatorEvents != nil {
		oc, err := c.OperatorEvents.withDefaults()
		if err != nil {
			return c, err
		}
		c.OperatorEvents = &oc
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Relay.Logger == nil {
		c.Relay.Logger = c.Logger
	}
	if c.Relay.PublishBatch > 1 {
		return c, fmt.Errorf("endpoint: SupervisorConfig.Relay.PublishBatch %d: an endpoint's lane publishes one event at a time; "+
			"publish batches apply to the relay that drains the outbox into the FanOut", c.Relay.PublishBatch)
	}
	for i, k := range c.Kinds {
		if len(k.Schemes) == 0 || k.Open == nil {
			return c, fmt.Errorf("endpoint: SupervisorConfig.Kinds[%d] %q: a kind needs Schemes and Open", i, k.Name)
		}
	}
	// Check the templates as a lane would use them; the relay's default
	// Owner is the base of the lanes'.
	rc := c.Relay
	rc.Store, rc.Sink, rc.Concurrency, rc.PollInterval, rc.Stream = nopSource{}, nopSink{}, 1, lanePollInterval, nil
	r, err := relay.New(rc)
	if err != nil {
		return c, fmt.Errorf("endpoint: SupervisorConfig.Relay: %w", err)
	}
	c.Relay.Owner = r.Owner()
	wc := c.Webhook
	wc.URL, wc.Secrets, wc.MaxConcurrency = "https://example.com/", []string{templateSecret}, 1
	if _, err := webhook.New(wc); err != nil {
		return c, fmt.Errorf("endpoint: SupervisorConfig.Webhook: %w", err)
	}
	if c.Client == nil {
		client := newClient(c.Webhook.Timeout)
		c.Client = func(store.Endpoint) *http.Client { return client }
	}
	return c, nil
}

// templateSecret checks SupervisorConfig.Webhook with a secret that every signature
// scheme takes.
const templateSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// newClient is the default client of deliveries: no SSRF guard, requests
// bounded by timeout (the webhook sink's default when zero). Each lane
// clones its transport (see withCapture).
func newClient(timeout time.Duration) *http.Client {
	if timeout == 0 {
		timeout = webhook.TimeoutDefault
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = timeout
	return &http.Client{Transport: t}
}

// nopSource and nopSink stand for a lane and its sink where Config is
// checked: relay.New calls neither.
type (
	nopSource struct{ store.Source }
	nopSink   struct{ sink.Sink }
)

func (nopSink) String() string { return "none" }

func (nopSink) Destination() sink.Destination { return sink.Destination{} }

func (nopSink) Publish(context.Context, *sink.Message) error { return nil }
