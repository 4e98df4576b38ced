package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/service"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/sink/webhook/guard"
	"github.com/postbox-go/postbox/store"
)

// endpointKinds are the sinks an endpoint's URL may name besides a webhook
// (http and https URLs, which endpoints always are): those of --sink, with
// the same URL parameters.
var endpointKinds = slices.DeleteFunc(slices.Clone(sinkKinds), func(k sink.URLKind) bool { return k.Name == webhook.URL.Name })

// guardFlags are the SSRF guard's flags.
type guardFlags struct {
	allowPrivate bool
	allow        prefixList
}

func (g *guardFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&g.allowPrivate, "allow-private-endpoints", false, "let every endpoint's deliveries reach loopback, private and link-local addresses (internal endpoints); to allow one endpoint only: postbox endpoints add|update --allow-private")
	fs.Var(&g.allow, "allow-cidr", "comma-separated CIDRs endpoint deliveries may reach although private, such as 10.1.0.0/16")
}

// config is the SSRF guard's configuration the flags give: it refuses
// loopback, private, link-local, CGNAT, unique-local, multicast and other
// special addresses at connect time (after DNS, so rebinding cannot get
// round it) unless the flags allow them.
func (g *guardFlags) config() guard.Config {
	return guard.Config{AllowPrivate: g.allowPrivate, Allow: g.allow}
}

// endpointClient is the client of endpoints test: the guard of the flags
// and of e (which may allow private addresses), whole requests bounded by
// timeout.
func (g *guardFlags) endpointClient(e store.Endpoint, timeout time.Duration) (*http.Client, error) {
	cfg := g.config()
	cfg.AllowPrivate = cfg.AllowPrivate || e.AllowPrivate
	gd, err := guard.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: SSRF guard: %v", errUsage, err)
	}
	return gd.Client(timeout), nil
}

// prefixList is --allow-cidr.
type prefixList []netip.Prefix

func (p *prefixList) String() string {
	s := make([]string, len(*p))
	for i, v := range *p {
		s[i] = v.String()
	}
	return strings.Join(s, ",")
}

func (p *prefixList) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(f)
		if err != nil {
			return err
		}
		*p = append(*p, prefix.Masked())
	}
	return nil
}

// endpointsFlags are the relay's flags of endpoints mode.
type endpointsFlags struct {
	on           bool
	guard        guardFlags
	disableAfter time.Duration
	retention    time.Duration
	breaker      int
	direct       time.Duration
	events       operatorEventsFlags
	key          secretsKeyFlag
	// keyring opens the endpoints' secrets: the key of --secrets-key-file
	// or $POSTBOX_SECRETS_KEY, loaded by loadKey.
	keyring *keyring.Keyring
}

func (e *endpointsFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&e.on, "endpoints", false, "deliver to the endpoints in the database (postbox endpoints add: webhooks, NATS subjects, RabbitMQ exchanges, Kafka topics), their secrets opened with the secrets key ($"+keyring.EnvVar+" or --secrets-key-file): the relay drains the outbox into a fan-out that delivers directly to idle endpoints (--direct-within) and writes one delivery for each other matching endpoint, "+
		"and one lane per enabled endpoint delivers those, with the relay's flags (--lease, --backoff-*, --max-attempts, --probe-interval, --timeout, --batch, --claim-bytes, --ordered, --signature) and the endpoint's own concurrency and rate")
	e.guard.register(fs)
	fs.DurationVar(&e.disableAfter, "disable-after", endpoint.DisableAfterDefault, "with --endpoints: disable an endpoint whose attempts all failed for this long")
	fs.DurationVar(&e.retention, "attempts-retention", endpoint.RetentionDefault, "with --endpoints: how long attempts, dropped deliveries and (with --retention) delivered ones are kept")
	fs.IntVar(&e.breaker, "breaker-failures", endpoint.BreakerFailuresDefault, "with --endpoints: consecutive failed attempts that open an endpoint's breaker: its lane then probes it, counting no attempt, as the relay does a sink it finds unreachable")
	fs.DurationVar(&e.direct, "direct-within", endpoint.DirectWithinDefault, "with --endpoints: the fan-out delivers each event directly to the matching endpoints that have no rate limit and answer within this "+
		"(or within 4 times the median endpoint's time), writing a delivery only for the others and for attempts that did not deliver; with --ordered, only to endpoints with nothing queued; "+
		"0: every delivery is written first, as it always is with --retention (a kept delivery is what stops an event published again after a crash from reaching an endpoint twice)")
	e.events.register(fs)
	e.key.register(fs, "required with --endpoints")
}

// operatorEventsFlags are the flags of the operator events of endpoints
// mode (endpoint.OperatorEventsConfig).
type operatorEventsFlags struct {
	on           bool
	failingAfter time.Duration
	deadLetters  int
	checkEvery   time.Duration
}

func (o *operatorEventsFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.on, "operator-events", true, "with --endpoints: write operator events into the outbox ("+endpoint.EventEndpointFailing+", "+endpoint.EventEndpointRecovered+", "+
		endpoint.EventEndpointDisabled+", "+endpoint.EventDeadLettersGrew+"), delivered to the endpoints whose --types name them, such as 'postbox.endpoint.*' (a chat's or an on-call service's webhook); once per transition whichever relay sees it")
	fs.DurationVar(&o.failingAfter, "notify-failing-after", endpoint.FailingAfterDefault, "with --endpoints: an endpoint whose attempts have all failed for this long gets a "+
		endpoint.EventEndpointFailing+" event (not at the first failure), and one that answers again after that a "+endpoint.EventEndpointRecovered)
	fs.IntVar(&o.deadLetters, "notify-deadletters", endpoint.DeadLettersDefault, "with --endpoints: a dead-letter group (of the outbox or of an endpoint, grouped by error as postbox failed list --group-by error does) gets a "+
		endpoint.EventDeadLettersGrew+" event each time it reaches another multiple of this (0: none)")
	fs.DurationVar(&o.checkEvery, "notify-check-every", endpoint.CheckEveryDefault, "with --endpoints: how often the dead-letter groups are checked for --notify-deadletters (one query for the outbox and one per enabled endpoint)")
}

// operatorEventsOnlyFlags are the flags that mean something only with
// --operator-events.
var operatorEventsOnlyFlags = []string{"notify-failing-after", "notify-deadletters", "notify-check-every"}

// config is the supervisor's operator events of the flags, nil when off;
// they are written into the outbox the relay drains.
func (o *operatorEventsFlags) config() *endpoint.OperatorEventsConfig {
	if !o.on {
		return nil
	}
	deadLetters := o.deadLetters
	if deadLetters == 0 {
		deadLetters = -1 // --notify-deadletters 0: off, where the library reads 0 as its default
	}
	return &endpoint.OperatorEventsConfig{FailingAfter: o.failingAfter, DeadLetters: deadLetters, CheckEvery: o.checkEvery}
}

// loadKey loads the secrets key of endpoints mode, refusing to start
// without one (the endpoints' secrets are sealed with it).
func (e *endpointsFlags) loadKey() (err error) {
	e.keyring, err = e.key.load("relay --endpoints")
	return err
}

// endpointsOnlyFlags are the relay's flags that mean something only with
// --endpoints.
var endpointsOnlyFlags = append([]string{"allow-private-endpoints", "allow-cidr", "disable-after", "attempts-retention", "breaker-failures", "direct-within", "secrets-key-file",
	"operator-events"}, operatorEventsOnlyFlags...)

// notWithEndpoints are the relay's flags that --endpoints refuses, and why.
var notWithEndpoints = map[string]string{
	"webhook-secret": "each endpoint signs with its own secret (postbox endpoints add --secret, rotate-secret)",
}

// checkModeFlags refuses the flags given (on the command line or by their
// environment variable) that do not apply to the mode: those of
// notWithEndpoints with --endpoints, those of endpointsOnlyFlags without.
func (e *endpointsFlags) checkModeFlags(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		if why, refused := notWithEndpoints[f.Name]; refused && e.on {
			err = fmt.Errorf("%w: --%s ($%s) does not apply with --endpoints: %s", errUsage, f.Name, envName(f.Name), why)
		}
		if slices.Contains(endpointsOnlyFlags, f.Name) && !e.on {
			err = fmt.Errorf("%w: --%s ($%s) applies only with --endpoints", errUsage, f.Name, envName(f.Name))
		}
		if slices.Contains(operatorEventsOnlyFlags, f.Name) && e.on && !e.events.on {
			err = fmt.Errorf("%w: --%s ($%s) applies only with --operator-events, which is false", errUsage, f.Name, envName(f.Name))
		}
	})
	return err
}

// fanOutPublishBatchDefault is the relay's --publish-batch in endpoints
// mode: the fan-out writes the deliveries of up to this many events in one
// statement, and with --concurrency 64 two such writes run at once.
const fanOutPublishBatchDefault = 32

// config is the service's endpoints mode of the flags, its endpoints in
// s; scheme and timeout are the relay's --signature and --timeout.
func (e *endpointsFlags) config(s store.Endpoints, scheme string, timeout time.Duration) (*service.EndpointsConfig, error) {
	sch, err := signature.ParseScheme(scheme)
	if err != nil {
		return nil, fmt.Errorf("%w: --signature: %v", errUsage, err)
	}
	direct := e.direct
	if direct == 0 {
		direct = -1 // --direct-within 0: off, where the library reads 0 as its default
	}
	return &service.EndpointsConfig{
		Store: s, Keyring: e.keyring, Signature: sch, Timeout: timeout, Guard: e.guard.config(), Kinds: endpointKinds,
		BreakerFailures: e.breaker, DisableAfter: e.disableAfter, Retention: e.retention, DirectWithin: direct,
		OperatorEvents: e.events.config(),
	}, nil
}

// endpointsConfigError rewrites an error of endpoint.New, which names the
// fields of its SupervisorConfig and of the relay and webhook templates in it, as a
// usage error that names the relay's flags that set them.
func endpointsConfigError(err error) error {
	msg := strings.ReplaceAll(err.Error(), "SupervisorConfig.", "Config.")
	msg = strings.NewReplacer("Config.Relay: relay: Config.", "Config.", "Config.Webhook: webhook: Config.", "Config.").Replace(msg)
	fields := map[string]string{
		"BreakerFailures": "breaker-failures", "DisableAfter": "disable-after", "Retention": "attempts-retention", "PollInterval": "poll",
		"ClaimBytes": "claim-bytes", "Timeout": "timeout",
		"OperatorEvents.FailingAfter": "notify-failing-after", "OperatorEvents.CheckEvery": "notify-check-every",
	}
	for field, name := range relayConfigFlags {
		if field != "Retention" && field != "PollInterval" {
			fields[field] = name
		}
	}
	return withFlagNames(errors.New(msg), fields)
}
