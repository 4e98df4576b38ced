package amqp

import (
	"context"
	"flag"
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
	Describe: func(u *url.URL) (string, []string) {
		return sink.DescribeQuery(u, "amqp "+u.Scheme+"://"+u.Host+u.EscapedPath(), "exchange", "routing_key")
	},
	Setup: setupURL,
}

// setupURL is URL's Setup: the sink's exchange (Setup), and the queue
// bound to it that the flags ask for.
func setupURL(fs *flag.FlagSet) sink.SetupFunc {
	var s SetupConfig
	fs.StringVar(&s.Queue, "queue", "", "amqp: also declare this durable quorum queue and bind it to the exchange")
	fs.StringVar(&s.BindingKey, "binding-key", BindingKeyDefault, "amqp: the binding key of --queue (# is every routing key)")
	return func(ctx context.Context, u *url.URL, o sink.SetupOptions) ([]sink.SetupStep, error) {
		cfg, err := ParseURL(u.String())
		if err != nil {
			return nil, &sink.OptionError{Option: "URL", Err: err}
		}
		if o.Timeout != 0 {
			cfg.DialTimeout = o.Timeout
		}
		sc := s
		sc.DryRun = o.DryRun
		steps, err := Setup(ctx, cfg, sc)
		out := make([]sink.SetupStep, len(steps))
		for i, st := range steps {
			out[i] = sink.SetupStep{Resource: st.Resource, Settings: st.Settings, Created: st.Created}
		}
		return out, err
	}
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
