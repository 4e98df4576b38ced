package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
	"github.com/postbox-go/postbox/store/sqlite"
)

// ChildEnv is the environment variable that makes "postbox bench" a relay
// child of the scale and scaling scenarios: when it is set, the command
// calls ServeChild instead of running a benchmark.
const ChildEnv = "POSTBOX_BENCH_CHILD"

// childReportEvery is how often a child reports its progress.
const childReportEvery = 5 * time.Millisecond

// childConfig is the first line a child reads: the outbox to drain.
type childConfig struct {
	// DB is postgres://... or sqlite:PATH.
	DB string `json:"db"`
	// Schema is the PostgreSQL schema.
	Schema string `json:"schema,omitempty"`
	// Concurrency is the relay's Config.Concurrency; 0 is the default.
	Concurrency int `json:"concurrency,omitempty"`
	// WebhookURL, when set, makes the sink the webhook sink with its
	// defaults, posting there; otherwise the sink is a no-op.
	WebhookURL string `json:"webhook_url,omitempty"`
}

// childReport is a line a child writes.
type childReport struct {
	// Ready: the store is open and the relay made; waiting for "go".
	Ready bool `json:"ready,omitempty"`
	// Published counts the events the relay published so far.
	Published int64 `json:"published"`
	// Done is the last line, with the child's peak resident memory.
	Done       bool   `json:"done,omitempty"`
	PeakRSSKiB int64  `json:"peak_rss_kib,omitempty"`
	Error      string `json:"error,omitempty"`
}

// ServeChild runs one relay with its default settings (but for the
// concurrency it is given) and a no-op sink or the webhook sink, driven
// through in and out by the benchmark that started this process:
//
//   - it reads a JSON configuration line (database, schema, concurrency),
//     opens the store, and writes {"ready":true};
//   - it reads "go", starts the relay, and writes {"published":N} lines as
//     the count grows;
//   - at the end of in (the benchmark closes it once the backlog is
//     drained) it stops the relay and writes {"done":true} with its peak
//     resident memory (VmHWM).
//
// The relay's warnings and errors go to logs.
func ServeChild(ctx context.Context, in io.Reader, out io.Writer, logs io.Writer) error {
	lines := bufio.NewScanner(in)
	enc := json.NewEncoder(out)
	fail := func(err error) error {
		_ = enc.Encode(childReport{Error: err.Error()})
		return err
	}
	if !lines.Scan() {
		return fail(errors.New("bench child: no configuration on stdin"))
	}
	var cfg childConfig
	if err := json.Unmarshal(lines.Bytes(), &cfg); err != nil {
		return fail(fmt.Errorf("bench child: configuration: %w", err))
	}
	st, closeStore, err := openChildStore(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	defer closeStore()
	sk := &countingSink{}
	if cfg.WebhookURL != "" {
		if sk.next, err = newWebhookSink(cfg.WebhookURL, cfg.Concurrency); err != nil {
			return fail(err)
		}
	}
	r, err := relay.New(relay.Config{Store: st, Sink: sk, Logger: relayLogger(logs), Concurrency: cfg.Concurrency})
	if err != nil {
		return fail(err)
	}
	if err := enc.Encode(childReport{Ready: true}); err != nil {
		return err
	}
	if !lines.Scan() || lines.Text() != "go" {
		return nil // the benchmark went away
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- r.Run(runCtx) }()
	go func() {
		for lines.Scan() {
		}
		stop()
	}()
	tick := time.NewTicker(childReportEvery)
	defer tick.Stop()
	last := int64(-1)
	for runCtx.Err() == nil {
		select {
		case <-runCtx.Done():
		case <-tick.C:
			if n := sk.n.Load(); n != last {
				last = n
				if err := enc.Encode(childReport{Published: n}); err != nil {
					stop()
				}
			}
		}
	}
	err = <-errc
	if encErr := enc.Encode(childReport{Published: sk.n.Load(), Done: true, PeakRSSKiB: peakRSSKiB()}); err == nil {
		err = encErr
	}
	return err
}

// openChildStore opens the outbox a child drains, as `postbox relay` would.
func openChildStore(ctx context.Context, cfg childConfig) (store.Outbox, func(), error) {
	if path, ok := strings.CutPrefix(cfg.DB, "sqlite:"); ok {
		s, err := sqlite.Open(ctx, strings.TrimPrefix(path, "//"), sqlite.Config{})
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DB)
	if err != nil {
		return nil, nil, fmt.Errorf("bench child: database URL: %w", err)
	}
	pcfg.ConnConfig.RuntimeParams["application_name"] = "postbox-bench-child"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, nil, err
	}
	s, err := postgres.New(pool, postgres.Config{Schema: cfg.Schema})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return s, pool.Close, nil
}
