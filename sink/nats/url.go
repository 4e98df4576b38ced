package nats

import (
	"context"
	"flag"
	"net/url"

	"github.com/postbox-go/postbox/sink"
)

// URL is the sink.URLKind of NATS JetStream: a nats:// URL as ParseURL
// reads it. Its Open takes the options' User and Password for a URL
// without credentials, and Timeout and a MaxPending that makes room for
// Concurrency publishes, each unless the URL sets its own (timeout=,
// max_pending=); it connects and checks that a stream captures the
// subjects. Its sinks are sink.BatchSinks and io.Closers.
var URL = sink.URLKind{
	Name:    "nats",
	Schemes: []string{"nats"},
	// A publish waits a few milliseconds for its PubAck while the others
	// go out on the same connection: as many in flight as the sink's
	// default window.
	Concurrency: MaxPendingDefault,
	// Batches go out at once and their PubAcks are collected together:
	// about a third less CPU per event than a goroutine waiting for each.
	PublishBatch: 256,
	Open:         openURL,
	Describe: func(u *url.URL) (string, []string) {
		desc, secrets := sink.DescribeQuery(u, "nats "+u.Scheme+"://"+u.Host, "subject")
		if _, hasPassword := u.User.Password(); u.User != nil && !hasPassword {
			secrets = append(secrets, u.User.Username()) // a user without a password is a token (ParseURL)
		}
		return desc, secrets
	},
	Setup: setupURL,
}

// setupURL is URL's Setup: the stream that captures the sink's subjects
// (Setup), its duplicate window and replicas set by the flags.
func setupURL(fs *flag.FlagSet) sink.SetupFunc {
	var s SetupConfig
	fs.DurationVar(&s.DuplicateWindow, "duplicate-window", DuplicateWindowDefault, "nats: the stream's duplicate window, in which a retried publish (same Nats-Msg-Id) is stored once; the default covers a default relay's longest wait before a retry (--backoff-max 10m, or --lease 30s) plus a --timeout")
	fs.IntVar(&s.Replicas, "replicas", 1, "nats: the stream's replicas (up to the cluster's servers)")
	return func(ctx context.Context, u *url.URL, o sink.SetupOptions) ([]sink.SetupStep, error) {
		cfg, err := ParseURL(u.String())
		if err != nil {
			return nil, &sink.OptionError{Option: "URL", Err: err}
		}
		if o.Timeout != 0 {
			cfg.Timeout = o.Timeout
		}
		sc := s
		sc.DryRun = o.DryRun
		st, err := Setup(ctx, cfg, sc)
		if err != nil {
			return nil, err
		}
		return []sink.SetupStep{{Resource: st.Resource, Settings: st.Settings, Created: st.Created}}, nil
	}
}

// openURL is URL's Open.
func openURL(ctx context.Context, u *url.URL, o sink.URLOptions) (sink.Sink, error) {
	cfg, err := ParseURL(sink.WithCredentials(u, o.User, o.Password).String())
	if err != nil {
		return nil, &sink.OptionError{Option: "URL", Err: err}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = o.Timeout
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = max(MaxPendingDefault, o.Concurrency)
	}
	cfg.Logger = o.Logger
	s, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}
