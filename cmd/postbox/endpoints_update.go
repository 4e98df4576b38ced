package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/filter"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink/envelope"
	"github.com/postbox-go/postbox/sink/nats"
	"github.com/postbox-go/postbox/sink/webhook/guard"
	"github.com/postbox-go/postbox/store"
)

// endpointFields are the flags of the fields "endpoints add" sets and
// "endpoints update" changes.
type endpointFields struct {
	url          string
	name         string
	types        string
	rate         rateFlag
	concurrency  int
	shadow       bool
	allowPrivate bool
	filter       string
	envelope     string
	ceSource     string
	signature    string
}

// allowPrivateHelp is the help of --allow-private, which says what the
// registration's check does with a host that does not resolve.
const allowPrivateHelp = "let this endpoint reach loopback, private and link-local addresses (an internal endpoint): without it, a --url whose host is or resolves to one is refused here, and the relay's SSRF guard refuses it at every connection " +
	"(a host that does not resolve now is accepted with a warning: the relay checks the addresses at every connection)"

// endpointConcurrencyDefault is the --concurrency of endpoints add.
const endpointConcurrencyDefault = 8

// register declares the flags: endpoints add's, with their defaults, or
// with update endpoints update's, which change only what is given.
func (f *endpointFields) register(fs *flag.FlagSet, update bool) {
	concurrencyDefault := endpointConcurrencyDefault
	if update {
		concurrencyDefault = 0
	}
	fs.Var(&f.rate, "rate", "most deliveries started per second, R/s (0/s: no limit)")
	fs.StringVar(&f.url, "url", "", "the endpoint's URL: a webhook's (https:// or http://), or a broker's as --sink takes it (nats://HOST:PORT?subject=..., amqp://HOST/VHOST?exchange=..., kafka://BROKER?topic=...)")
	fs.StringVar(&f.name, "name", "", "a name for people, which commands also take instead of the id")
	fs.StringVar(&f.types, "types", "", "comma-separated globs on the event type, such as 'order.*,payment.succeeded' (empty: every event)")
	fs.IntVar(&f.concurrency, "concurrency", concurrencyDefault, "most deliveries in flight to the endpoint at once")
	fs.BoolVar(&f.shadow, "shadow", false, "a shadow endpoint: receives a copy; its failures are dropped, never dead letters")
	fs.BoolVar(&f.allowPrivate, "allow-private", false, allowPrivateHelp)
	fs.StringVar(&f.filter, "filter", "", "a CEL expression on the event that must be true for the endpoint to receive it, beside --types, such as 'payload.total > 100 && headers.?tenant == optional.of(\"acme\")' (see docs/endpoints.md); '': no filter")
	fs.StringVar(&f.envelope, "envelope", "", "what deliveries are wrapped in: raw (the payload alone), standard (Standard Webhooks' {type, timestamp, data}), cloudevents (CloudEvents 1.0, structured) or cloudevents-binary (CloudEvents attributes as headers; not over nats://) (default raw)")
	fs.StringVar(&f.ceSource, "ce-source", "", "the CloudEvents source attribute of --envelope cloudevents or cloudevents-binary, a URI-reference such as /shop/orders (default "+envelope.SourceDefault+")")
	fs.StringVar(&f.signature, "signature", "", "a webhook's signature profile: standard, x-signature, svix (Standard Webhooks under svix-* headers), 'standard;prefix=acme' (acme-id, acme-timestamp, acme-signature) or 'standard;id=A,timestamp=B,signature=C' (default: the relay's --signature)")
	setCommandLineOnly(fs, !update, "rate", "url", "name", "types", "concurrency", "shadow", "allow-private", "filter", "envelope", "ce-source", "signature")
}

// resolveTimeout bounds the name resolution of an endpoint's host at
// registration.
const resolveTimeout = 5 * time.Second

// checkEndpointAddress is the SSRF guard at registration: it refuses a URL
// whose host is, or resolves to, an address the relay's guard refuses
// (loopback, private, link-local and the other special ranges of package
// guard) unless allowPrivate, with an error that names --allow-private.
// Addresses no endpoint can have (unspecified, multicast, broadcast) are
// refused whatever allowPrivate. A host that does not resolve is accepted:
// the returned warning says so (the relay's guard checks the addresses at
// every connection, whatever they resolve to then). Errors name the host,
// never the URL's path or query.
func checkEndpointAddress(ctx context.Context, rawURL string, allowPrivate bool, resolver *net.Resolver) (warning string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("%w: --url: not a URL", errUsage)
	}
	host := u.Hostname()
	g, err := guard.New(guard.Config{AllowPrivate: allowPrivate})
	if err != nil {
		return "", err
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return "", refusedAddress(g.Check(addr), "")
	}
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		var dnsErr *net.DNSError
		reason := "the lookup failed"
		if errors.As(err, &dnsErr) {
			reason = dnsErr.Err
		}
		return fmt.Sprintf("warning: --url: host %s does not resolve now (%s): accepted unchecked; the relay's SSRF guard checks its addresses at every connection", printable.String(host), reason), nil
	}
	for _, addr := range addrs {
		if err := refusedAddress(g.Check(addr), host); err != nil {
			return "", err
		}
	}
	return "", nil
}

// refusedAddress turns a refusal of the guard into the registration's
// error; host is the name that resolved to the address, "" for an address
// given as such.
func refusedAddress(err error, host string) error {
	var blocked *guard.BlockedError
	if !errors.As(err, &blocked) {
		return err
	}
	what := blocked.Addr.String()
	if host != "" {
		what = "host " + printable.String(host) + " resolves to " + what + ", which"
	}
	if !blocked.Private {
		return fmt.Errorf("%w: --url: %s is %s: no endpoint can be reached there", errUsage, what, blocked.Rule)
	}
	return fmt.Errorf("%w: --url: %s is %s, which the relay's SSRF guard refuses: give --allow-private to let this endpoint reach private addresses", errUsage, what, blocked.Rule)
}

// checkEndpointFields checks the fields of e, as add and update store
// them; checkAddress says whether to run the SSRF check on e.URL when it
// is a webhook's (see checkEndpointAddress; a broker's address is the
// operator's, as --sink's is), whose warning it returns, for the command
// to print once it succeeded. given says which flags were given: the
// settings only a webhook has are refused for a broker's endpoint when
// given.
func checkEndpointFields(ctx context.Context, e store.Endpoint, checkAddress bool, given func(string) bool) (warning string, err error) {
	if err := checkEndpointURL(e.URL); err != nil {
		return "", err
	}
	if err := endpoint.ValidateTypes(e.Types); err != nil {
		return "", fmt.Errorf("%w: --types: %v", errUsage, err)
	}
	if e.Concurrency < 1 {
		return "", fmt.Errorf("%w: --concurrency %d: at least 1", errUsage, e.Concurrency)
	}
	if err := checkFilter(e.Filter); err != nil {
		return "", err
	}
	webhookURL := isWebhook(e.URL)
	if env, err := endpoint.ParseEnvelope(e.Envelope); err != nil {
		return "", fmt.Errorf("%w: --envelope: %v", errUsage, err)
	} else if k, _, _ := endpoint.LookupKind(endpointKinds, e.URL); env.Kind == envelope.CloudEventsBinary && k.Name == nats.URL.Name {
		return "", fmt.Errorf("%w: --envelope cloudevents-binary: NATS has no CloudEvents binary mode (its protocol binding defines structured mode only): give --envelope cloudevents", errUsage)
	}
	if given("signature") && e.Signature != "" && !webhookURL {
		return "", fmt.Errorf("%w: --signature: a broker's endpoint signs nothing (only webhooks, http:// and https://, are signed)", errUsage)
	}
	if !checkAddress || !webhookURL {
		return "", nil
	}
	return checkEndpointAddress(ctx, e.URL, e.AllowPrivate, nil)
}

// checkFilter refuses a --filter that does not compile, saying where
// (line:column) and why.
func checkFilter(expr string) error {
	if expr == "" {
		return nil
	}
	if err := filter.Check(expr); err != nil {
		return fmt.Errorf("%w: --filter: %s", errUsage, strings.TrimPrefix(err.Error(), "filter: "))
	}
	return nil
}

// envelopeSetting is the Envelope setting (store.Endpoint.Envelope, as
// endpoint.ParseEnvelope reads it) of --envelope and --ce-source over
// current, the endpoint's ("" on add): each flag given replaces its part;
// a source is kept only for the CloudEvents envelopes. The raw envelope
// is "".
func (f *endpointFields) envelopeSetting(current string, given func(string) bool) (string, error) {
	cur, err := endpoint.ParseEnvelope(current)
	if err != nil {
		cur = envelope.Config{}
	}
	kind, source := cur.Kind, cur.Source
	if given("envelope") {
		if kind, err = envelope.ParseKind(f.envelope); err != nil {
			return "", fmt.Errorf("%w: --envelope %q: want raw, standard, cloudevents or cloudevents-binary", errUsage, printable.String(f.envelope))
		}
	}
	cloudEvents := kind == envelope.CloudEvents || kind == envelope.CloudEventsBinary
	switch {
	case given("ce-source") && !cloudEvents:
		return "", fmt.Errorf("%w: --ce-source: only --envelope cloudevents and cloudevents-binary have a source", errUsage)
	case given("ce-source"):
		source = f.ceSource
	case !cloudEvents:
		source = ""
	}
	spec := kind.String()
	if source != "" && source != envelope.SourceDefault {
		spec += ";source=" + source
	}
	cfg, err := endpoint.ParseEnvelope(spec)
	if err != nil {
		return "", fmt.Errorf("%w: --ce-source: %v", errUsage, err)
	}
	if cfg.Kind == envelope.Raw {
		return "", nil
	}
	return endpoint.FormatEnvelope(cfg), nil
}

// signatureSetting is the Signature setting of --signature spec: the
// profile's canonical text (signature.Profile.String), "" for the
// relay's --signature.
func signatureSetting(spec string) (string, error) {
	if spec == "" {
		return "", nil
	}
	p, err := signature.ParseProfile(spec)
	if err != nil {
		return "", fmt.Errorf("%w: --signature: %v", errUsage, err)
	}
	return p.String(), nil
}

// warn prints a command's warning, if any, to stderr.
func warn(warning string) {
	if warning != "" {
		fmt.Fprintln(os.Stderr, warning)
	}
}

// findEndpoint returns the endpoint arg names: its id, or its name when
// arg is no id and exactly one endpoint has it.
func findEndpoint(ctx context.Context, s store.Endpoints, arg string) (store.Endpoint, error) {
	if id, err := uuid.Parse(arg); err == nil {
		e, err := s.EndpointGet(ctx, id)
		return e, notFound(id, err)
	}
	all, err := s.EndpointList(ctx)
	if err != nil {
		return store.Endpoint{}, err
	}
	var found []store.Endpoint
	for _, e := range all {
		if e.Name == arg {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		return store.Endpoint{}, fmt.Errorf("no endpoint named %q (postbox endpoints list shows them)", printable.String(arg))
	case 1:
		return found[0], nil
	}
	return store.Endpoint{}, fmt.Errorf("%d endpoints are named %q: give the id of one (postbox endpoints list shows them)", len(found), printable.String(arg))
}

func setupEndpointsUpdate(fs *flag.FlagSet) func(context.Context) error {
	var f endpointFields
	f.register(fs, true)
	var cf credentialFlags
	cf.register(fs, true)
	var key secretsKeyFlag
	key.register(fs, "needed to open and seal the endpoint's secrets")
	var (
		k       *keyring.Keyring
		ch      credentialChange
		secrets secretReader
	)
	check := func() (err error) {
		if ch, err = cf.read(fs, &secrets); err != nil {
			return err
		}
		k, err = key.load("endpoints update")
		return err
	}
	return endpointCommand("update", false, fs, check, func(ctx context.Context, s store.Endpoints, e store.Endpoint) error {
		given := func(name string) bool { return isFlagSet(fs, name) }
		changed, err := f.apply(fs, &e)
		if err != nil {
			return err
		}
		if len(changed) == 0 && len(ch.given) == 0 {
			return fmt.Errorf("%w: nothing to change: give --url, --name, --types, --rate, --concurrency, --shadow, --allow-private, --filter, --envelope, --ce-source, --signature, "+
				"--header, --clear-headers, --basic, --bearer, --oauth2-*, --auth none, --tls-* or --no-tls", errUsage)
		}
		rawURL := e.URL
		if given("url") {
			if isWebhook(rawURL) && ch.basic != nil && hasUserInfo(rawURL) {
				return fmt.Errorf("%w: --basic and a --url with user information are both Basic authentication: give one", errUsage)
			}
			secrets.urlPassword(rawURL)
			var scratch endpoint.Credentials
			if err := moveURLCredentials(&e, &scratch); err != nil {
				return err
			}
		}
		// The address is checked again when it or its allowance changes:
		// an endpoint registered before the check existed keeps working
		// while other fields change.
		warning, err := checkEndpointFields(ctx, e, given("url") || given("allow-private"), given)
		if err != nil {
			return err
		}
		change := func(c *endpoint.Credentials, _ *time.Time) error {
			ch.apply(c)
			if given("url") {
				scratch := store.Endpoint{URL: rawURL}
				if err := moveURLCredentials(&scratch, c); err != nil {
					return err
				}
				if isWebhook(e.URL) { // a broker's user and password: no webhook's
					c.URLUser, c.URLPassword = "", ""
				}
			}
			return checkCredentialsFor(e.URL, *c, true)
		}
		current, err := endpoint.Open(k, e)
		if err != nil {
			return err
		}
		next := current
		if err := change(&next, nil); err != nil {
			return err
		}
		if isWebhook(e.URL) && next.Secret == "" {
			return fmt.Errorf("%w: --url: a webhook signs its requests, and this endpoint has no secret (it was added for a broker): give it one first with postbox endpoints rotate-secret --grace 0 %s", errUsage, e.ID)
		}
		reseal := !reflect.DeepEqual(current, next)
		if isWebhook(e.URL) && (reseal || given("url") || given("signature") || given("envelope") || given("ce-source")) {
			probe := e
			if err := endpoint.Seal(k, &probe, next); err != nil {
				return err
			}
			if err := checkWebhookSink(ctx, k, probe); err != nil {
				return err
			}
		}
		if reseal {
			// A URL given changes with its credentials, in one write.
			url := ""
			if given("url") {
				url = e.URL
			}
			if err := endpoint.Reseal(ctx, s, k, e.ID, url, change); err != nil {
				return err
			}
		}
		if len(changed) > 0 {
			if _, err := s.EndpointUpdate(ctx, e); err != nil {
				return err
			}
		}
		fmt.Printf("endpoint %s updated: %s\n", e.ID, strings.Join(append(changed, ch.given...), ", "))
		warn(warning)
		warn(secrets.warning())
		return nil
	})
}

// apply sets the fields of e whose flags fs was given, and returns the
// names of those flags.
func (f *endpointFields) apply(fs *flag.FlagSet, e *store.Endpoint) (changed []string, err error) {
	given := func(name string) bool { return isFlagSet(fs, name) }
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "url":
			e.URL = f.url
		case "name":
			e.Name = f.name
		case "types":
			e.Types = store.SplitTypes(f.types)
		case "rate":
			e.RatePerSecond = float64(f.rate)
		case "concurrency":
			e.Concurrency = f.concurrency
		case "shadow":
			e.Shadow = f.shadow
		case "allow-private":
			e.AllowPrivate = f.allowPrivate
		case "filter":
			e.Filter = f.filter
		case "signature":
		case "envelope", "ce-source":
		default:
			return
		}
		changed = append(changed, fl.Name)
	})
	if given("signature") {
		if e.Signature, err = signatureSetting(f.signature); err != nil {
			return nil, err
		}
	}
	if given("envelope") || given("ce-source") {
		if e.Envelope, err = f.envelopeSetting(e.Envelope, given); err != nil {
			return nil, err
		}
	}
	return changed, nil
}

// isFlagSet reports whether the flag name was given, on the command line
// or by its environment variable (the flags of endpointFields: on the
// command line only).
func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
