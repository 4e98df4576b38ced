package main

import (
	"context"
	"errors"
	"net/url"
)

// openNATSSink opens the nats sink of u. Not built yet: the broker sinks
// land with their packages.
func openNATSSink(_ context.Context, _ *url.URL, _ sinkOptions) (*openedSink, error) {
	return nil, errors.New("--sink nats://...: not supported yet")
}
