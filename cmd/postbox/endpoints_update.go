package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/sink/envelope"
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

// register declares the flags: endpoints add's, with their defaults, or
// with update endpoints update's, which change only what is given.
func (f *endpointFields) register(fs *flag.FlagSet, update bool) {
	concurrencyDefault := admin.ConcurrencyDefault
	if update {
		concurrencyDefault = 0
	}
	fs.Var(&f.rate, "rate", "most deliveries started per second, R/s (0/s: no limit)")
	fs.StringVar(&f.url, "url", "", "the endpoint's URL: a webhook's (https:// or http://), or a broker's as --sink takes it (nats://HOST:PORT?subject=..., amqp://HOST/VHOST?exchange=..., kafka://BROKER?topic=...)")
	fs.StringVar(&f.name, "name", "", "a name for people, which commands also take instead of the id")
	fs.StringVar(&f.types, "types", "", "comma-separated globs on the event type, such as 'order.*,payment.succeeded' (empty: every event but postbox's own operator events, postbox.*, which go only to endpoints whose globs name them, such as 'postbox.endpoint.*')")
	fs.IntVar(&f.concurrency, "concurrency", concurrencyDefault, "most deliveries in flight to the endpoint at once")
	fs.BoolVar(&f.shadow, "shadow", false, "a shadow endpoint: receives a copy; its failures are dropped, never dead letters")
	fs.BoolVar(&f.allowPrivate, "allow-private", false, allowPrivateHelp)
	fs.StringVar(&f.filter, "filter", "", "a CEL expression on the event that must be true for the endpoint to receive it, beside --types, such as 'payload.total > 100 && headers.?tenant == optional.of(\"acme\")' (see docs/endpoints.md); '': no filter")
	fs.StringVar(&f.envelope, "envelope", "", "what deliveries are wrapped in: raw (the payload alone), standard (Standard Webhooks' {type, timestamp, data}), cloudevents (CloudEvents 1.0, structured) or cloudevents-binary (CloudEvents attributes as headers; not over nats://) (default raw)")
	fs.StringVar(&f.ceSource, "ce-source", "", "the CloudEvents source attribute of --envelope cloudevents or cloudevents-binary, a URI-reference such as /shop/orders (default "+envelope.SourceDefault+")")
	fs.StringVar(&f.signature, "signature", "", "a webhook's signature profile: standard, x-signature, svix (Standard Webhooks under svix-* headers), 'standard;prefix=acme' (acme-id, acme-timestamp, acme-signature) or 'standard;id=A,timestamp=B,signature=C' (default: the relay's --signature)")
	setCommandLineOnly(fs, !update, "rate", "url", "name", "types", "concurrency", "shadow", "allow-private", "filter", "envelope", "ce-source", "signature")
}

// warn prints a command's warning, if any, to stderr.
func warn(warning string) {
	if warning != "" {
		fmt.Fprintln(os.Stderr, warning)
	}
}

// warnAll prints the warnings admin returned, each on a line of its own.
func warnAll(warnings []string) {
	for _, w := range warnings {
		warn("warning: " + w)
	}
}

func setupEndpointsUpdate(fs *flag.FlagSet) func(context.Context) error {
	var f endpointFields
	f.register(fs, true)
	var cf credentialFlags
	cf.register(fs, true)
	var key secretsKeyFlag
	key.register(fs, "needed to open and seal the endpoint's secrets")
	var (
		ch      credentialChange
		secrets secretReader
	)
	check := func(cfg *admin.Config) (err error) {
		if ch, err = cf.read(fs, &secrets); err != nil {
			return err
		}
		cfg.Keyring, err = key.load("endpoints update")
		return err
	}
	return endpointCommand("update", false, fs, check, func(ctx context.Context, a *admin.Admin, e store.Endpoint) error {
		change, changed := f.change(fs)
		if len(changed) == 0 && len(ch.given) == 0 {
			return fmt.Errorf("%w: nothing to change: give --url, --name, --types, --rate, --concurrency, --shadow, --allow-private, --filter, --envelope, --ce-source, --signature, "+
				"--header, --clear-headers, --basic, --bearer, --oauth2-*, --auth none, --tls-* or --no-tls", errUsage)
		}
		if change.URL != nil {
			secrets.urlPassword(*change.URL)
		}
		change.Credentials = ch.CredentialChange
		updated, err := a.Update(ctx, e.ID, change)
		if err != nil {
			return err
		}
		fmt.Printf("endpoint %s updated: %s\n", e.ID, strings.Join(append(changed, ch.given...), ", "))
		warnAll(updated.Warnings)
		warn(secrets.warning())
		return nil
	})
}

// change is the change of the settings whose flags fs was given, and the
// names of those flags.
func (f *endpointFields) change(fs *flag.FlagSet) (ch admin.Change, changed []string) {
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "url":
			ch.URL = &f.url
		case "name":
			ch.Name = &f.name
		case "types":
			types := store.SplitTypes(f.types)
			ch.Types = &types
		case "rate":
			rate := float64(f.rate)
			ch.RatePerSecond = &rate
		case "concurrency":
			ch.Concurrency = &f.concurrency
		case "shadow":
			ch.Shadow = &f.shadow
		case "allow-private":
			ch.AllowPrivate = &f.allowPrivate
		case "filter":
			ch.Filter = &f.filter
		case "signature":
			ch.Signature = &f.signature
		case "envelope":
			ch.Envelope = &f.envelope
		case "ce-source":
			ch.CESource = &f.ceSource
		default:
			return
		}
		changed = append(changed, fl.Name)
	})
	return ch, changed
}
