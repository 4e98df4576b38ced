package main

import (
	"context"
	"errors"
	"net/url"
)

// openKafkaSink opens the kafka sink of u. Not built yet: the broker sinks
// land with their packages.
func openKafkaSink(_ context.Context, _ *url.URL, _ sinkOptions) (*openedSink, error) {
	return nil, errors.New("--sink kafka://...: not supported yet")
}
