package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/postbox-go/postbox/sink/kafka"
)

// openKafkaSink opens the Kafka sink of u (kafka://BROKER[,BROKER]?topic=...;
// see kafka.ParseURL). It checks at once that the brokers answer and that a
// fixed topic exists.
func openKafkaSink(ctx context.Context, u *url.URL, opts sinkOptions) (*openedSink, error) {
	cfg, err := kafka.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("%w: --sink: %v", errUsage, err)
	}
	cfg.Timeout, cfg.Logger = opts.timeout, opts.logger
	s, err := kafka.New(ctx, cfg)
	if err != nil {
		return nil, withSetupHint(ctx, u, err)
	}
	return &openedSink{Sink: s, close: func() error { s.Close(); return nil }}, nil
}
