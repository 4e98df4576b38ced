package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/observe"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/relay/presence"
	"github.com/postbox-go/postbox/service"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// relayFlags are the flags of postbox relay.
type relayFlags struct {
	db        dbFlags
	endpoints endpointsFlags
	sources   sourcesFlags
	share     shareFlags

	sinkURL, webhookURL, secrets, scheme                              string
	timeout, lease, backoffMin, backoffMax, poll, retention, shutdown time.Duration
	probe, metricsEvery, dedupWindow, heartbeat, walBehindPoll        time.Duration
	maxAttempts, batch, concurrency, publishBatch, claimBytes         int
	ordered, noListen, wal, walDropSlot                               bool
	metricsAddr, logLevel, logFormat, walSlot                         string
	archiveURL                                                        string
	// webhookClient, when set, is the client of a webhook sink (one for
	// every source of relay --sources); nil: the sink's own.
	webhookClient *http.Client
}

func (f *relayFlags) register(fs *flag.FlagSet) {
	f.db.register(fs)
	fs.StringVar(&f.sinkURL, "sink", "", "where events go, chosen by scheme: https://... (a webhook endpoint), nats://HOST:PORT?subject=TEMPLATE, amqp://USER:PASS@HOST:PORT/VHOST?exchange=NAME&routing_key=TEMPLATE, kafka://BROKER,...?topic=TEMPLATE; a broker's credentials may come from $POSTBOX_SINK_USER and $POSTBOX_SINK_PASSWORD")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "endpoint that receives the events (http or https); the same as --sink with a webhook URL")
	fs.StringVar(&f.secrets, "webhook-secret", "", "signing key: whsec_<base64> (HMAC, v1) or raw, or whsk_<base64> (ed25519, v1a; see postbox keys generate); several separated by spaces or commas during a rotation")
	fs.StringVar(&f.scheme, "signature", "standard", "signature scheme: standard (Standard Webhooks) or x-signature")
	fs.DurationVar(&f.timeout, "timeout", webhook.TimeoutDefault, "timeout of one publish: a webhook request, a broker's acknowledgement")
	fs.DurationVar(&f.lease, "lease", relay.LeaseDefault, "how long a claimed event stays reserved to this relay")
	fs.DurationVar(&f.backoffMin, "backoff-min", relay.BackoffMinDefault, "shortest delay before a retry")
	fs.DurationVar(&f.backoffMax, "backoff-max", relay.BackoffMaxDefault, "longest delay before a retry")
	fs.IntVar(&f.maxAttempts, "max-attempts", relay.MaxAttemptsDefault, "attempts before an event is moved to failed")
	fs.IntVar(&f.batch, "batch", relay.BatchSizeDefault, "most events claimed at once")
	fs.IntVar(&f.concurrency, "concurrency", 0, fmt.Sprintf("most deliveries in progress at once (0: the default, %d for webhooks and the fan-out of --endpoints, %d for a broker, whose publishes are pipelined on one connection); with --endpoints, the fan-out's: each endpoint's lane has the endpoint's own concurrency (postbox endpoints add|update --concurrency)", relay.ConcurrencyDefault, concurrencyDefault("nats://")))
	fs.IntVar(&f.publishBatch, "publish-batch", 0, fmt.Sprintf("publish up to this many events at once, through a sink that publishes batches (0: the default, %d for nats, %d for kafka, %d for the fan-out of --endpoints, which writes their deliveries in one statement; 1 elsewhere: one event per publish)", publishBatchDefault("nats://"), publishBatchDefault("kafka://"), fanOutPublishBatchDefault))
	fs.BoolVar(&f.ordered, "ordered", false, "deliver the events of one aggregate one at a time, in order; with --endpoints, to each endpoint, one endpoint's failures holding back only its own lane (PostgreSQL: run \"postbox migrate --ordered\" once first)")
	fs.DurationVar(&f.poll, "poll", relay.PollIntervalDefault, "fallback poll interval; with --endpoints, also how often one query looks for the lanes' due deliveries (retries, deliveries written by other relays)")
	fs.BoolVar(&f.noListen, "no-listen", false, "do not use LISTEN/NOTIFY (for connection poolers); poll only")
	fs.DurationVar(&f.retention, "retention", 0, "how long delivered events are kept, marked done (0: deleted at once; negative: forever); with --endpoints, the outbox's events once fanned out, and when not 0 the endpoints' delivered deliveries are kept too, until --attempts-retention")
	fs.StringVar(&f.archiveURL, "archive", "", "before --retention removes delivered events, write them to this archive, where postbox replay --archive finds them: file:///DIR, s3://BUCKET?region=R[&endpoint=URL][&prefix=P] (credentials from the AWS environment); needs a positive --retention")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", relay.ShutdownTimeoutDefault, "how long deliveries in flight may finish on SIGINT/SIGTERM")
	fs.DurationVar(&f.probe, "probe-interval", relay.ProbeIntervalDefault, "while the sink is unreachable (connections refused, every request timing out, a broker connection down), the longest wait between two probes: one event sent alone; such failures count no attempt")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve GET /metrics (Prometheus) and GET /healthz on HOST:PORT, such as 127.0.0.1:9090 (off when empty)")
	fs.DurationVar(&f.metricsEvery, "metrics-sample", observe.SampleEveryDefault, "how often the outbox's counts are sampled for --metrics-addr (one query each time)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&f.wal, "wal", false, "WAL mode (PostgreSQL, wal_level = logical, a user with REPLICATION): deliver the outbox's inserts as they commit, streamed from a logical replication slot; poll for retries (see docs/wal.md; \"postbox migrate --wal\" lets producers skip the notify trigger)")
	fs.DurationVar(&f.walBehindPoll, "wal-behind-poll", relay.StreamBehindPollDefault, "with --wal: how often to look for new events in the table while the stream is behind (it still decodes older writes, a drain's or a bulk load's); such events go in no commit order within an aggregate; 0: never, new events then wait for the stream or --poll")
	fs.StringVar(&f.walSlot, "wal-slot", "", "the replication slot of --wal, also the publication's name (default postbox_<database>_<schema>)")
	fs.BoolVar(&f.walDropSlot, "wal-drop-slot", false, "drop the replication slot and the publication of --wal, and exit (stop the relays streaming it first)")
	fs.DurationVar(&f.dedupWindow, "dedup-window", relay.DedupWindowDefault, "how long a delivered event's dedup_key stays taken, whatever --retention (0: free again once the event's row is deleted)")
	fs.IntVar(&f.claimBytes, "claim-bytes", relay.ClaimBytesDefault, "the payload bytes one claim takes and the relay holds at once, at most (an event larger than that is still taken, alone); with --sources, each source's (8 MiB when not given)")
	fs.DurationVar(&f.heartbeat, "heartbeat", presence.EveryDefault, fmt.Sprintf("how often the relay renews its row in the presence table, which postbox status reads (its mode, whether it finds the sink down); a row %d beats old is shown stale", store.PresenceStaleBeats))
	f.endpoints.register(fs)
	f.sources.register(fs)
	f.share.register(fs)
}

func setupRelay(fs *flag.FlagSet) func(context.Context) error {
	f := &relayFlags{}
	f.register(fs)
	return func(ctx context.Context) error {
		if err := f.check(fs); err != nil {
			return err
		}
		switch {
		case f.walDropSlot:
			return dropWALSlot(ctx, &f.db, f.walSlot)
		case f.sources.on():
			return runSources(ctx, f)
		}
		return runRelay(ctx, f)
	}
}

// check refuses the flags that do not go together, and takes --webhook-url
// for --sink.
func (f *relayFlags) check(fs *flag.FlagSet) error {
	if err := checkRelayFlags(fs); err != nil {
		return err
	}
	if f.sources.on() {
		return f.checkSources(fs)
	}
	if err := f.sources.checkNotSources(fs, shareOnlyFlags); err != nil {
		return err
	}
	if f.walDropSlot {
		return refuseEmpty(fs, "wal-slot")
	}
	if f.sinkURL != "" && f.webhookURL != "" {
		return fmt.Errorf("%w: give --sink or --webhook-url, not both", errUsage)
	}
	f.sinkURL = cmp.Or(f.sinkURL, f.webhookURL)
	if f.endpoints.on && f.sinkURL != "" {
		return fmt.Errorf("%w: give --endpoints or --sink (--webhook-url), not both", errUsage)
	}
	if err := f.endpoints.checkModeFlags(fs); err != nil {
		return err
	}
	if f.archiveURL != "" && f.retention <= 0 {
		return fmt.Errorf("%w: --archive needs a positive --retention, how long delivered events stay in the outbox before they are archived and deleted (--retention %v: they are deleted when delivered, or never)", errUsage, f.retention)
	}
	if !f.endpoints.on {
		return required("sink", f.sinkURL)
	}
	return f.endpoints.loadKey()
}

// checkSources is check with --sources or --sources-query: --sink (or
// --webhook-url) is the default of the sources that name none.
func (f *relayFlags) checkSources(fs *flag.FlagSet) error {
	if err := f.sources.check(fs, &f.db); err != nil {
		return err
	}
	if err := f.checkShare(fs); err != nil {
		return err
	}
	if f.sinkURL != "" && f.webhookURL != "" {
		return fmt.Errorf("%w: give --sink or --webhook-url, not both", errUsage)
	}
	f.sinkURL = cmp.Or(f.sinkURL, f.webhookURL)
	return nil
}

// runRelay is postbox relay: it opens the sink (or reads the endpoints),
// the database, tracing and the metrics listener, and runs what they make
// with package service until ctx ends.
func runRelay(ctx context.Context, f *relayFlags) error {
	logger, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	setRelayGC(os.Getenv, logger)
	cfg := service.RelayConfig{Relay: f.relayConfig(logger), MetricsSample: f.metricsEvery}
	if !f.endpoints.on {
		sk, err := f.openSink(ctx, cfg.Relay)
		if err != nil {
			return err
		}
		defer sk.closeLogged(logger)
		cfg.Sink = sk.Sink
	}
	s, err := f.db.open(ctx, "relay", false)
	if err != nil && ctx.Err() != nil {
		// Stopped (SIGTERM, SIGINT) while it connected: a clean stop, as
		// once it runs.
		logger.Info("relay stopped before it reached the database")
		return nil
	}
	if err != nil {
		return err
	}
	defer s.Close()
	if f.archiveURL != "" {
		a, err := archive.Open(ctx, f.archiveURL)
		if err != nil {
			return fmt.Errorf("--archive: %w", err)
		}
		defer closeArchive(a, logger) // after Run: retention's last step is done
		cfg.Archive = a
	}
	walStream, err := f.useDB(&cfg, s)
	if err != nil {
		return err
	}
	tracer, stopTracing, err := setupTracing(ctx, os.Getenv, logger)
	if err != nil {
		return err
	}
	defer stopTracing() // after Run: flushes the last spans
	cfg.Relay.Tracer = tracer
	var metrics *metricsServer
	if f.metricsAddr != "" {
		if metrics, err = newMetricsServer(f.metricsAddr, logger); err != nil {
			return err
		}
		defer metrics.close()
		cfg.Metrics = metrics.reg
		if walStream != nil {
			metrics.reg.MustRegister(observe.NewWALSlotCollector(walStream.Slot(), walSlotState(walStream)))
		}
	}
	r, err := service.NewRelay(ctx, cfg)
	if err != nil {
		return serviceConfigError(err)
	}
	if metrics != nil {
		stop := metrics.serve(r.Health())
		defer stop() // after Run: /healthz says 503 while the relay stops
	}
	untrack := track(r)
	defer untrack()
	return r.Run(ctx)
}

// useDB fills cfg with what the relay uses of the database s: its outbox,
// its presence table, its endpoints in endpoints mode, and the WAL stream
// of --wal, which it returns.
func (f *relayFlags) useDB(cfg *service.RelayConfig, s *dburl.DB) (*postgres.WAL, error) {
	cfg.Outbox = s.Outbox
	cfg.Presence = f.presence(s.Presence)
	if f.endpoints.on {
		var err error
		if cfg.Endpoints, err = f.endpoints.config(s.Endpoints, f.scheme, f.timeout); err != nil {
			return nil, err
		}
	}
	if !f.wal {
		return nil, nil
	}
	w, err := openWAL(s, f.walSlot)
	if err != nil {
		return nil, err
	}
	cfg.Relay.Stream = w
	return w, nil
}

// relayConfig is the relay's settings of the flags: the relay's over the
// outbox, and its lanes' in endpoints mode (see service.RelayConfig.Relay).
func (f *relayFlags) relayConfig(logger *slog.Logger) relay.Config {
	concurrency, publishBatch := f.concurrency, f.publishBatch
	if concurrency == 0 {
		concurrency = concurrencyDefault(f.sinkURL)
	}
	switch {
	case publishBatch != 0:
	case f.endpoints.on:
		publishBatch = fanOutPublishBatchDefault
	default:
		publishBatch = publishBatchDefault(f.sinkURL)
	}
	return relay.Config{
		PublishBatch: publishBatch, Logger: logger,
		Lease: f.lease, BackoffMin: f.backoffMin, BackoffMax: f.backoffMax, MaxAttempts: f.maxAttempts,
		BatchSize: f.batch, Concurrency: concurrency, Ordered: f.ordered,
		PollInterval: f.poll, DisableListen: f.noListen, Retention: f.retention, ShutdownTimeout: f.shutdown,
		ProbeInterval: f.probe, DedupWindow: offWhenZero(f.dedupWindow), ClaimBytes: f.claimBytes,
		StreamBehindPoll: offWhenZero(f.walBehindPoll),
	}
}

// openSink opens the sink of --sink for the relay rc configures, refusing
// a --publish-batch the sink does not take.
func (f *relayFlags) openSink(ctx context.Context, rc relay.Config) (*openedSink, error) {
	sk, err := openSink(ctx, f.sinkURL, sinkOptions{
		timeout: f.timeout, concurrency: rc.Concurrency,
		webhookSecrets: f.secrets, webhookScheme: f.scheme, logger: rc.Logger,
		httpClient: f.webhookClient,
	})
	if err != nil {
		return nil, err
	}
	if err := checkPublishBatch(sk, rc.PublishBatch); err != nil {
		sk.closeLogged(rc.Logger)
		return nil, err
	}
	return sk, nil
}

// presence is the relay's row in the presence table of p: its sink
// described without secrets (sink.Describe), or endpoints mode's.
func (f *relayFlags) presence(p store.Presence) *service.PresenceConfig {
	c := &service.PresenceConfig{Store: p, Version: buildVersion(), Every: f.heartbeat}
	if !f.endpoints.on {
		c.Sink, c.Secrets = sink.Describe(sinkKinds, f.sinkURL, sink.URLOptions{
			Password: os.Getenv(envSinkPassword), Secrets: splitSecrets(f.secrets),
		})
	}
	return c
}

// closeArchive closes the archive of --archive, logging an error.
func closeArchive(a *archive.Archive, logger *slog.Logger) {
	if err := a.Close(); err != nil {
		logger.Error("closing the archive", "archive", a.String(), "error", err)
	}
}

// serviceConfigError rewrites service.NewRelay's refusal of what the flags
// gave (a *service.ConfigError) as a usage error naming the flags. Its
// "Archive" refusals cannot happen: check refuses --archive without a
// positive --retention first, and the command sets no Relay.Archive.
func serviceConfigError(err error) error {
	var e *service.ConfigError
	if !errors.As(err, &e) {
		return err
	}
	switch e.Field {
	case "Relay":
		return withFlagNames(e.Err, relayConfigFlags)
	case "Endpoints":
		return endpointsConfigError(e.Err)
	case "Endpoints.Guard":
		return fmt.Errorf("%w: SSRF guard: %v", errUsage, e.Err)
	case "Presence":
		return fmt.Errorf("%w: --heartbeat: %v", errUsage, e.Err)
	case "MetricsSample":
		return fmt.Errorf("%w: --metrics-sample: %v", errUsage, e.Err)
	}
	return fmt.Errorf("%w: %v", errUsage, err)
}

// checkRelayFlags refuses the relay's numeric flags that are out of range
// (see positive), before anything is opened.
func checkRelayFlags(fs *flag.FlagSet) error {
	if err := positive(fs, "timeout", "lease", "backoff-min", "backoff-max", "max-attempts", "batch", "poll",
		"shutdown-timeout", "probe-interval", "metrics-sample", "heartbeat",
		"disable-after", "attempts-retention", "breaker-failures", "claim-bytes", "notify-failing-after", "notify-check-every"); err != nil {
		return err
	}
	if every := fs.Lookup("heartbeat").Value.(flag.Getter).Get().(time.Duration); every > presence.EveryMax {
		return fmt.Errorf("%w: --heartbeat %v: at most %v (the other relays prune a row %v old)", errUsage, every, presence.EveryMax, presence.PruneAfterDefault)
	}
	return notNegative(fs, "concurrency", "publish-batch", "dedup-window", "direct-within", "notify-deadletters")
}

// relayConfigFlags names the flag of each relay.Config field the relay's
// flags set, for relay.New's errors.
var relayConfigFlags = map[string]string{
	"Lease": "lease", "BackoffMin": "backoff-min", "BackoffMax": "backoff-max", "MaxAttempts": "max-attempts",
	"BatchSize": "batch", "Concurrency": "concurrency", "PublishBatch": "publish-batch", "PollInterval": "poll", "StreamBehindPoll": "wal-behind-poll",
	"Retention": "retention", "ShutdownTimeout": "shutdown-timeout", "ProbeInterval": "probe-interval",
}

// offWhenZero is a duration flag whose 0 means off (--dedup-window 0: the
// key free again once its row is gone; --wal-behind-poll 0) as relay.Config
// takes it: negative, since it reads a zero as its default.
func offWhenZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// openWAL is the WAL stream of --wal on s, named by --wal-slot.
func openWAL(s *dburl.DB, slot string) (*postgres.WAL, error) {
	pg, ok := s.Postgres()
	if !ok {
		return nil, fmt.Errorf("%w: --wal needs PostgreSQL (logical replication)", errUsage)
	}
	w, err := pg.WAL(postgres.WALConfig{Slot: slot})
	if err != nil {
		return nil, fmt.Errorf("%w: --wal-slot: %v", errUsage, err)
	}
	return w, nil
}

// walSlotState reads w's slot for the metrics.
func walSlotState(w *postgres.WAL) observe.WALSlotState {
	return func(ctx context.Context) (int64, bool, bool, error) {
		st, err := w.State(ctx)
		return st.RetainedBytes, st.Active, st.Exists, err
	}
}

// dropWALSlot is --wal-drop-slot.
func dropWALSlot(ctx context.Context, db *dbFlags, slot string) error {
	s, err := db.open(ctx, "relay", false)
	if err != nil {
		return err
	}
	defer s.Close()
	w, err := openWAL(s, slot)
	if err != nil {
		return err
	}
	existed, err := w.DropSlot(ctx)
	if err != nil {
		return err
	}
	if !existed {
		fmt.Printf("no slot %s in this database (publication %s dropped if it existed)\n", w.Slot(), w.Publication())
		return nil
	}
	fmt.Printf("dropped %s\n", w)
	return nil
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: --log-level %q: %v", errUsage, level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("%w: --log-format %q: want text or json", errUsage, format)
}
