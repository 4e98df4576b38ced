package sink

import (
	"context"
	"net/url"
	"time"
)

// SetupFunc creates, on the destination of u (a URL of its kind, with the
// credentials to use: WithCredentials), what the kind's sinks need and do
// not create themselves (a NATS stream, a RabbitMQ exchange, Kafka topics),
// with the settings of the flags the kind's URLKind.Setup registered. It
// changes nothing that exists, and says what it did with each resource; a
// resource that exists with other settings is an error. It refuses u, or
// its flags' values, with an *OptionError before anything is reached.
type SetupFunc func(ctx context.Context, u *url.URL, o SetupOptions) ([]SetupStep, error)

// SetupOptions are the settings of every kind's setup.
type SetupOptions struct {
	// Timeout bounds connecting and each call to the destination (the
	// kind's default when zero).
	Timeout time.Duration
	// DryRun changes nothing: the steps say what would be created.
	DryRun bool
}

// SetupStep is what a setup did, or would do, with one resource.
type SetupStep struct {
	// Resource names it: "stream ORDERS", `exchange "orders" in vhost "/"`.
	Resource string
	// Settings describes the settings that matter to the relay.
	Settings string
	// Created is true for a resource created (or, in a dry run, one that
	// would be), false for one that existed and was left unchanged.
	Created bool
}
