package main

import (
	"context"
	"errors"
	"net/url"
)

// openAMQPSink opens the amqp sink of u. Not built yet: the broker sinks
// land with their packages.
func openAMQPSink(_ context.Context, _ *url.URL, _ sinkOptions) (*openedSink, error) {
	return nil, errors.New("--sink amqp://...: not supported yet")
}
