package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/fleet"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/observe"
	"github.com/postbox-go/postbox/service"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

// sourcesFlags are the flags of postbox relay over many sources.
type sourcesFlags struct {
	file, query string
	every       time.Duration
	conns       int
	// claimBytesGiven, batchGiven: --claim-bytes, --batch were given;
	// otherwise each source's relay holds sourceClaimBytesDefault and
	// claims sourceBatchDefault at most.
	claimBytesGiven, batchGiven bool
}

func (s *sourcesFlags) register(fs *flag.FlagSet) {
	s.registerList(fs, "drain many outboxes", ", re-read every --sources-every; each runs as its own relay with this command's other flags (see docs/scaling.md)")
	fs.DurationVar(&s.every, "sources-every", fleet.EveryDefault, "with --sources or --sources-query: how often the list is read again; sources added are started, removed or changed ones stopped")
	fs.IntVar(&s.conns, "source-conns", sourceConnsDefault, "with --sources or --sources-query: the most connections of each database's pool, shared by all the sources (schemas) in it; a database also takes one listening connection per source that listens")
}

// registerList registers --sources and --sources-query, for what (the
// command's use of them) and then.
func (s *sourcesFlags) registerList(fs *flag.FlagSet, what, then string) {
	fs.StringVar(&s.file, "sources", "", what+": a YAML file listing them (sources: - name, db, schema, weight, sink or endpoints: true, wal)"+then)
	fs.StringVar(&s.query, "sources-query", "", what+": a SQL query on the database of --db (a registry) returning the sources' columns by name (db, and any of name, schema, weight, sink, endpoints, wal)"+then)
}

// checkList refuses --sources and --sources-query together, and a
// --sources-query without a PostgreSQL --db, or --sources with one.
func (s *sourcesFlags) checkList(db *dbFlags) error {
	switch {
	case s.file != "" && s.query != "":
		return fmt.Errorf("%w: give --sources or --sources-query, not both", errUsage)
	case s.query != "" && db.url == "":
		return fmt.Errorf("%w: --sources-query runs on the database of --db (the registry): give --db", errUsage)
	case s.query != "" && !dburl.IsPostgres(db.url):
		return fmt.Errorf("%w: --sources-query needs a PostgreSQL --db", errUsage)
	case s.file != "" && db.url != "":
		return fmt.Errorf("%w: with --sources, each source names its database: --db is only the registry of --sources-query", errUsage)
	}
	return nil
}

// sourceClaimBytesDefault is each source's --claim-bytes when it is not
// given: the payload bytes one source's relay holds at once. The process
// holds up to that times the sources with a backlog, so it is lower than a
// single relay's default (relay.ClaimBytesDefault).
const sourceClaimBytesDefault = 8 << 20

// sourceBatchDefault is each source's --batch when it is not given: a
// relay's queues are sized for a batch (relay.Config.BatchSize), some
// 500 bytes an event whether it has a backlog or not, so many sources
// take less memory with smaller batches (a quarter of relay.BatchSizeDefault
// costs a source with a backlog little: see docs/scaling.md).
const sourceBatchDefault = 500

// sourcesIdleConnsPerHost is how many idle keep-alive connections to one
// webhook host the sources of a process keep between them.
const sourcesIdleConnsPerHost = 256

// sourceConnsDefault is --source-conns.
const sourceConnsDefault = 10

// on reports whether the relay drains many sources.
func (s *sourcesFlags) on() bool { return s.file != "" || s.query != "" }

// sourcesOnlyFlags are the relay's flags that mean something only with
// --sources or --sources-query.
var sourcesOnlyFlags = []string{"sources-every", "source-conns"}

// notWithSources are the relay's flags that --sources refuses, and why.
var notWithSources = map[string]string{
	"endpoints":     "say endpoints: true for each source in endpoints mode",
	"wal":           "say wal: true for each source streamed from its slot",
	"wal-slot":      "a source streamed with wal: true uses its default slot, postbox_<database>_<schema>",
	"wal-drop-slot": "drop a source's slot with postbox relay --db URL --schema S --wal-drop-slot",
	"archive":       "an archive per source is not built yet: run the sources that archive with a relay of their own",
}

// check refuses the flags that do not go together with many sources.
func (s *sourcesFlags) check(fs *flag.FlagSet, db *dbFlags) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		s.claimBytesGiven = s.claimBytesGiven || f.Name == "claim-bytes"
		s.batchGiven = s.batchGiven || f.Name == "batch"
		if why, refused := notWithSources[f.Name]; refused && err == nil {
			err = fmt.Errorf("%w: --%s does not apply with --sources or --sources-query: %s", errUsage, f.Name, why)
		}
	})
	if err != nil {
		return err
	}
	if err := s.checkList(db); err != nil {
		return err
	}
	switch {
	case s.every <= 0:
		return fmt.Errorf("%w: --sources-every must be positive", errUsage)
	case s.conns < 1:
		return fmt.Errorf("%w: --source-conns must be at least 1", errUsage)
	}
	return nil
}

// checkNotSources refuses the flags of many sources without them (and
// the others given, the flags that share them).
func (s *sourcesFlags) checkNotSources(fs *flag.FlagSet, others []string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		for _, name := range slices.Concat(sourcesOnlyFlags, others) {
			if f.Name == name && err == nil {
				err = fmt.Errorf("%w: --%s applies only with --sources or --sources-query", errUsage, f.Name)
			}
		}
	})
	return err
}

// sourceCheckTimeout bounds the check that a source's tables are
// migrated.
const sourceCheckTimeout = 10 * time.Second

// sourcesQueryTimeout bounds one run of --sources-query.
const sourcesQueryTimeout = 10 * time.Second

// runSources is postbox relay --sources or --sources-query: a fleet of
// relays, one per source, each with the relay's flags.
func runSources(ctx context.Context, f *relayFlags) error {
	logger, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	setRelayGC(os.Getenv, logger)
	list, closeList, err := f.sources.lister(ctx, &f.db, fleet.Defaults{Schema: f.db.schema, Sink: f.sinkURL})
	if err != nil {
		return err
	}
	defer closeList()
	tracer, stopTracing, err := setupTracing(ctx, os.Getenv, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	// The secrets key of the endpoints' secrets, when there is one: a
	// source in endpoints mode without it fails on its own.
	if f.endpoints.key.given() {
		if err := f.endpoints.loadKey(); err != nil {
			return err
		}
	}
	pools := dburl.NewPools(dburl.Options{ApplicationName: "postbox relay"}, int32(f.sources.conns))
	// One client for the webhook sinks of every source: their keep-alive
	// connections to a host are shared, not opened by each source.
	webhookClient := webhook.NewClient(f.timeout, sourcesIdleConnsPerHost)
	defer webhookClient.CloseIdleConnections()
	sr := &sourceRelays{f: f, pools: pools, tracer: tracer, webhookClient: webhookClient}
	var metrics *metricsServer
	if f.metricsAddr != "" {
		if metrics, err = newMetricsServer(f.metricsAddr, logger); err != nil {
			return err
		}
		defer metrics.close()
		sr.metrics = newSourceRegistries(metrics.reg)
		metrics.gather = sr.metrics
	}
	fc := fleet.Config{List: list, Every: f.sources.every, Open: sr.open, Logger: logger}
	var shared *sharing
	if url := f.fleetURL(); url != "" {
		if shared, err = joinFleet(ctx, url, f.share.name, f.share.replicas, logger); err != nil {
			return err
		}
		fc.Mine = shared.Mine
	} else {
		logger.Info("fleet: this process drains every source listed (no --fleet-db: the sources are not shared with other relay processes)")
	}
	fl, err := fleet.New(fc)
	if err != nil {
		return err
	}
	if shared != nil {
		sharingCtx, stopSharing := context.WithCancel(context.WithoutCancel(ctx))
		var sharingDone sync.WaitGroup
		sharingDone.Go(func() { shared.run(sharingCtx, fl) })
		// After the fleet stopped: its sources stop before the slot is
		// given up, so that the others take them over once they are free.
		defer sharingDone.Wait()
		defer stopSharing()
	}
	if metrics != nil {
		stop := metrics.serve(observe.Health{Ready: fl.Listed})
		defer stop()
		metrics.reg.MustRegister(sourceStates(fl))
	}
	what := "--sources " + f.sources.file
	if f.sources.query != "" {
		what = "--sources-query on " + dburl.Redact(f.db.url)
	}
	logger.Info("relay over many sources: one relay per source, sharing one pool per database",
		"list", what, "every", f.sources.every, "pool_max_conns", f.sources.conns)
	return fl.Run(ctx)
}

// lister is the fleet's List: the file of --sources, read each time, or
// the query of --sources-query on the registry db (--db); closeList
// closes the registry. The sources take the defaults d.
func (s *sourcesFlags) lister(ctx context.Context, db *dbFlags, d fleet.Defaults) (list func(context.Context) ([]fleet.Source, error), closeList func(), err error) {
	if s.file != "" {
		return func(context.Context) ([]fleet.Source, error) { return fleet.ReadFile(s.file, d) }, func() {}, nil
	}
	reg, err := db.open(ctx, "registry", true)
	if err != nil {
		return nil, nil, err
	}
	pg, _ := reg.Postgres() // check made sure
	return func(ctx context.Context) ([]fleet.Source, error) {
		ctx, cancel := context.WithTimeout(ctx, sourcesQueryTimeout)
		defer cancel()
		var list []fleet.Source
		err := pgx.BeginTxFunc(ctx, pg.Pool(), pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			var err error
			list, err = fleet.Query(ctx, tx, s.query, d)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("--sources-query: %w", dburl.Scrub(err, db.url))
		}
		return list, nil
	}, reg.Close, nil
}

// sourceRelays opens the relay of each source (fleet.Config.Open).
type sourceRelays struct {
	f       *relayFlags
	pools   *dburl.Pools
	tracer  trace.Tracer
	metrics *sourceRegistries // nil without --metrics-addr
	// webhookClient is the client of every source's webhook sink.
	webhookClient *http.Client
}

// open builds the relay of src: the command's flags, with src's
// database, schema, sink or endpoints mode and WAL mode, its delivery
// slots (--concurrency) times its weight, its store on the pool of its
// database.
func (sr *sourceRelays) open(ctx context.Context, src fleet.Source, log *slog.Logger) (fleet.Relay, error) {
	f := *sr.f // this source's flags
	f.sinkURL, f.endpoints.on, f.wal = src.Sink, src.Endpoints, src.WAL
	f.db = dbFlags{url: src.DB, schema: src.Schema}
	f.webhookClient = sr.webhookClient
	rc := f.relayConfig(log)
	rc.Concurrency *= src.Weight
	if !f.sources.claimBytesGiven {
		rc.ClaimBytes = sourceClaimBytesDefault
	}
	if !f.sources.batchGiven {
		rc.BatchSize = sourceBatchDefault
	}
	rc.Tracer = sr.tracer
	cfg := service.RelayConfig{Relay: rc, MetricsSample: f.metricsEvery}
	r := &sourceRelay{}
	fail := func(err error) (fleet.Relay, error) {
		r.Close()
		return nil, err
	}
	if src.Endpoints && f.endpoints.keyring == nil {
		return nil, errors.New("endpoints mode needs the secrets key ($" + keyring.EnvVar + " or --secrets-key-file)")
	}
	if !src.Endpoints {
		sk, err := f.openSink(ctx, rc)
		if err != nil {
			return nil, err
		}
		r.closers = append(r.closers, func() { sk.closeLogged(log) })
		cfg.Sink = sk.Sink
	}
	db, err := sr.pools.Open(ctx, src.DB, src.Schema)
	if err != nil {
		return fail(err)
	}
	r.closers = append(r.closers, db.Close)
	// Checked here, before the relay is built: a source that is not
	// migrated fails at each retry without the lines a starting relay logs.
	checkCtx, cancel := context.WithTimeout(ctx, sourceCheckTimeout)
	err = db.Outbox.CheckSchema(checkCtx, store.SchemaParams{Ordered: f.ordered})
	cancel()
	if err != nil {
		return fail(err)
	}
	walStream, err := f.useDB(&cfg, db)
	if err != nil {
		return fail(err)
	}
	if sr.metrics != nil {
		reg := sr.metrics.add(src.Name)
		r.closers = append(r.closers, func() { sr.metrics.remove(src.Name) })
		cfg.Metrics = reg
		if walStream != nil {
			reg.MustRegister(observe.NewWALSlotCollector(walStream.Slot(), walSlotState(walStream)))
		}
	}
	rel, err := service.NewRelay(ctx, cfg)
	if err != nil {
		return fail(serviceConfigError(err))
	}
	r.Relay = rel
	r.closers = append(r.closers, track(rel))
	return r, nil
}

// sourceRelay is one source's relay and what closes its resources.
type sourceRelay struct {
	*service.Relay
	closers []func()
}

// Close runs the closers, last opened first.
func (r *sourceRelay) Close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}

// sourceRegistries are the metrics of the sources, one registry each
// whose metrics carry the source label, gathered with the process's.
type sourceRegistries struct {
	main prometheus.Gatherer
	mu   sync.Mutex
	regs map[string]*prometheus.Registry
}

func newSourceRegistries(main prometheus.Gatherer) *sourceRegistries {
	return &sourceRegistries{main: main, regs: map[string]*prometheus.Registry{}}
}

// add makes the registry of the source name, and returns it labelled.
func (s *sourceRegistries) add(name string) prometheus.Registerer {
	reg := prometheus.NewRegistry()
	s.mu.Lock()
	s.regs[name] = reg
	s.mu.Unlock()
	return prometheus.WrapRegistererWith(prometheus.Labels{"source": name}, reg)
}

// remove drops the source's metrics.
func (s *sourceRegistries) remove(name string) {
	s.mu.Lock()
	delete(s.regs, name)
	s.mu.Unlock()
}

// Gather gathers the process's metrics and every source's.
func (s *sourceRegistries) Gather() ([]*dto.MetricFamily, error) {
	s.mu.Lock()
	gs := make(prometheus.Gatherers, 0, len(s.regs)+1)
	gs = append(gs, s.main)
	for _, r := range s.regs {
		gs = append(gs, r)
	}
	s.mu.Unlock()
	return gs.Gather()
}

// sourceStates is postbox_sources{state}: how many sources are in each
// state of fleet.State.
func sourceStates(fl *fleet.Fleet) prometheus.Collector {
	return &statesCollector{fl: fl, desc: prometheus.NewDesc("postbox_sources",
		"Sources the relay drains (postbox relay --sources), by state: starting, delivering, not delivering, failed.",
		[]string{"state"}, nil)}
}

type statesCollector struct {
	fl   *fleet.Fleet
	desc *prometheus.Desc
}

func (c *statesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *statesCollector) Collect(ch chan<- prometheus.Metric) {
	n := map[fleet.State]int{fleet.StateStarting: 0, fleet.StateDelivering: 0, fleet.StateNotDelivering: 0, fleet.StateFailed: 0}
	for _, st := range c.fl.Sources() {
		n[st.State]++
	}
	for state, count := range n {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(count), string(state))
	}
}
