package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/observe"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/relay/presence"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

func setupRelay(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	var (
		sinkURL      = fs.String("sink", "", "where events go, chosen by scheme: https://... (a webhook endpoint), nats://HOST:PORT?subject=TEMPLATE, amqp://USER:PASS@HOST:PORT/VHOST?exchange=NAME&routing_key=TEMPLATE, kafka://BROKER,...?topic=TEMPLATE; a broker's credentials may come from $POSTBOX_SINK_USER and $POSTBOX_SINK_PASSWORD")
		url          = fs.String("webhook-url", "", "endpoint that receives the events (http or https); the same as --sink with a webhook URL")
		secrets      = fs.String("webhook-secret", "", "signing key: whsec_<base64> (HMAC, v1) or raw, or whsk_<base64> (ed25519, v1a; see postbox keys generate); several separated by spaces or commas during a rotation")
		scheme       = fs.String("signature", "standard", "signature scheme: standard (Standard Webhooks) or x-signature")
		timeout      = fs.Duration("timeout", webhook.TimeoutDefault, "timeout of one publish: a webhook request, a broker's acknowledgement")
		lease        = fs.Duration("lease", relay.LeaseDefault, "how long a claimed event stays reserved to this relay")
		backoffMin   = fs.Duration("backoff-min", relay.BackoffMinDefault, "shortest delay before a retry")
		backoffMax   = fs.Duration("backoff-max", relay.BackoffMaxDefault, "longest delay before a retry")
		maxAttempts  = fs.Int("max-attempts", relay.MaxAttemptsDefault, "attempts before an event is moved to failed")
		batch        = fs.Int("batch", relay.BatchSizeDefault, "most events claimed at once")
		concurrency  = fs.Int("concurrency", 0, fmt.Sprintf("most deliveries in progress at once (0: the default, %d for webhooks and the fan-out of --endpoints, %d for a broker, whose publishes are pipelined on one connection); with --endpoints, the fan-out's: each endpoint's lane has the endpoint's own concurrency (postbox endpoints add|update --concurrency)", relay.ConcurrencyDefault, concurrencyDefault("nats://")))
		pubBatch     = fs.Int("publish-batch", 0, fmt.Sprintf("publish up to this many events at once, through a sink that publishes batches (0: the default, %d for nats, %d for the fan-out of --endpoints, which writes their deliveries in one statement; 1 elsewhere: one event per publish)", publishBatchDefault("nats://"), fanOutPublishBatchDefault))
		ordered      = fs.Bool("ordered", false, "deliver the events of one aggregate one at a time, in order; with --endpoints, to each endpoint, one endpoint's failures holding back only its own lane (PostgreSQL: run \"postbox migrate --ordered\" once first)")
		poll         = fs.Duration("poll", relay.PollIntervalDefault, "fallback poll interval; with --endpoints, also how often one query looks for the lanes' due deliveries (retries, deliveries written by other relays)")
		noListen     = fs.Bool("no-listen", false, "do not use LISTEN/NOTIFY (for connection poolers); poll only")
		retention    = fs.Duration("retention", 0, "how long delivered events are kept, marked done (0: deleted at once; negative: forever); with --endpoints, the outbox's events once fanned out, and when not 0 the endpoints' delivered deliveries are kept too, until --attempts-retention")
		shutdown     = fs.Duration("shutdown-timeout", relay.ShutdownTimeoutDefault, "how long deliveries in flight may finish on SIGINT/SIGTERM")
		probe        = fs.Duration("probe-interval", relay.ProbeIntervalDefault, "while the sink is unreachable (connections refused, every request timing out, a broker connection down), the longest wait between two probes: one event sent alone; such failures count no attempt")
		metricsAddr  = fs.String("metrics-addr", "", "serve GET /metrics (Prometheus) and GET /healthz on HOST:PORT, such as 127.0.0.1:9090 (off when empty)")
		metricsEvery = fs.Duration("metrics-sample", observe.SampleEveryDefault, "how often the outbox's counts are sampled for --metrics-addr (one query each time)")
		logLevel     = fs.String("log-level", "info", "debug, info, warn or error")
		logFormat    = fs.String("log-format", "text", "text or json")
		wal          = fs.Bool("wal", false, "WAL mode (PostgreSQL, wal_level = logical, a user with REPLICATION): deliver the outbox's inserts as they commit, streamed from a logical replication slot; poll for retries (see docs/wal.md; \"postbox migrate --wal\" lets producers skip the notify trigger)")
		walSlot      = fs.String("wal-slot", "", "the replication slot of --wal, also the publication's name (default postbox_<database>_<schema>)")
		walDropSlot  = fs.Bool("wal-drop-slot", false, "drop the replication slot and the publication of --wal, and exit (stop the relays streaming it first)")
		dedupWin     = fs.Duration("dedup-window", relay.DedupWindowDefault, "how long a delivered event's dedup_key stays taken, whatever --retention (0: free again once the event's row is deleted)")
		claimBytes   = fs.Int("claim-bytes", relay.ClaimBytesDefault, "the payload bytes one claim takes and the relay holds at once, at most (an event larger than that is still taken, alone)")
		heartbeat    = fs.Duration("heartbeat", presence.EveryDefault, fmt.Sprintf("how often the relay renews its row in the presence table, which postbox status reads (its mode, whether it finds the sink down); a row %d beats old is shown stale", store.PresenceStaleBeats))
	)
	var endpoints endpointsFlags
	endpoints.register(fs)
	return func(ctx context.Context) error {
		if err := checkRelayFlags(fs); err != nil {
			return err
		}
		if *walDropSlot {
			if err := refuseEmpty(fs, "wal-slot"); err != nil {
				return err
			}
			return dropWALSlot(ctx, &db, *walSlot)
		}
		if *sinkURL != "" && *url != "" {
			return fmt.Errorf("%w: give --sink or --webhook-url, not both", errUsage)
		}
		if *sinkURL == "" {
			*sinkURL = *url
		}
		if endpoints.on && *sinkURL != "" {
			return fmt.Errorf("%w: give --endpoints or --sink (--webhook-url), not both", errUsage)
		}
		if err := endpoints.checkModeFlags(fs); err != nil {
			return err
		}
		if !endpoints.on {
			if err := required("sink", *sinkURL); err != nil {
				return err
			}
		}
		logger, err := newLogger(*logLevel, *logFormat)
		if err != nil {
			return err
		}
		setRelayGC(os.Getenv, logger)
		if *concurrency == 0 {
			*concurrency = concurrencyDefault(*sinkURL)
		}
		switch {
		case *pubBatch != 0:
		case endpoints.on:
			*pubBatch = fanOutPublishBatchDefault
		default:
			*pubBatch = publishBatchDefault(*sinkURL)
		}
		opts := sinkOptions{
			timeout: *timeout, concurrency: *concurrency,
			webhookSecrets: *secrets, webhookScheme: *scheme, logger: logger,
		}
		var sink *openedSink
		if !endpoints.on {
			if sink, err = openSink(ctx, *sinkURL, opts); err != nil {
				return err
			}
			defer func() {
				if err := sink.close(); err != nil {
					logger.Warn("closing the sink", "sink", sink.String(), "error", err)
				}
			}()
		}
		if !endpoints.on {
			if err := checkPublishBatch(sink, *pubBatch); err != nil {
				return err
			}
		}
		s, err := db.open(ctx, "relay", false)
		if err != nil {
			return err
		}
		defer s.Close()
		if endpoints.on {
			if err := s.Outbox.CheckSchema(ctx, store.SchemaParams{Ordered: *ordered}); err != nil {
				return err
			}
		}
		var stream relay.Stream
		var walStream *postgres.WAL
		if *wal {
			if walStream, err = openWAL(s, *walSlot); err != nil {
				return err
			}
			stream = walStream
		}
		tracer, stopTracing, err := setupTracing(ctx, os.Getenv, logger)
		if err != nil {
			return err
		}
		defer stopTracing() // after Run: flushes the last spans
		var metrics *metricsServer
		var observer relay.Observer
		if *metricsAddr != "" {
			if metrics, err = newMetricsServer(*metricsAddr, s.Outbox, *metricsEvery, logger); err != nil {
				return err
			}
			observer = metrics.prom.Relay()
			if endpoints.on {
				observer = metrics.prom.FanOut()
			}
			if walStream != nil {
				metrics.reg.MustRegister(observe.NewWALSlotCollector(walStream.Slot(), walSlotState(walStream)))
			}
		}
		closeMetrics := func() {
			if metrics != nil {
				_ = metrics.ln.Close()
			}
		}
		var fanOut *endpointsRelay
		if endpoints.on {
			sch, err := signature.ParseScheme(*scheme)
			if err != nil {
				closeMetrics()
				return fmt.Errorf("%w: --signature: %v", errUsage, err)
			}
			c := endpointsConfig{
				// Every relay flag that applies to a delivery applies to
				// each lane; Concurrency, Retention, DedupWindow,
				// PollInterval and the observer are the supervisor's to set
				// per lane.
				lane: relay.Config{Logger: logger, Lease: *lease, BackoffMin: *backoffMin, BackoffMax: *backoffMax, MaxAttempts: *maxAttempts,
					BatchSize: *batch, ClaimBytes: *claimBytes, Ordered: *ordered, ShutdownTimeout: *shutdown, ProbeInterval: *probe, Tracer: tracer},
				scheme: sch, timeout: *timeout, poll: *poll, keepDelivered: *retention != 0,
			}
			if metrics != nil {
				c.prom = metrics.prom
			}
			if fanOut, err = newEndpointsRelay(ctx, s.Endpoints, endpoints, c, s.Outbox.String()); err != nil {
				closeMetrics()
				return err
			}
			if metrics != nil {
				fanOut.register(metrics.reg)
			}
			sink = &openedSink{Sink: fanOut.fanOut}
		}
		mode, sinkDesc, sinkSecrets := "", "endpoints from the database", []string(nil)
		switch {
		case fanOut != nil:
			mode = presence.ModeEndpoints
		case *wal:
			mode = presence.ModeWAL
		}
		if fanOut == nil {
			sinkDesc, sinkSecrets = describeSink(*sinkURL, *secrets)
		}
		hb, err := presence.New(presence.Config{Store: s.Presence, Sink: sinkDesc, Mode: mode, Version: buildVersion(),
			Secrets: sinkSecrets, Every: *heartbeat, Logger: logger})
		if err != nil {
			closeMetrics()
			return fmt.Errorf("%w: --heartbeat: %v", errUsage, err)
		}
		owner := "" // the relay's default
		if fanOut != nil {
			owner = fanOut.supervisor.Owner() // the lanes' leases name the same process
		}
		r, err := relay.New(relay.Config{
			Store: s.Outbox, Sink: sink.Sink, PublishBatch: *pubBatch, Logger: logger, Owner: owner,
			Lease: *lease, BackoffMin: *backoffMin, BackoffMax: *backoffMax, MaxAttempts: *maxAttempts,
			BatchSize: *batch, Concurrency: *concurrency, Ordered: *ordered,
			PollInterval: *poll, DisableListen: *noListen, Retention: *retention, ShutdownTimeout: *shutdown,
			ProbeInterval: *probe, Observer: relay.Observers(observer, hb), Tracer: tracer, Stream: stream,
			DedupWindow: dedupWindow(*dedupWin), ClaimBytes: *claimBytes,
		})
		if err != nil {
			closeMetrics()
			return withFlagNames(err, relayConfigFlags)
		}
		if metrics != nil {
			stop := metrics.serve(r.Ready)
			defer stop() // after Run: /healthz says 503 while the relay stops
		}
		run := func(ctx context.Context) error { return runWithPresence(ctx, hb, r, r.Run) }
		if fanOut != nil {
			return fanOut.run(ctx, run)
		}
		return run(ctx)
	}
}

// checkRelayFlags refuses the relay's numeric flags that are out of range
// (see positive), before anything is opened.
func checkRelayFlags(fs *flag.FlagSet) error {
	if err := positive(fs, "timeout", "lease", "backoff-min", "backoff-max", "max-attempts", "batch", "poll",
		"shutdown-timeout", "probe-interval", "metrics-sample", "heartbeat",
		"disable-after", "attempts-retention", "breaker-failures", "claim-bytes"); err != nil {
		return err
	}
	if every := fs.Lookup("heartbeat").Value.(flag.Getter).Get().(time.Duration); every > presence.EveryMax {
		return fmt.Errorf("%w: --heartbeat %v: at most %v (the other relays prune a row %v old)", errUsage, every, presence.EveryMax, presence.PruneAfterDefault)
	}
	return notNegative(fs, "concurrency", "publish-batch", "dedup-window", "direct-within")
}

// relayConfigFlags names the flag of each relay.Config field the relay's
// flags set, for relay.New's errors.
var relayConfigFlags = map[string]string{
	"Lease": "lease", "BackoffMin": "backoff-min", "BackoffMax": "backoff-max", "MaxAttempts": "max-attempts",
	"BatchSize": "batch", "Concurrency": "concurrency", "PublishBatch": "publish-batch", "PollInterval": "poll",
	"Retention": "retention", "ShutdownTimeout": "shutdown-timeout", "ProbeInterval": "probe-interval",
}

// dedupWindow is relay.Config.DedupWindow for --dedup-window d: relay.Config
// reads a zero as its default, so a d of 0 (the key free again once its row
// is gone) is a negative window there.
func dedupWindow(d time.Duration) time.Duration {
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
