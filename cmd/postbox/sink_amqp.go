package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/postbox-go/postbox/sink/amqp"
)

// openAMQPSink opens the RabbitMQ sink of u,
// amqp://USER:PASS@HOST:PORT/VHOST?exchange=NAME&routing_key=TEMPLATE: it
// connects and checks that the exchange exists before the relay starts
// (which logs the sink's String, without credentials); a missing exchange
// is reported with the way to create it (withSetupHint).
func openAMQPSink(ctx context.Context, u *url.URL, opts sinkOptions) (*openedSink, error) {
	cfg, err := amqp.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("%w: --sink: %v", errUsage, err)
	}
	cfg.Logger, cfg.Timeout = opts.logger, opts.timeout
	s, err := amqp.New(ctx, cfg)
	if err != nil {
		return nil, withSetupHint(ctx, u, fmt.Errorf("--sink: %w", err))
	}
	return &openedSink{Sink: s, close: s.Close}, nil
}
