package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/postbox-go/postbox/internal/dburl"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
)

// Environment variables that give a broker sink's credentials, so that
// they need not be written into --sink (and a process listing).
const (
	envSinkUser     = "POSTBOX_SINK_USER"
	envSinkPassword = "POSTBOX_SINK_PASSWORD"
)

// sinkOptions are the relay's settings every sink takes.
type sinkOptions struct {
	// timeout bounds one publish; concurrency is the most publishes in
	// flight at once.
	timeout     time.Duration
	concurrency int
	// webhookSecrets and webhookScheme sign webhooks; brokers ignore them.
	webhookSecrets string
	webhookScheme  string
	logger         *slog.Logger
}

// brokerConcurrencyDefault is the relay's --concurrency for a broker sink:
// a publish waits for its acknowledgement (a few milliseconds) while
// hundreds more go out on the same connection, so 64 at once (the webhook
// default, one HTTP request each) would leave the broker idle.
const brokerConcurrencyDefault = 1024

// concurrencyDefault is the relay's --concurrency when it is not given:
// brokerConcurrencyDefault for a broker sink, relay.ConcurrencyDefault for
// webhooks (and endpoints, whose dispatcher has its own per endpoint).
func concurrencyDefault(rawURL string) int {
	switch sinkScheme(rawURL) {
	case "nats", "amqp", "amqps", "kafka":
		return brokerConcurrencyDefault
	}
	return relay.ConcurrencyDefault
}

// sinkScheme is the lower-case scheme of a --sink URL, "" when it is none.
func sinkScheme(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Scheme)
}

// natsPublishBatchDefault is the relay's --publish-batch for a NATS sink:
// its publishes go out in batches and their PubAcks are collected together
// (about a third less CPU per event than a goroutine waiting for each).
const natsPublishBatchDefault = 256

// publishBatchDefault is the relay's --publish-batch when it is not given:
// natsPublishBatchDefault for a NATS sink, the only one that publishes
// batches (sink.BatchSink), else 1.
func publishBatchDefault(rawURL string) int {
	if sinkScheme(rawURL) == "nats" {
		return natsPublishBatchDefault
	}
	return 1
}

// checkPublishBatch refuses --publish-batch n above 1 for an opened sink
// that publishes one event at a time (nil: the endpoints' fan-out, which
// takes no batches either).
func checkPublishBatch(s *openedSink, n int) error {
	if n <= 1 {
		return nil
	}
	if s != nil {
		if _, ok := s.Sink.(sink.BatchSink); ok {
			return nil
		}
	}
	return fmt.Errorf("%w: --publish-batch %d: this sink publishes one event at a time (only nats publishes batches)", errUsage, n)
}

// openedSink is a sink and what releases its connections once the relay
// has stopped.
type openedSink struct {
	sink.Sink
	close func() error
}

// openSink opens the sink that rawURL names, by its scheme: http or https
// for a webhook endpoint, nats, amqp or amqps, kafka for a broker. A broker
// sink connects at once and checks that its destination exists, so that a
// missing stream, exchange or topic stops the relay at start with an error
// that names it and points to "postbox sink setup" (withSetupHint).
func openSink(ctx context.Context, rawURL string, opts sinkOptions) (*openedSink, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("%w: --sink: %q is not a URL (want https://..., nats://..., amqp://... or kafka://...)", errUsage, redactSinkURL(rawURL))
	}
	withCredentials(u, os.Getenv)
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return openWebhookSink(u.String(), opts)
	case "nats":
		return openNATSSink(ctx, u, opts)
	case "amqp", "amqps":
		return openAMQPSink(ctx, u, opts)
	case "kafka":
		return openKafkaSink(ctx, u, opts)
	}
	return nil, fmt.Errorf("%w: --sink: unknown scheme %q (want https, http, nats, amqp, amqps or kafka)", errUsage, u.Scheme)
}

func openWebhookSink(rawURL string, opts sinkOptions) (*openedSink, error) {
	if err := required("webhook-secret", opts.webhookSecrets); err != nil {
		return nil, err
	}
	sch, err := signature.ParseScheme(opts.webhookScheme)
	if err != nil {
		return nil, fmt.Errorf("%w: --signature: %v", errUsage, err)
	}
	s, err := webhook.New(webhook.Config{
		URL:            rawURL,
		Secrets:        strings.FieldsFunc(opts.webhookSecrets, func(r rune) bool { return r == ' ' || r == ',' }),
		Scheme:         sch,
		Timeout:        opts.timeout,
		MaxConcurrency: opts.concurrency,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return &openedSink{Sink: s, close: func() error { return nil }}, nil
}

// withCredentials fills the user information of a broker URL that has none
// from $POSTBOX_SINK_USER and $POSTBOX_SINK_PASSWORD.
func withCredentials(u *url.URL, getenv func(string) string) {
	if u.User != nil || u.Scheme == "http" || u.Scheme == "https" {
		return
	}
	user, password := getenv(envSinkUser), getenv(envSinkPassword)
	switch {
	case user != "" && password != "":
		u.User = url.UserPassword(user, password)
	case user != "":
		u.User = url.User(user)
	}
}

// redactSinkURL hides the secrets of a sink URL that may not parse: its
// passwords (dburl.Redact), and a user part without a password, which a
// NATS URL reads as a token.
func redactSinkURL(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		if _, has := u.User.Password(); u.User != nil && !has {
			u.User = url.User("xxxxx")
			rawURL = u.String()
		}
		return dburl.Redact(rawURL)
	}
	if at := strings.LastIndexByte(rawURL, '@'); at >= 0 {
		return "…@" + rawURL[at+1:]
	}
	return rawURL
}
