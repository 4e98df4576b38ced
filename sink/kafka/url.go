package kafka

import (
	"context"
	"net/url"

	"github.com/postbox-go/postbox/sink"
)

// URL is the sink.URLKind of Kafka: a kafka:// URL as ParseURL reads it,
// kafka://BROKER[,BROKER]?topic=TEMPLATE. Its Open takes the options'
// User and Password for a URL without credentials (the SASL mechanism's),
// and their Timeout and Logger; it checks that the brokers answer and that
// a fixed topic exists. Its sinks are io.Closers.
var URL = sink.URLKind{
	Name:    "kafka",
	Schemes: []string{"kafka"},
	// A publish waits a few milliseconds for its acknowledgement while
	// the producer batches many more to the same brokers.
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
	cfg.Timeout, cfg.Logger = o.Timeout, o.Logger
	s, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return closer{s}, nil
}

// closer is the Sink as URL opens it: an io.Closer (the Sink's own Close
// returns nothing).
type closer struct{ *Sink }

func (c closer) Close() error {
	c.Sink.Close()
	return nil
}
