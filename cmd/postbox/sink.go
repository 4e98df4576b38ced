package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/amqp"
	"github.com/postbox-go/postbox/sink/kafka"
	"github.com/postbox-go/postbox/sink/nats"
	"github.com/postbox-go/postbox/sink/webhook"
)

// sinkKinds are the sinks --sink reaches, each by its URL's schemes (see
// sink.URLKind): a new sink is its package and one entry here.
var sinkKinds = []sink.URLKind{webhook.URL, nats.URL, amqp.URL, kafka.URL}

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
	// httpClient is the webhook's client when set (sink.URLOptions).
	httpClient *http.Client
}

// concurrencyDefault is the relay's --concurrency when it is not given:
// the sink kind's, relay.ConcurrencyDefault for endpoints (whose
// dispatcher has its own per endpoint) and a --sink that names no kind.
func concurrencyDefault(rawURL string) int {
	if k, _, err := sink.Lookup(sinkKinds, rawURL); err == nil {
		return k.Concurrency
	}
	return relay.ConcurrencyDefault
}

// publishBatchDefault is the relay's --publish-batch when it is not given:
// the sink kind's, 1 for a --sink that names no kind.
func publishBatchDefault(rawURL string) int {
	if k, _, err := sink.Lookup(sinkKinds, rawURL); err == nil {
		return k.PublishBatch
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
	batching := batchingKinds()
	verb := "publishes"
	if len(batching) > 1 {
		verb = "publish"
	}
	return fmt.Errorf("%w: --publish-batch %d: this sink publishes one event at a time (only %s %s batches)", errUsage, n, joinAnd(batching), verb)
}

// batchingKinds are the names of the sink kinds that publish batches by
// default (sink.URLKind.PublishBatch above 1).
func batchingKinds() []string {
	var batching []string
	for _, k := range sinkKinds {
		if k.PublishBatch > 1 {
			batching = append(batching, k.Name)
		}
	}
	return batching
}

// joinAnd joins names as a sentence does: "a", "a and b", "a, b and c".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// openedSink is a sink and what releases its connections once the relay
// has stopped.
type openedSink struct {
	sink.Sink
	close func() error
}

// closeLogged closes the sink, logging its error.
func (s *openedSink) closeLogged(logger *slog.Logger) {
	if err := s.close(); err != nil {
		logger.Warn("closing the sink", "sink", s.String(), "error", err)
	}
}

// openSink opens the sink of the kind that rawURL names by its scheme (see
// sinkKinds), with the credentials of $POSTBOX_SINK_USER and
// $POSTBOX_SINK_PASSWORD for a broker URL that has none. What the kind
// refuses of the URL or the options is a usage error naming the flag; a
// broker sink's error at start (it connects at once and checks that its
// destination exists) points to "postbox sink setup" when its stream,
// exchange or topic is missing (withSetupHint).
func openSink(ctx context.Context, rawURL string, opts sinkOptions) (*openedSink, error) {
	kind, u, err := sink.Lookup(sinkKinds, rawURL)
	if err != nil {
		return nil, sinkUsageError(err)
	}
	o := sink.URLOptions{
		Timeout: opts.timeout, Concurrency: opts.concurrency, Logger: opts.logger,
		User: os.Getenv(envSinkUser), Password: os.Getenv(envSinkPassword),
		Secrets:    splitSecrets(opts.webhookSecrets),
		Signature:  opts.webhookScheme,
		HTTPClient: opts.httpClient,
	}
	s, err := kind.Open(ctx, u, o)
	if err != nil {
		if errors.As(err, new(*sink.OptionError)) {
			return nil, sinkUsageError(err)
		}
		return nil, withSetupHint(ctx, kind, sink.WithCredentials(u, o.User, o.Password), err)
	}
	closeSink := func() error { return nil }
	if c, ok := s.(io.Closer); ok {
		closeSink = c.Close
	}
	return &openedSink{Sink: s, close: closeSink}, nil
}

// sinkOptionFlags names the flag that sets each option a sink kind may
// refuse (sink.OptionError.Option).
var sinkOptionFlags = map[string]string{"URL": "sink", "Secrets": "webhook-secret", "Signature": "signature"}

// sinkUsageError is err, a sink.OptionError, as a usage error that names
// the flag at fault.
func sinkUsageError(err error) error {
	var e *sink.OptionError
	if !errors.As(err, &e) {
		return err
	}
	name, ok := sinkOptionFlags[e.Option]
	switch {
	case !ok:
		return fmt.Errorf("%w: %v", errUsage, e)
	case errors.Is(e.Err, sink.ErrRequired):
		return required(name, "")
	}
	return fmt.Errorf("%w: --%s: %v", errUsage, name, e.Err)
}

// withEnvCredentials is u with the credentials of $POSTBOX_SINK_USER and
// $POSTBOX_SINK_PASSWORD when it has none (sink.WithCredentials).
func withEnvCredentials(u *url.URL) *url.URL {
	return sink.WithCredentials(u, os.Getenv(envSinkUser), os.Getenv(envSinkPassword))
}

// splitSecrets is the keys of --webhook-secret, separated by spaces or
// commas.
func splitSecrets(flagValue string) []string {
	return strings.FieldsFunc(flagValue, func(r rune) bool { return r == ' ' || r == ',' })
}
