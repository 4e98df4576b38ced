package endpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/postbox-go/postbox/internal/redact"
	"github.com/postbox-go/postbox/sink"
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
	concurrency := max(e.Concurrency, 1)
	if kind.Name == webhook.URL.Name {
		return openWebhook(cfg, e, now, concurrency)
	}
	s, err := kind.Open(ctx, u, sink.URLOptions{
		Timeout:     sinkTimeout(cfg.Webhook),
		Concurrency: concurrency,
		Logger:      cmp.Or(cfg.Logger, slog.Default()),
	})
	if err != nil {
		return nil, scrub(err, cfg.Kinds, e.URL)
	}
	if _, ok := s.(io.Closer); !ok {
		return nopCloser{s}, nil
	}
	return s, nil
}

// openWebhook is OpenSink of an http or https endpoint.
func openWebhook(cfg SinkConfig, e store.Endpoint, now time.Time, concurrency int) (sink.Sink, error) {
	var client *http.Client
	if cfg.Client != nil {
		client = cfg.Client(e)
	}
	if client == nil {
		client = newClient(cfg.Webhook.Timeout)
	}
	client, pool := withCapture(client, concurrency)
	wc := cfg.Webhook
	wc.URL, wc.Secrets, wc.MaxConcurrency, wc.Client = e.URL, e.Secrets(now), e.Concurrency, client
	hook, err := webhook.New(wc)
	if err != nil {
		return nil, &sink.OptionError{Err: err}
	}
	return &webhookSink{Sink: hook, pool: pool}, nil
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
// the texts its kind's Describe says must never be shown. A kind's errors
// are meant to hold none; this makes sure.
func scrub(err error, kinds []sink.URLKind, rawURL string) error {
	err = redact.Scrub(err, rawURL)
	_, secrets := sink.Describe(kinds, rawURL, sink.URLOptions{})
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
