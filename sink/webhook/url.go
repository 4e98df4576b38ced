package webhook

import (
	"context"
	"fmt"
	"net/url"

	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
)

// URL is the webhook's sink.URLKind: an http:// or https:// URL is the
// endpoint, each event one signed POST to it. Its Open reads the options'
// Secrets (required) and Signature (a profile, see
// signature.ParseProfile: "standard", "x-signature", "svix",
// "standard;prefix=acme"...), Timeout and Concurrency (the sink's
// MaxConcurrency); it ignores User and Password, which are a broker's:
// credentials of the endpoint go in the URL's user information. Nothing is
// opened before the first publish, so nothing is to be closed.
var URL = sink.URLKind{
	Name:    "webhook",
	Schemes: []string{"https", "http"},
	// One request per publish: the sink's own default slots.
	Concurrency:  MaxConcurrencyDefault,
	PublishBatch: 1,
	Open:         openURL,
	Describe:     describeURL,
}

// describeURL is URL's Describe: a webhook is described by its scheme and
// host alone, as in its log lines, its path and query (which may hold a
// token) reading "/…" and kept as secrets.
func describeURL(u *url.URL) (string, []string) {
	desc := "webhook " + u.Scheme + "://" + u.Host
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		desc += "/…"
	}
	desc, secrets := sink.DescribeQuery(u, desc)
	if len(u.Path) > 1 {
		secrets = append(secrets, u.Path)
	}
	return desc, secrets
}

// openURL is URL's Open. Every refusal is an OptionError: a webhook's
// Config says all that can be wrong before a request is sent.
func openURL(_ context.Context, u *url.URL, o sink.URLOptions) (sink.Sink, error) {
	if len(o.Secrets) == 0 {
		return nil, &sink.OptionError{Option: "Secrets", Err: sink.ErrRequired}
	}
	if o.Signature == "" { // ParseProfile's default, but the option is required
		return nil, &sink.OptionError{Option: "Signature", Err: fmt.Errorf("%w: none given: want a profile such as \"standard\", \"x-signature\" or \"svix\"", signature.ErrUnknownScheme)}
	}
	profile, err := signature.ParseProfile(o.Signature)
	if err != nil {
		return nil, &sink.OptionError{Option: "Signature", Err: err}
	}
	s, err := New(Config{
		URL:            u.String(),
		Secrets:        o.Secrets,
		Scheme:         profile.Scheme,
		HeaderNames:    profile.Names,
		Timeout:        o.Timeout,
		MaxConcurrency: o.Concurrency,
		Client:         o.HTTPClient,
	})
	if err != nil {
		return nil, &sink.OptionError{Err: err}
	}
	return s, nil
}
