package amqp

import (
	"context"
	"net/url"

	"github.com/postbox-go/postbox/sink"
)

// URL is the sink.URLKind of RabbitMQ: an amqp:// or amqps:// URL as
// ParseURL reads it,
// amqp://USER:PASS@HOST:PORT/VHOST?exchange=NAME&routing_key=TEMPLATE. Its
// Open takes the options' User and Password for a URL without
// credentials, and their Timeout and Logger; it connects and checks that
// the exchange exists. Its sinks are io.Closers.
var URL = sink.URLKind{
	Name:    "amqp",
	Schemes: []string{"amqp", "amqps"},
	// A publish waits a few milliseconds for its confirm while hundreds
	// more go out on the sink's channels.
	Concurrency:  1024,
	PublishBatch: 1,
	Open:         openURL,
}

// openURL is URL's Open.
func openURL(ctx context.Context, u *url.URL, o sink.URLOptions) (sink.Sink, error) {
	cfg, err := ParseURL(sink.WithCredentials(u, o.User, o.Password).String())
	if err != nil {
		return nil, &sink.OptionError{Option: "URL", Err: err}
	}
	cfg.Logger, cfg.Timeout = o.Logger, o.Timeout
	s, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}
