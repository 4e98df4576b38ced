package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/postbox-go/postbox/sink/nats"
)

// openNATSSink opens the NATS JetStream sink of u: it connects and checks
// that a stream captures the subjects. The URL's own timeout and
// max_pending win over --timeout and the window --concurrency needs.
func openNATSSink(ctx context.Context, u *url.URL, opts sinkOptions) (*openedSink, error) {
	cfg, err := nats.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("%w: --sink: %v", errUsage, err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = opts.timeout
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = max(nats.MaxPendingDefault, opts.concurrency)
	}
	cfg.Logger = opts.logger
	s, err := nats.New(ctx, cfg)
	if err != nil {
		return nil, withSetupHint(ctx, u, err)
	}
	return &openedSink{Sink: s, close: s.Close}, nil
}
