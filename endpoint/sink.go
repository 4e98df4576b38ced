package endpoint

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/internal/redact"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/envelope"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

// An endpoint's URL names its sink, as postbox relay --sink does: an http
// or https URL is a webhook, built from SinkConfig.Webhook and Client and
// signed with the endpoint's secrets; any other scheme is that of one of
// SinkConfig.Kinds (a NATS subject, a RabbitMQ exchange, a Kafka topic),
// opened by the kind's Open with the URL's own parameters.

// SinkConfig is what OpenSink builds an endpoint's own sink from: the
// settings of SupervisorConfig that every endpoint's sink shares.
type SinkConfig struct {
	// Webhook is the template of an http or https endpoint's
	// webhook.Config: URL, Secrets, MaxConcurrency and Client are set per
	// endpoint. Its Timeout (webhook.TimeoutDefault when zero) bounds a
	// broker's publishes and its opening too.
	Webhook webhook.Config
	// Client returns the HTTP client of an http or https endpoint's
	// requests. Nil: one client with no SSRF guard.
	Client func(e store.Endpoint) *http.Client
	// Kinds are the other sinks an endpoint's URL may name, each by its
	// schemes (the program's list: nats.URL, amqp.URL, kafka.URL). A kind
	// of http or https URLs among them is not used: such endpoints are
	// webhooks, built from Webhook and Client.
	Kinds []sink.URLKind
	// Logger receives the sink's own lines (a broker connection lost and
	// back). Default slog.Default().
	Logger *slog.Logger
	// Keyring opens the endpoints' sealed secrets (Open). Nil: only the
	// endpoints whose secrets are not sealed (written before migration
	// 0014) can be opened.
	Keyring *keyring.Keyring
}

// OpenSink opens the sink of e at now: for an http or https URL, a webhook
// signed with e.Secrets(now), whose requests go through a connection pool
// of its own (cfg.Client's transport, cloned), at most e.Concurrency at
// once; for another URL, the sink of the kind of cfg.Kinds that has its
// scheme, opened with the kind's Open (which connects to the broker and
// checks that the destination exists) with the options Timeout (the
// webhook template's), Concurrency (e.Concurrency) and Logger. The sink
// implements io.Closer: Close releases its connections once no publish is
// in flight.
//
// A URL that is not one, a scheme no kind has, and what a kind refuses of
// the URL are a *sink.OptionError, which no retry mends; a broker that
// cannot be reached is any other error, which a later call may not get.
// An error never holds the URL's password, token or secret parameters.
func OpenSink(ctx context.Context, cfg SinkConfig, e store.Endpoint, now time.Time) (sink.Sink, error) {
	kind, u, err := LookupKind(cfg.Kinds, e.URL)
	if err != nil {
		return nil, err
	}
	env, err := ParseEnvelope(e.Envelope)
	if err != nil {
		return nil, &sink.OptionError{Option: "Envelope", Err: err}
	}
	c, err := Open(cfg.Keyring, e)
	if err != nil {
		return nil, &sink.OptionError{Option: "Secrets", Err: err}
	}
	if err := CheckHeaders(c.Headers); err != nil {
		return nil, &sink.OptionError{Option: "Headers", Err: err}
	}
	concurrency := max(e.Concurrency, 1)
	var s sink.Sink
	if kind.Name == webhook.URL.Name {
		s, err = openWebhook(cfg, e, c, now, concurrency)
	} else {
		s, err = openBroker(ctx, cfg, kind, u, e, c, concurrency)
	}
	if err != nil {
		return nil, err
	}
	if env.Kind == envelope.Raw {
		return s, nil
	}
	if env.Binding, err = bindingOf(s); err == nil {
		var wrapped sink.Sink
		if wrapped, err = envelope.Wrap(s, env); err == nil {
			return wrapped, nil // an io.Closer, as s is
		}
	}
	_ = s.(io.Closer).Close()
	return nil, &sink.OptionError{Option: "Envelope", Err: err}
}

// bindingOf returns the CloudEvents protocol binding of s.
func bindingOf(s sink.Sink) (envelope.Binding, error) {
	b, ok := envelope.BindingFor(s.Destination())
	if !ok {
		return 0, fmt.Errorf("no envelope binding for a %s sink", s.Destination().System)
	}
	return b, nil
}

// openBroker is OpenSink of a broker's endpoint: the kind's sink, with the
// credentials taken out of its URL, and its static headers on every
// message.
func openBroker(ctx context.Context, cfg SinkConfig, kind sink.URLKind, u *url.URL, e store.Endpoint, c Credentials, concurrency int) (sink.Sink, error) {
	s, err := kind.Open(ctx, u, sink.URLOptions{
		Timeout:     sinkTimeout(cfg.Webhook),
		Concurrency: concurrency,
		Logger:      cmp.Or(cfg.Logger, slog.Default()),
		User:        c.URLUser,
		Password:    c.URLPassword,
	})
	if err != nil {
		return nil, scrub(err, cfg.Kinds, e.URL, c.URLPassword, c.URLUser)
	}
	if len(c.Headers) > 0 {
		s = &withHeaders{Sink: s, headers: c.Headers}
	}
	if _, ok := s.(io.Closer); !ok {
		return nopCloser{s}, nil
	}
	return s, nil
}

// openWebhook is OpenSink of an http or https endpoint: signed with c's
// secrets under e's signature profile, authenticated as c says, through a
// connection pool of its own.
func openWebhook(cfg SinkConfig, e store.Endpoint, c Credentials, now time.Time, concurrency int) (sink.Sink, error) {
	profile, err := signature.ParseProfile(e.Signature)
	if err != nil {
		return nil, &sink.OptionError{Option: "Signature", Err: err}
	}
	var client *http.Client
	if cfg.Client != nil {
		client = cfg.Client(e)
	}
	if client == nil {
		client = newClient(cfg.Webhook.Timeout)
	}
	if c.TLS != nil {
		if client, err = withClientTLS(client, *c.TLS); err != nil {
			return nil, &sink.OptionError{Option: "TLS", Err: err}
		}
	}
	client, pool := withCapture(client, concurrency)
	wc := cfg.Webhook
	wc.URL, wc.Secrets, wc.MaxConcurrency, wc.Client = e.URL, c.Signing(e, now), e.Concurrency, client
	if e.Signature != "" {
		// The endpoint's own profile; otherwise the template's.
		wc.Scheme, wc.HeaderNames = profile.Scheme, profile.Names
	}
	wc.Headers = c.Headers
	wc.Auth = webhookAuth(c)
	hook, err := webhook.New(wc)
	if err != nil {
		return nil, &sink.OptionError{Err: err}
	}
	return &webhookSink{Sink: hook, pool: pool}, nil
}

// webhookAuth is the webhook.Auth of c.
func webhookAuth(c Credentials) webhook.Auth {
	var a webhook.Auth
	switch {
	case c.Basic != nil:
		a.Basic = &webhook.BasicAuth{User: c.Basic.User, Password: c.Basic.Password}
	case c.Bearer != "":
		a.Bearer = c.Bearer
	case c.OAuth2 != nil:
		a.OAuth2 = &webhook.OAuth2{TokenURL: c.OAuth2.TokenURL, ClientID: c.OAuth2.ClientID, ClientSecret: c.OAuth2.ClientSecret,
			Scopes: c.OAuth2.Scopes, Params: c.OAuth2.Params}
	}
	return a
}

// withClientTLS returns a copy of client whose transport presents t's
// client certificate and trusts t's CA for the endpoint's server
// (webhook.WithTLS, before the lane wraps the transport to capture the
// answers). Its errors never quote key material.
func withClientTLS(client *http.Client, t ClientTLS) (*http.Client, error) {
	var cert *tls.Certificate
	if t.CertPEM != "" || t.KeyPEM != "" {
		c, err := webhook.ParseClientCertificate([]byte(t.CertPEM), []byte(t.KeyPEM))
		if err != nil {
			return nil, err
		}
		cert = &c
	}
	var roots *x509.CertPool
	if t.CAPEM != "" {
		pool, err := webhook.ParseCertPool([]byte(t.CAPEM))
		if err != nil {
			return nil, err
		}
		roots = pool
	}
	return webhook.WithTLS(client, cert, roots)
}

// withHeaders sets an endpoint's static headers on every message to its
// broker: they win over the event's own headers of the same name.
type withHeaders struct {
	sink.Sink
	headers map[string]string
}

func (w *withHeaders) Publish(ctx context.Context, m *sink.Message) error {
	c := *m
	c.Headers = make(map[string]string, len(m.Headers)+len(w.headers))
	maps.Copy(c.Headers, m.Headers)
	maps.Copy(c.Headers, w.headers)
	return w.Sink.Publish(ctx, &c)
}

func (w *withHeaders) Close() error {
	if c, ok := w.Sink.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// sinkTimeout is the timeout of a broker endpoint's publishes and of its
// opening: the webhook template's, or its default.
func sinkTimeout(c webhook.Config) time.Duration {
	return cmp.Or(c.Timeout, webhook.TimeoutDefault)
}

// LookupKind returns the kind of sink of an endpoint's rawURL, and rawURL
// parsed: webhook.URL for an http or https URL, else the kind of kinds
// that has its scheme. A text that is not a URL, or a scheme that no kind
// has, is a *sink.OptionError for "URL" that lists the schemes endpoints
// may have (sink.Lookup), and never shows a password.
func LookupKind(kinds []sink.URLKind, rawURL string) (sink.URLKind, *url.URL, error) {
	return sink.Lookup(withWebhook(kinds), rawURL)
}

// withWebhook is webhook.URL followed by kinds, but those of http or https
// URLs.
func withWebhook(kinds []sink.URLKind) []sink.URLKind {
	all := []sink.URLKind{webhook.URL}
	for _, k := range kinds {
		if !slices.ContainsFunc(k.Schemes, isHTTP) {
			all = append(all, k)
		}
	}
	return all
}

func isHTTP(scheme string) bool {
	return strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https")
}

// CheckURL checks rawURL as an endpoint's URL, connecting nowhere: an
// absolute http or https URL, or a URL of one of kinds whose parameters
// its kind takes (its Open, called with a context already ended, refuses
// them before it opens anything). What it refuses is a *sink.OptionError
// whose text never holds a password; that the destination exists and can
// be reached is not checked (postbox endpoints test does).
func CheckURL(kinds []sink.URLKind, rawURL string) error {
	kind, u, err := LookupKind(kinds, rawURL)
	if err != nil {
		return err
	}
	if kind.Name == webhook.URL.Name {
		if u.Host == "" || u.Opaque != "" {
			return &sink.OptionError{Option: "URL", Err: fmt.Errorf("%q: want an absolute http:// or https:// URL", sink.Redact(rawURL))}
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return &sink.OptionError{Option: "URL", Err: fmt.Errorf("port %s: want 1 to 65535", p)}
			}
		}
		return nil
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	s, err := kind.Open(ended, u, sink.URLOptions{Timeout: time.Second, Concurrency: 1, Logger: slog.New(slog.DiscardHandler)})
	if c, ok := s.(io.Closer); ok && err == nil {
		_ = c.Close()
	}
	var refused *sink.OptionError
	if errors.As(err, &refused) {
		return &sink.OptionError{Option: refused.Option, Err: scrub(refused.Err, kinds, rawURL)}
	}
	return nil
}

// DescribeURL describes an endpoint's rawURL for logs and what others
// read: its kind and what tells its destination apart (a webhook's scheme
// and host, a broker's host and subject, exchange or topic), never a
// credential, a webhook's path nor a parameter that may hold one
// (sink.Describe).
func DescribeURL(kinds []sink.URLKind, rawURL string) string {
	desc, _ := sink.Describe(withWebhook(kinds), rawURL, sink.URLOptions{})
	return desc
}

// webhookSink is an http or https endpoint's webhook sink, and the
// connection pool of its own (nil when its client's transport is not an
// *http.Transport), whose idle connections Close closes.
type webhookSink struct {
	*webhook.Sink
	pool *http.Transport
}

func (w *webhookSink) Close() error {
	if w.pool != nil {
		w.pool.CloseIdleConnections()
	}
	return nil
}

// nopCloser is a sink that holds nothing to release.
type nopCloser struct{ sink.Sink }

func (nopCloser) Close() error { return nil }

// scrub returns err with the secrets of rawURL, one of kinds' URLs,
// replaced by xxxxx in its text (errors.Is and errors.As see err's chain as
// before): its password, or its user without a password (a token), and
// the texts its kind's Describe says must never be shown, and more (the
// credentials of the URL that its endpoint keeps sealed). A kind's errors
// are meant to hold none; this makes sure.
func scrub(err error, kinds []sink.URLKind, rawURL string, more ...string) error {
	err = redact.Scrub(err, rawURL)
	_, secrets := sink.Describe(kinds, rawURL, sink.URLOptions{})
	for _, m := range more {
		if len(m) >= 4 {
			secrets = append(secrets, m)
		}
	}
	if u, perr := url.Parse(rawURL); perr == nil && u.User != nil {
		if _, hasPassword := u.User.Password(); !hasPassword && len(u.User.Username()) >= 4 {
			secrets = append(secrets, u.User.Username())
		}
	}
	msg := err.Error()
	clean := msg
	for _, s := range secrets {
		clean = strings.ReplaceAll(clean, s, redact.Mask)
	}
	if clean == msg {
		return err
	}
	return &scrubbedError{msg: clean, err: err}
}

// scrubbedError is an error whose text had secrets removed.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// ParseEnvelope reads an endpoint's Envelope setting: an envelope's name
// (package sink/envelope: "" or "raw", "standard", "cloudevents",
// "cloudevents-binary"), optionally followed by ";source=URI", the
// CloudEvents source (envelope.SourceDefault when not given). The binding
// is left to the sink's.
func ParseEnvelope(spec string) (envelope.Config, error) {
	name, params, _ := strings.Cut(spec, ";")
	kind, err := envelope.ParseKind(strings.TrimSpace(name))
	if err != nil {
		return envelope.Config{}, err
	}
	c := envelope.Config{Kind: kind}
	if params == "" {
		return c, nil
	}
	key, value, ok := strings.Cut(params, "=")
	if !ok || strings.TrimSpace(key) != "source" || value == "" {
		return envelope.Config{}, fmt.Errorf("envelope %q: want NAME or NAME;source=URI", spec)
	}
	if kind != envelope.CloudEvents && kind != envelope.CloudEventsBinary {
		return envelope.Config{}, fmt.Errorf("envelope %q: only the CloudEvents envelopes have a source", spec)
	}
	c.Source = strings.TrimSpace(value)
	if _, err := envelope.Wrap(probeSink{}, c); err != nil {
		return envelope.Config{}, err
	}
	return c, nil
}

// probeSink is a webhook that sends nothing: what ParseEnvelope checks an
// envelope's settings on.
type probeSink struct{}

func (probeSink) Publish(context.Context, *sink.Message) error { return nil }
func (probeSink) String() string                               { return "probe" }
func (probeSink) Destination() sink.Destination {
	return sink.Destination{System: webhook.URL.Name}
}

// FormatEnvelope is the Envelope setting of c, as ParseEnvelope reads it.
func FormatEnvelope(c envelope.Config) string {
	if c.Source == "" || c.Source == envelope.SourceDefault {
		return c.Kind.String()
	}
	return c.Kind.String() + ";source=" + c.Source
}
