package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/netfault"
	"github.com/postbox-go/postbox/store/postgres"
)

// Defaults of Config.
const (
	DurationDefault        = 60 * time.Second
	EventsPerSecondDefault = 500
	RelaysDefault          = 3
	DrainTimeoutDefault    = 90 * time.Second
	LeaseDefault           = 2 * time.Second
)

// The relays' settings besides the lease: short, so that every fault
// resolves within its slot of the schedule.
const (
	relayTimeout    = time.Second
	relayBackoffMin = 100 * time.Millisecond
	relayBackoffMax = 2 * time.Second
	// slowAnswer is how long an http-timeout answer is held: past the
	// relays' --timeout.
	slowAnswer = relayTimeout + relayTimeout/2
)

// The run's own settings.
const (
	// minSlot is the shortest slot of the schedule.
	minSlot = 1500 * time.Millisecond
	// maxEventsPerSecond bounds EventsPerSecond: the producers' ticker
	// needs a period of at least 10µs.
	maxEventsPerSecond = 100_000
	// targetSlot is the slot length the schedule aims for: longer runs
	// go round the fault kinds several times.
	targetSlot = 8 * time.Second
	// memoryAt is the middle of the first window of the relays' memory and
	// descriptors (see sampleMemoryWindows).
	memoryAt = 2 * time.Minute
	// progressEvery is the interval of the progress lines.
	progressEvery = 5 * time.Second
)

// Config configures a chaos run. DB and Executable are required.
type Config struct {
	// DB is the PostgreSQL server, postgres://USER@HOST:PORT/DB: the run
	// makes its own schema there, and drops it at the end (it is kept when
	// the reconciliation fails, for inspection).
	DB string
	// Executable is the postbox binary whose `postbox relay` processes
	// deliver the events.
	Executable string
	// Duration is how long events are produced and faults injected
	// (default DurationDefault); draining comes after it.
	Duration time.Duration
	// EventsPerSecond is the production rate (default
	// EventsPerSecondDefault).
	EventsPerSecond int
	// Ordered runs the relays with --ordered and checks the per-aggregate
	// order of the applications.
	Ordered bool
	// Faults are the fault kinds injected, in turn (see ParseFaults);
	// default all but db-restart (unless AllowRestart) and partition-drop
	// (unless Partitioned).
	Faults []string
	// Partitioned makes the outbox partitioned, as `postbox migrate
	// --partitioned --partition-interval 2s` does (PartitionInterval),
	// its partitions created ahead and dropped once past by a retention
	// step of the run's every second (Expire with a zero Before, what a
	// relay's retention does every minute); set when Faults has
	// partition-drop.
	Partitioned bool
	// AllowRestart is the shell command that crashes and restarts the
	// database server (db-restart); empty: never.
	AllowRestart string
	// Lease is the relays' --lease (default LeaseDefault): short, so that
	// the events of a killed or paused relay come back within the fault's
	// slot. Give the lease you run in production to see its recovery
	// times.
	Lease time.Duration
	// Relays is the number of relay processes (default RelaysDefault).
	Relays int
	// Endpoints, when positive, is endpoints mode: the relays run
	// `postbox relay --endpoints` and deliver every event to this many
	// webhook endpoints, each a consumer of the run's (with its own
	// inbox, behind its own fault proxy), registered with `postbox
	// endpoints add`; the faults strike every endpoint, and the
	// reconciliation checks every event at every endpoint. 0: the relays
	// deliver to one consumer, their --webhook-url.
	Endpoints int
	// RandomFailures is the share of the requests to each endpoint (0 to
	// 1) that fail at random in endpoints mode besides the scheduled
	// faults: an error answer, a failing handler, or an answer lost after
	// the event was applied (default RandomFailuresDefault; negative:
	// none).
	RandomFailures float64
	// DrainTimeout bounds the wait for the outbox to drain at the end
	// (default DrainTimeoutDefault).
	DrainTimeout time.Duration
	// Sources, when 2 or more, runs over that many sources: the run
	// creates two scratch databases on the server of DB, the first with
	// one source (schema) alone, the victim of source-outage, the second
	// with the others; the relay processes run `postbox relay --sources
	// FILE` over all of them, the producers write to every source (sharing
	// EventsPerSecond), each source has its own consumer, and the
	// reconciliation is per source. The databases are dropped at the end
	// unless the run fails or Keep. Not with Endpoints or Partitioned.
	Sources int
	// Keep keeps the schema and the relays' logs even when the run
	// succeeds (they are always kept when it fails).
	Keep bool
	// Out receives the progress lines (nil: none).
	Out io.Writer
}

// run is the state of one chaos run.
type run struct {
	cfg     Config
	store   *postgres.Store
	tables  tables
	dbProxy *netfault.Proxy
	// destinations are where the relays deliver: one for the single
	// URL, one per endpoint in endpoints mode.
	destinations []*destination
	// addPrivate: `postbox endpoints add` has --allow-private (endpoints
	// mode; otherwise the relays get --allow-private-endpoints).
	addPrivate bool
	// secretsKey seals the endpoints' secrets (endpoints mode): a new key
	// per run, given to the `postbox endpoints add` and `postbox relay`
	// children in their environment, never on a command line.
	secretsKey      string
	relays          []*relayProcess
	applicationName string
	// parts is the retention of a partitioned outbox.
	parts partitioning
	// server is the database server's version and autovacuum setting
	// (without autovacuum the outbox's tables bloat over a long run).
	server    string
	logDir    string
	producing producing
	begin     time.Time

	// sources are the child runs of a run over many sources, one per
	// source (Config.Sources); databases the scratch databases; closers
	// close the sources' stores.
	sources   []*run
	databases []string
	closers   []func()
	// source is set in the child run of one source.
	source *sourceOf

	mu      sync.Mutex
	windows []window
	memory  []ProcessSample
	// memoryLate is what memory is for the last minute of production.
	memoryLate []ProcessSample
}

// window is one fault injected: its slot of the schedule (events produced
// in it are counted for its kind) and when the fault itself began and
// ended.
type window struct {
	kind               string
	slotStart, slotEnd time.Time
	start, end         time.Time
	err                string
	// settled says what the fault waited for before it began (see
	// faultKind.settle).
	settled string
}

func (c Config) withDefaults() (Config, error) {
	if c.Duration == 0 {
		c.Duration = DurationDefault
	}
	if c.EventsPerSecond == 0 {
		c.EventsPerSecond = EventsPerSecondDefault
	}
	if c.Relays == 0 {
		c.Relays = RelaysDefault
	}
	if c.Lease == 0 {
		c.Lease = LeaseDefault
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DrainTimeoutDefault
	}
	switch {
	case c.Endpoints == 0:
		c.RandomFailures = 0
	case c.RandomFailures == 0:
		c.RandomFailures = RandomFailuresDefault
	case c.RandomFailures < 0:
		c.RandomFailures = 0
	}
	if c.Faults == nil {
		c.Faults, _ = ParseFaultsWith("all", FaultOptions{AllowRestart: c.AllowRestart != "", Partitioned: c.Partitioned, Sources: c.Sources >= 2})
	}
	if slices.Contains(c.Faults, FaultPartitionDrop) {
		c.Partitioned = true
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	switch {
	case !dburl.IsPostgres(c.DB):
		return c, errors.New("chaos: --db must be a postgres:// URL")
	case c.Executable == "":
		return c, errors.New("chaos: the postbox executable is required")
	case c.Duration < 0 || c.EventsPerSecond < 0 || c.Relays < 0 || c.DrainTimeout < 0 || c.Endpoints < 0:
		return c, errors.New("chaos: --duration, --events-per-second, --relays and --endpoints must be positive")
	case c.Sources == 1 || c.Sources < 0:
		return c, fmt.Errorf("chaos: --sources %d: at least 2 (or none: one schema)", c.Sources)
	case c.Sources >= 2 && c.Endpoints > 0:
		return c, errors.New("chaos: --sources and --endpoints do not go together yet: each source delivers to its own consumer")
	case c.Sources >= 2 && c.Partitioned:
		return c, errors.New("chaos: --sources and --partitioned (or partition-drop) do not go together yet")
	case c.Sources < 2 && slices.Contains(c.Faults, FaultSourceOutage):
		return c, errors.New("chaos: source-outage needs --sources N (at least 2)")
	case c.RandomFailures >= 1:
		return c, fmt.Errorf("chaos: random failures %v: want a share below 1", c.RandomFailures)
	case c.Lease < 100*time.Millisecond:
		return c, fmt.Errorf("chaos: --lease %v: at least 100ms", c.Lease)
	case c.EventsPerSecond > maxEventsPerSecond:
		return c, fmt.Errorf("chaos: --events-per-second %d: at most %d", c.EventsPerSecond, maxEventsPerSecond)
	case len(c.Faults) > 0 && c.Duration/time.Duration(len(c.Faults)) < minSlot:
		return c, fmt.Errorf("chaos: --duration %v is too short for %d fault kinds: give at least %v", c.Duration, len(c.Faults), minSlot*time.Duration(len(c.Faults)))
	}
	for _, f := range c.Faults {
		if f == FaultDBRestart && c.AllowRestart == "" {
			return c, errors.New("chaos: db-restart needs AllowRestart")
		}
		kindNamed(f)
	}
	return c, nil
}

// Run runs the suite and returns its reconciliation. An error means the
// run itself could not go on (no database, a relay that cannot start); a
// run that found losses, double effects or disorder returns a Report whose
// OK is false.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	id := newID()
	r := &run{cfg: cfg, applicationName: "postbox-chaos-" + id}
	schema := "postbox_chaos_" + id
	s, err := dburl.Open(ctx, cfg.DB, dburl.Options{Schema: schema, ApplicationName: "postbox chaos"})
	if err != nil {
		return nil, fmt.Errorf("chaos: --db: %w", err)
	}
	defer s.Close()
	pg, ok := s.Postgres()
	if !ok {
		return nil, errors.New("chaos: --db: want a postgres:// URL (the fault suite cuts PostgreSQL's connections)")
	}
	r.store = pg
	r.tables = newTables(r.store)
	keep := false
	defer func() {
		switch {
		case keep:
			r.closeSources()
		case r.sourcesMode():
			r.dropDatabases()
		default:
			r.dropSchema()
		}
	}()
	defer r.closeDestinations()
	if cfg.Sources >= 2 {
		err = r.setupSources(ctx, id)
	} else {
		err = r.setupSchema(ctx)
	}
	if err != nil {
		return nil, err
	}
	if r.logDir, err = os.MkdirTemp("", "postbox-chaos-"); err != nil {
		return nil, err
	}
	defer func() {
		if !keep {
			_ = os.RemoveAll(r.logDir)
		}
	}()
	rep, err := r.run(ctx)
	if err != nil {
		return nil, err
	}
	if !rep.OK || cfg.Keep {
		keep = true
		rep.KeptSchema, rep.RelayLogs = schema, r.logDir
		if r.sourcesMode() {
			rep.KeptSchema, rep.KeptDatabases = "", r.databases
		}
		for i := range cfg.Endpoints {
			rep.KeptInboxSchemas = append(rep.KeptInboxSchemas, r.inboxSchema(i))
		}
	}
	return rep, nil
}

func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (r *run) setupSchema(ctx context.Context) error {
	if _, err := r.store.Migrate(ctx); err != nil {
		return fmt.Errorf("chaos: migrate: %w", err)
	}
	if r.cfg.Ordered {
		if err := r.store.MigrateOrdered(ctx); err != nil {
			return fmt.Errorf("chaos: migrate --ordered: %w", err)
		}
	}
	if r.cfg.Partitioned {
		if err := r.partition(ctx); err != nil {
			return err
		}
	}
	for _, q := range r.tables.create {
		if _, err := r.store.Pool().Exec(ctx, q); err != nil {
			return fmt.Errorf("chaos: create the business tables: %w", err)
		}
	}
	return nil
}

// dropSchema drops the run's schema, and the endpoints' inbox schemas.
func (r *run) dropSchema() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.dropInboxSchemas(ctx)
	_, _ = r.store.Pool().Exec(ctx, "drop schema if exists "+pgx.Identifier{r.store.Schema()}.Sanitize()+" cascade")
}

// relayDB is the relays' database URL: through the database proxy, with the
// run's application_name so that pg-terminate finds their connections.
func (r *run) relayDB() (string, error) {
	u, err := url.Parse(r.cfg.DB)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("chaos: --db %s: want postgres://USER@HOST:PORT/DB (the relays reach HOST:PORT through a fault proxy)", dburl.Redact(r.cfg.DB))
	}
	q := u.Query()
	q.Set("application_name", r.applicationName)
	u.RawQuery = q.Encode()
	u.Host = r.dbProxy.Addr()
	return u.String(), nil
}

// dbTarget is the host:port of --db.
func (r *run) dbTarget() string {
	u, _ := url.Parse(r.cfg.DB)
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

func (r *run) run(ctx context.Context) (*Report, error) {
	if r.cfg.Partitioned {
		upkeepCtx, stopUpkeep := context.WithCancel(ctx)
		var upkeep sync.WaitGroup
		upkeep.Go(func() { r.partitionUpkeep(upkeepCtx) })
		defer func() { stopUpkeep(); upkeep.Wait() }()
	}
	var version, autovacuum string
	err := r.store.Pool().QueryRow(ctx, `select current_setting('server_version'), current_setting('autovacuum')`).Scan(&version, &autovacuum)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	r.server = "PostgreSQL " + version + ", autovacuum " + autovacuum
	if r.dbProxy, err = netfault.NewProxy(r.dbTarget()); err != nil {
		return nil, err
	}
	defer r.dbProxy.Close()
	var secret string
	if r.sourcesMode() {
		secret, err = r.startSourceDestinations()
	} else {
		secret, err = r.startDestinations(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := r.startRelays(secret); err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range r.relays {
			if p.running() {
				_ = p.stop()
			}
		}
	}()
	r.say("%d relays (pids %v), lease %v, timeout %v, backoff %v..%v%s%s%s%s; logs in %s",
		len(r.relays), r.pids(), r.cfg.Lease, relayTimeout, relayBackoffMin, relayBackoffMax, orderedText(r.cfg.Ordered), endpointsText(r.cfg), partitionedText(r.cfg.Partitioned), sourcesText(r), r.logDir)
	r.say("server: %s", r.server)
	r.say("producing %d events/s for %v; faults in turn: %v", r.cfg.EventsPerSecond, r.cfg.Duration, r.cfg.Faults)

	r.awaitRelays(ctx)
	r.begin = time.Now()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var bg, producers sync.WaitGroup
	produceCtx, stopProducing := context.WithTimeout(runCtx, r.cfg.Duration)
	defer stopProducing()
	producers.Go(func() { r.produceAll(produceCtx) })
	bg.Go(func() { r.showProgress(runCtx) })
	bg.Go(func() { r.sampleMemoryWindows(produceCtx, r.cfg.Duration) })

	r.schedule(produceCtx)
	stopProducing()
	// The drain starts once every producer has returned, its last
	// transaction committed or failed: an event committed after the drain
	// found the outbox empty would be left to relays about to stop.
	producers.Wait()
	r.say("production stopped (%d events committed); draining the outbox", r.produced())
	var drainErr error
	if r.sourcesMode() {
		drainErr = r.drainSources(ctx)
	} else {
		drainErr = r.drain(ctx)
	}
	end := r.sampleMemory()
	var stopErrs []string
	var slowestStop time.Duration
	for _, p := range r.relays {
		began := time.Now()
		if err := p.stop(); err != nil {
			stopErrs = append(stopErrs, err.Error())
		}
		slowestStop = max(slowestStop, time.Since(began))
	}
	stopRun()
	bg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var rep *Report
	if r.sourcesMode() {
		rep, err = r.reconcileSources(context.WithoutCancel(ctx))
	} else {
		rep, err = r.reconcile(context.WithoutCancel(ctx))
	}
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	rep.MemoryAt2Min, rep.MemoryAtEnd = r.memory, r.memoryLate
	r.mu.Unlock()
	if rep.MemoryAtEnd == nil {
		rep.MemoryAtEnd = end
	}
	rep.MemoryFlat = memoryFlat(rep.MemoryAt2Min, rep.MemoryAtEnd)
	rep.Server = r.server
	rep.SlowestStopSeconds = seconds(slowestStop)
	logs := make([]string, len(r.relays))
	for i, p := range r.relays {
		logs[i] = p.log.Name()
		_ = p.log.Close()
	}
	rep.RelayLog = countLogs(logs)
	if drainErr != nil {
		rep.Problems = append(rep.Problems, drainErr.Error())
	}
	for _, p := range r.relays {
		rep.Problems = append(rep.Problems, p.exits()...)
	}
	if r.cfg.Partitioned {
		rep.Partitioned = true
		rep.PartitionsDropped, rep.PartitionEventsMoved = r.parts.dropped.Load(), r.parts.moved.Load()
		rep.PartitionStepsGaveUp = r.parts.gaveUp.Load()
		rep.Problems = append(rep.Problems, r.parts.report()...)
	}
	rep.Problems = append(rep.Problems, stopErrs...)
	rep.OK = rep.OK && len(rep.Problems) == 0
	return rep, nil
}

// endpointsText says, in endpoints mode, how many endpoints and how many of
// their requests fail at random.
func endpointsText(c Config) string {
	if c.Endpoints == 0 {
		return ""
	}
	return fmt.Sprintf(", endpoints mode: %d endpoints, %.0f %% of their requests failing at random", c.Endpoints, 100*c.RandomFailures)
}

// partitionedText says that the outbox is partitioned, and how.
func partitionedText(partitioned bool) string {
	if !partitioned {
		return ""
	}
	return fmt.Sprintf(", outbox partitioned (partitions of %v, created ahead and dropped once past every %v)", PartitionInterval, partitionUpkeepEvery)
}

func orderedText(ordered bool) string {
	if ordered {
		return ", ordered"
	}
	return ""
}

// startRelays starts the relay processes; secret is the single URL's
// (empty in endpoints mode: each endpoint has its own in the store).
func (r *run) startRelays(secret string) error {
	var args []string
	if r.sourcesMode() {
		file, err := r.sourcesFile()
		if err != nil {
			return err
		}
		args = []string{"relay", "--sources", file}
	} else {
		db, err := r.relayDB()
		if err != nil {
			return err
		}
		args = append([]string{"relay", "--db", db, "--schema", r.store.Schema()}, r.relayDestinationArgs()...)
	}
	args = append(args,
		"--lease", r.cfg.Lease.String(), "--timeout", relayTimeout.String(),
		"--backoff-min", relayBackoffMin.String(), "--backoff-max", relayBackoffMax.String(),
		"--shutdown-timeout", "2s", "--log-level", "warn", "--log-format", "json")
	if r.cfg.Ordered {
		args = append(args, "--ordered")
	}
	// The secret goes by the environment, not the process list.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if secret != "" {
		env = append(env, "WEBHOOK_SECRET="+secret)
	}
	if r.endpointsMode() {
		env = append(env, keyring.EnvVar+"="+r.secretsKey)
	}
	for i := range r.cfg.Relays {
		log, err := os.Create(filepath.Join(r.logDir, "relay-"+strconv.Itoa(i)+".log"))
		if err != nil {
			return err
		}
		p := &relayProcess{index: i, exe: r.cfg.Executable, args: args, env: env, log: log}
		if err := p.start(); err != nil {
			return err
		}
		r.relays = append(r.relays, p)
	}
	return nil
}

func (r *run) pids() []int {
	out := make([]int, len(r.relays))
	for i, p := range r.relays {
		out[i] = p.pid()
	}
	return out
}
