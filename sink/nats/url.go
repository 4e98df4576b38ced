package nats

import (
	"context"
	"net/url"

	"github.com/postbox-go/postbox/sink"
)

// URL is the sink.URLKind of NATS JetStream: a nats:// URL as ParseURL
// reads it. Its Open takes the options' User and Password for a URL
// without credentials, and Timeout and a MaxPending that makes room for
// Concurrency publishes, each unless the URL sets its own (timeout=,
// max_pending=); it connects and checks that a stream captures the
// subjects. Its sinks are sink.BatchSinks and io.Closers.
var URL = sink.URLKind{
	Name:    "nats",
	Schemes: []string{"nats"},
	// A publish waits a few milliseconds for its PubAck while the others
	// go out on the same connection: as many in flight as the sink's
	// default window.
	Concurrency: MaxPendingDefault,
	// Batches go out at once and their PubAcks are collected together:
	// about a third less CPU per event than a goroutine waiting for each.
	PublishBatch: 256,
	Open:         openURL,
}

// openURL is URL's Open.
func openURL(ctx context.Context, u *url.URL, o sink.URLOptions) (sink.Sink, error) {
	cfg, err := ParseURL(sink.WithCredentials(u, o.User, o.Password).String())
	if err != nil {
		return nil, &sink.OptionError{Option: "URL", Err: err}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = o.Timeout
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = max(MaxPendingDefault, o.Concurrency)
	}
	cfg.Logger = o.Logger
	s, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}
