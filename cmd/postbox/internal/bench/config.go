package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"time"
)

// Scenario names.
const (
	// ScenarioDrain drains a backlog to a no-op sink with the relay
	// library in process, then a copy of it with the Prometheus observer
	// on (metrics on / off), then copies with raw SQL (batched DELETE,
	// batched UPDATE to done).
	ScenarioDrain = "drain-noop"
	// ScenarioWebhook drains a backlog as signed webhooks to a local
	// receiver through a `postbox relay` child process, between two runs
	// of its limit: a bare signed-HTTP client with no database.
	ScenarioWebhook = "webhook"
	// ScenarioLatency measures commit-to-delivery latency at steady rates
	// through a `postbox relay` child process.
	ScenarioLatency = "latency"
	// ScenarioWrite measures business transactions/s without and with an
	// event, and with the relay library draining beside them in process.
	ScenarioWrite = "write-overhead"
	// ScenarioDrainWAL drains a backlog to a no-op sink with the relay
	// library in process in WAL mode (the WAL stream of a replication
	// slot), then a copy with the raw-SQL DELETE. It needs PostgreSQL
	// with wal_level = logical and runs only when named.
	ScenarioDrainWAL = "drain-noop-wal"
	// ScenarioLatencyWAL is latency through a `postbox relay --wal` child
	// process, on an outbox in WAL mode (no notify trigger). It runs only
	// when named.
	ScenarioLatencyWAL = "latency-wal"
	// ScenarioWriteWAL is write-overhead on an outbox in WAL mode (no
	// notify trigger), the relay library draining beside the last run in
	// WAL mode. It runs only when named.
	ScenarioWriteWAL = "write-overhead-wal"
	// ScenarioInbox sends signed webhook requests into inbox.NewHandler
	// with a one-insert handler, beside a pgx client committing the same
	// two inserts per transaction at the same concurrency, without HTTP.
	// It runs only when named.
	ScenarioInbox = "inbox"
	// ScenarioScale compares the drain rate and the resident memory of a
	// `postbox relay` child process with a small and a large backlog.
	ScenarioScale = "scale"
	// ScenarioScaling measures the drain rate by `postbox relay` child
	// processes and their --concurrency. It is not part of the default
	// run.
	ScenarioScaling = "scaling"
	// ScenarioKafka drains a backlog through `postbox relay --sink
	// kafka://...` to a Kafka cluster, beside franz-go producing the same
	// records and the no-op drain. It is not part of the default run: it
	// needs a cluster, Config.KafkaBrokers, or a build with -tags kfake,
	// which runs franz-go's in-memory cluster in process.
	ScenarioKafka = "kafka"
	// ScenarioAMQP drains a backlog through a `postbox relay --sink
	// amqp://...` child process into a RabbitMQ quorum queue, beside
	// amqp091-go publishing the same messages and the relay library's
	// drain to a no-op sink. It is not part of the default run: it needs
	// a RabbitMQ server (Config.AMQPURL).
	ScenarioAMQP = "amqp"
	// ScenarioNATS drains a backlog through `postbox relay --sink
	// nats://...` child process into a JetStream stream, beside its two
	// limits: nats.go publishing the same messages, and the relay
	// library's drain to a no-op sink. It needs a NATS server
	// (Config.NATSURL) and runs only when named.
	ScenarioNATS = "nats"
	// ScenarioEndpoints measures `postbox relay --endpoints` as a child
	// process, its endpoints registered with `postbox endpoints add`:
	// the deliveries/s to 10 healthy endpoints on loopback, every event
	// to each, against the single-URL events/s of the webhook scenario in
	// the same run (or of a single-URL drain of its own when webhook does
	// not run); and isolation: the delivery rate of 8 healthy endpoints
	// beside 2 healthy ones, then beside one refusing connections and one
	// answering after 2 s. It is not part of the default run.
	ScenarioEndpoints = "endpoints"
	// ScenarioBloat drains a backlog to a no-op sink with the relay
	// library in process (defaults), then an identical backlog while a
	// REPEATABLE READ transaction that read the outbox before the backlog
	// was written stays open (its snapshot keeps every row the drain
	// deletes from being vacuumed): the second rate over the first, on
	// the plain outbox and on a partitioned one. PostgreSQL only; it runs
	// only when named.
	ScenarioBloat = "bloat"
	// ScenarioRetention removes a backlog of delivered events kept in the
	// outbox (done, processed an hour ago) with the store's retention
	// step, Expire, as a relay with --retention calls it: DELETE batches
	// on the plain outbox, partition drops on a partitioned one; the
	// measure is the time the Expire calls took. PostgreSQL only; it runs
	// only when named.
	ScenarioRetention = "retention"
	// ScenarioReplay drains a backlog to a no-op sink with the relay
	// library in process, keeping the delivered events (Retention), then
	// replays them all with replay.Run while a relay of the same settings
	// drains the replays: the replay's rate, from its start until every
	// replay is delivered, over the drain's. It runs only when named.
	ScenarioReplay = "replay"
	// ScenarioOrdered drains a backlog whose events are spread round-robin
	// over Config.OrderedAggregates aggregates, with the relay in ordered
	// mode and, on an identical fresh backlog, in its default (unordered)
	// mode, by two paths: the relay library in process to a no-op sink,
	// and a `postbox relay` child process (with and without --ordered)
	// delivering signed webhooks to a local receiver. Each path's measure
	// is the ordered rate over the unordered one. The ordered outboxes are
	// migrated as `postbox migrate --ordered` migrates them, the unordered
	// ones as `postbox migrate`. It runs only when named.
	ScenarioOrdered = "ordered"
	// ScenarioSources measures `postbox relay --sources` (issue 30) as a
	// child process delivering signed webhooks to a local receiver, over
	// scratch databases of its own (PostgreSQL only): the drain rate of
	// Config.SourcesCount sources each with a share of a backlog against
	// one source with all of it (many_ratio); commit-return → delivery of
	// a trickle of plain-SQL one-event transactions into every source but
	// one, alone and while that one drains Config.SourcesBacklog
	// (trickle); and the same trickle while that source's database is
	// unreachable (outage). It runs only when named.
	ScenarioSources = "sources"
)

// DefaultScenarios are the scenarios of the goals, run when
// Config.Scenarios is empty; "all" in Config.Scenarios stands for them.
var DefaultScenarios = []string{ScenarioDrain, ScenarioWebhook, ScenarioLatency, ScenarioWrite, ScenarioScale}

// AllScenarios are every scenario that needs only the database, in the
// order they run.
var AllScenarios = append(slices.Clone(DefaultScenarios), ScenarioScaling, ScenarioEndpoints)

// WALScenarios are drain-noop, latency and write-overhead in WAL mode
// (`postbox relay --wal`); they need PostgreSQL with wal_level = logical
// and run only when named. "wal" in Config.Scenarios stands for them and
// their default-mode counterparts.
var WALScenarios = []string{ScenarioDrainWAL, ScenarioLatencyWAL, ScenarioWriteWAL}

// knownScenarios are every scenario, in the order they run: each WAL-mode
// one just after its default-mode counterpart, then the history's, ordered,
// the inbox, then the brokers'.
func knownScenarios() []string {
	var known []string
	for _, s := range AllScenarios {
		known = append(known, s)
		if i := slices.Index(walPairs, s); i >= 0 {
			known = append(known, walPairs[i+1])
		}
	}
	return slices.Concat(known, HistoryScenarios, []string{ScenarioOrdered, ScenarioInbox, ScenarioSources}, BrokerScenarios)
}

// walPairs are the scenarios "wal" stands for, in pairs of default mode and
// WAL mode.
var walPairs = []string{ScenarioDrain, ScenarioDrainWAL, ScenarioLatency, ScenarioLatencyWAL, ScenarioWrite, ScenarioWriteWAL}

// BrokerScenarios drain through a broker sink and need their broker besides
// the database (a server, or for kafka in a build with -tags kfake its
// in-memory cluster in process); they run only when named, after
// AllScenarios.
var BrokerScenarios = []string{ScenarioNATS, ScenarioAMQP, ScenarioKafka}

// HistoryScenarios are the measures of the outbox's history (retention,
// partitions, replay): bloat, retention and replay. They run only when
// named; "history" in Config.Scenarios stands for them.
var HistoryScenarios = []string{ScenarioBloat, ScenarioRetention, ScenarioReplay}

// Defaults of Config, and their --quick counterparts.
const (
	DrainEventsDefault   = 200_000
	DrainEventsQuick     = 20_000
	WebhookEventsDefault = 100_000
	WebhookEventsQuick   = 10_000
	ScaleSmallDefault    = 10_000
	ScaleLargeDefault    = 1_000_000
	ScaleLargeQuick      = 100_000
	ScalingEventsDefault = 200_000
	ScalingEventsQuick   = 20_000
	DurationDefault      = 10 * time.Second
	DurationQuick        = 3 * time.Second
	ClientsDefault       = 8
	// InboxClientsDefault is the webhook sink's default concurrency: a
	// relay sends that many requests at once.
	InboxClientsDefault = 64
	BrokerEventsDefault = 100_000
	BrokerEventsQuick   = 10_000
	NATSURLDefault      = "nats://127.0.0.1:4222"
	AMQPURLDefault      = "amqp://guest:guest@127.0.0.1:5672/"
	// BloatEventsDefault is the backlog of each drain of bloat: the
	// goal's 1,000,000.
	BloatEventsDefault = 1_000_000
	BloatEventsQuick   = 20_000
	// RetentionEventsDefault is the delivered events retention removes
	// from each outbox. The goal is set for 10,000,000: the report
	// extrapolates to it from the events measured.
	RetentionEventsDefault = 1_000_000
	RetentionEventsQuick   = 20_000
	// RetentionPartitionDefault is the partitions' interval of retention's
	// partitioned outbox: the shortest postbox migrate --partition-interval
	// takes, so that the backlog, written at the bench's pace (about
	// 100,000 events a second here), fills a few partitions, as a day's
	// events fill one in production, rather than one per few seconds.
	// The measure waits for the last one's range to end.
	RetentionPartitionDefault = time.Minute
	// ReplayEventsDefault is the backlog replay drains, then replays:
	// the goal's 1,000,000.
	ReplayEventsDefault = 1_000_000
	ReplayEventsQuick   = 20_000
	// OrderedEventsDefault is the backlog of each drain of ordered.
	OrderedEventsDefault = 100_000
	OrderedEventsQuick   = 10_000
	// OrderedAggregatesDefault is how many aggregates the backlog of
	// ordered is spread over: the goal is set for 1,000 and more.
	OrderedAggregatesDefault = 1_000
	// SourcesCountDefault is how many sources the sources scenario runs
	// in one `postbox relay --sources` process.
	SourcesCountDefault = 100
	// SourcesEventsDefault is the backlog of each drain of sources'
	// many_ratio phase: all of it in one source, then a share of it in
	// each of the sources.
	SourcesEventsDefault = 100_000
	SourcesEventsQuick   = 10_000
	// SourcesBacklogDefault is the backlog one source drains in the
	// trickle phase while the others get their trickle.
	SourcesBacklogDefault = 500_000
	SourcesBacklogQuick   = 50_000
	// SourcesPerSecondDefault is the trickle of each source: one-event
	// transactions a second.
	SourcesPerSecondDefault = 10
	// SourcesWindowDefault is how long each measured window of the
	// trickle phase lasts.
	SourcesWindowDefault = 20 * time.Second
	SourcesWindowQuick   = 5 * time.Second
)

// Defaults of the list fields of Config.
var (
	RatesDefault       = []int{200, 2000}
	InstancesDefault   = []int{1, 2, 4}
	ConcurrencyDefault = []int{16, 64, 256}
)

// Config is what a run measures, and where. Only DB is required; zero
// fields take their defaults (their --quick ones when Quick is set).
type Config struct {
	// DB is the database: postgres://... (scratch schemas in it),
	// sqlite:PATH (scratch files beside PATH) or mysql://... (scratch
	// databases on its MariaDB or MySQL server).
	DB string
	// Scenarios to run, in the order of AllScenarios. Default
	// DefaultScenarios.
	Scenarios []string
	// DrainEvents is the backlog of drain-noop (DrainEventsDefault).
	DrainEvents int
	// WebhookEvents is the backlog of webhook (WebhookEventsDefault).
	WebhookEvents int
	// ScaleSmall and ScaleLarge are the two backlogs of scale
	// (ScaleSmallDefault, ScaleLargeDefault).
	ScaleSmall, ScaleLarge int
	// ScalingEvents is the backlog of each drain of scaling
	// (ScalingEventsDefault).
	ScalingEvents int
	// BloatEvents is the backlog of each drain of bloat
	// (BloatEventsDefault).
	BloatEvents int
	// RetentionEvents is how many delivered events retention removes from
	// each outbox (RetentionEventsDefault).
	RetentionEvents int
	// RetentionPartition is the interval of the partitions of retention's
	// partitioned outbox (RetentionPartitionDefault).
	RetentionPartition time.Duration
	// ReplayEvents is the backlog that replay drains, then replays
	// (ReplayEventsDefault).
	ReplayEvents int
	// OrderedEvents is the backlog of each drain of ordered
	// (OrderedEventsDefault).
	OrderedEvents int
	// OrderedAggregates is how many aggregates ordered's backlog is spread
	// over, round-robin: event g belongs to aggregate order-(g mod
	// OrderedAggregates) (OrderedAggregatesDefault).
	OrderedAggregates int
	// SourcesCount is how many sources the sources scenario runs in one
	// `postbox relay --sources` process, at least 3 (SourcesCountDefault).
	SourcesCount int
	// SourcesEvents is the backlog of each drain of sources' many_ratio
	// phase (SourcesEventsDefault).
	SourcesEvents int
	// SourcesBacklog is the backlog one source drains while the others
	// get their trickle (SourcesBacklogDefault).
	SourcesBacklog int
	// SourcesPerSecond is each trickling source's one-event transactions
	// a second (SourcesPerSecondDefault).
	SourcesPerSecond int
	// SourcesWindow is how long each measured window of the trickle and
	// outage phases lasts (SourcesWindowDefault).
	SourcesWindow time.Duration
	// AMQPURL is the RabbitMQ server of amqp, amqp://USER:PASS@HOST:PORT/
	// (AMQPURLDefault).
	AMQPURL string
	// Duration is how long latency runs at each rate, and each run of
	// write-overhead lasts (DurationDefault).
	Duration time.Duration
	// Rates are the commit rates of latency, events/s (RatesDefault).
	Rates []int
	// Clients are the concurrent writers of write-overhead
	// (ClientsDefault).
	Clients int
	// InboxClients are the concurrent senders of inbox, and its
	// concurrent pgx clients (InboxClientsDefault).
	InboxClients int
	// Instances and Concurrency are the `postbox relay` processes and the
	// --concurrency of each that scaling combines (InstancesDefault,
	// ConcurrencyDefault).
	Instances   []int
	Concurrency []int
	// ReceiverLatency is how long the local webhook receiver of webhook
	// and scaling takes to answer, to stand for a remote endpoint
	// (default 0: at once). The receivers of latency and scale always
	// answer at once.
	ReceiverLatency time.Duration
	// BrokerEvents is the backlog of each broker scenario: nats, amqp,
	// kafka (BrokerEventsDefault).
	BrokerEvents int
	// NATSURL is the NATS server of the nats scenario, nats://HOST:PORT
	// with JetStream, without a query (NATSURLDefault).
	NATSURL string
	// KafkaBrokers are the seed brokers, HOST:PORT, of the kafka
	// scenario's cluster (plaintext, no SASL): it creates topics of its own
	// there and deletes them at the end. Empty: franz-go's in-memory
	// cluster in the bench's process, in a build with -tags kfake only; in
	// another build a run that includes kafka fails before it starts.
	KafkaBrokers []string
	// Quick makes the defaults small enough for a run of under a minute.
	Quick bool
	// Keep leaves the scratch outboxes in place.
	Keep bool
	// Progress receives a line for every step (default: nowhere).
	Progress io.Writer
	// Command returns the command that runs postbox with args, the
	// subcommand first: `postbox relay` for the scenarios that run it as a
	// child process, `postbox endpoints add` for the endpoints scenario's
	// endpoints. The bench sets its Stderr and its environment (the
	// variables that postbox reads flags from are left out, so every flag
	// not in args is at its default). Default: this executable (postbox
	// itself when run as "postbox bench") with args.
	Command func(ctx context.Context, args ...string) *exec.Cmd
}

// withDefaults fills the zero fields and validates the rest.
func (c Config) withDefaults() (Config, error) {
	quick := func(full, quick int) int {
		if c.Quick {
			return quick
		}
		return full
	}
	setDefault(&c.DrainEvents, quick(DrainEventsDefault, DrainEventsQuick))
	setDefault(&c.WebhookEvents, quick(WebhookEventsDefault, WebhookEventsQuick))
	setDefault(&c.ScaleSmall, ScaleSmallDefault)
	setDefault(&c.ScaleLarge, quick(ScaleLargeDefault, ScaleLargeQuick))
	setDefault(&c.ScalingEvents, quick(ScalingEventsDefault, ScalingEventsQuick))
	setDefault(&c.BloatEvents, quick(BloatEventsDefault, BloatEventsQuick))
	setDefault(&c.RetentionEvents, quick(RetentionEventsDefault, RetentionEventsQuick))
	setDefault(&c.ReplayEvents, quick(ReplayEventsDefault, ReplayEventsQuick))
	setDefault(&c.OrderedEvents, quick(OrderedEventsDefault, OrderedEventsQuick))
	setDefault(&c.OrderedAggregates, OrderedAggregatesDefault)
	setDefault(&c.SourcesCount, SourcesCountDefault)
	setDefault(&c.SourcesEvents, quick(SourcesEventsDefault, SourcesEventsQuick))
	setDefault(&c.SourcesBacklog, quick(SourcesBacklogDefault, SourcesBacklogQuick))
	setDefault(&c.SourcesPerSecond, SourcesPerSecondDefault)
	if c.SourcesWindow == 0 {
		c.SourcesWindow = SourcesWindowDefault
		if c.Quick {
			c.SourcesWindow = SourcesWindowQuick
		}
	}
	if c.RetentionPartition == 0 {
		c.RetentionPartition = RetentionPartitionDefault
	}
	setDefault(&c.Clients, ClientsDefault)
	setDefault(&c.InboxClients, InboxClientsDefault)
	if c.AMQPURL == "" {
		c.AMQPURL = AMQPURLDefault
	}
	setDefault(&c.BrokerEvents, quick(BrokerEventsDefault, BrokerEventsQuick))
	if c.NATSURL == "" {
		c.NATSURL = NATSURLDefault
	}
	if c.Duration == 0 {
		c.Duration = DurationDefault
		if c.Quick {
			c.Duration = DurationQuick
		}
	}
	c.Rates = orDefault(c.Rates, RatesDefault)
	c.Instances = orDefault(c.Instances, InstancesDefault)
	c.Concurrency = orDefault(c.Concurrency, ConcurrencyDefault)
	if c.Command == nil {
		exe, err := os.Executable()
		if err != nil {
			return c, fmt.Errorf("bench: finding this program to run `postbox relay`: %w", err)
		}
		c.Command = func(ctx context.Context, args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, exe, args...)
		}
	}

	var scenarios []string
	for _, s := range c.Scenarios {
		switch s {
		case "all":
			scenarios = append(scenarios, DefaultScenarios...)
		case "wal":
			scenarios = append(scenarios, walPairs...)
		case "history":
			scenarios = append(scenarios, HistoryScenarios...)
		default:
			scenarios = append(scenarios, s)
		}
	}
	if len(scenarios) == 0 {
		scenarios = DefaultScenarios
	}
	known := knownScenarios()
	c.Scenarios = nil
	for _, s := range known { // in the order they run
		if slices.Contains(scenarios, s) {
			c.Scenarios = append(c.Scenarios, s)
		}
	}
	for _, s := range scenarios {
		if !slices.Contains(known, s) {
			return c, fmt.Errorf("bench: unknown scenario %q (want %v, all, wal or history)", s, known)
		}
	}

	if slices.Contains(c.Scenarios, ScenarioKafka) && len(c.KafkaBrokers) == 0 {
		// Refused here rather than when its turn comes, after the
		// scenarios before it ran for minutes.
		if _, err := inProcessKafka(); err != nil {
			return c, err
		}
	}

	for name, v := range map[string]int{
		"DrainEvents": c.DrainEvents, "WebhookEvents": c.WebhookEvents, "ScaleSmall": c.ScaleSmall,
		"ScaleLarge": c.ScaleLarge, "ScalingEvents": c.ScalingEvents, "Clients": c.Clients, "InboxClients": c.InboxClients, "BrokerEvents": c.BrokerEvents,
		"BloatEvents": c.BloatEvents, "RetentionEvents": c.RetentionEvents, "ReplayEvents": c.ReplayEvents,
		"OrderedEvents": c.OrderedEvents, "OrderedAggregates": c.OrderedAggregates,
		"SourcesEvents": c.SourcesEvents, "SourcesBacklog": c.SourcesBacklog, "SourcesPerSecond": c.SourcesPerSecond,
	} {
		if v < 1 {
			return c, fmt.Errorf("bench: Config.%s %d: must be positive", name, v)
		}
	}
	for name, list := range map[string][]int{"Rates": c.Rates, "Instances": c.Instances, "Concurrency": c.Concurrency} {
		for _, v := range list {
			if v < 1 {
				return c, fmt.Errorf("bench: Config.%s %v: every value must be positive", name, list)
			}
		}
	}
	if c.RetentionPartition < time.Second {
		return c, fmt.Errorf("bench: Config.RetentionPartition %v: at least 1s", c.RetentionPartition)
	}
	if c.ReceiverLatency < 0 {
		return c, fmt.Errorf("bench: Config.ReceiverLatency %v is negative", c.ReceiverLatency)
	}
	if c.SourcesCount < 3 {
		return c, fmt.Errorf("bench: Config.SourcesCount %d: at least 3 (one source alone in a database, the others in two more)", c.SourcesCount)
	}
	if c.SourcesWindow < time.Second {
		return c, fmt.Errorf("bench: Config.SourcesWindow %v: at least 1s", c.SourcesWindow)
	}
	if c.Duration < 100*time.Millisecond {
		return c, fmt.Errorf("bench: Config.Duration %v: at least 100ms", c.Duration)
	}
	return c, nil
}

func (c Config) params() Params {
	return Params{
		Scenarios: c.Scenarios, DrainEvents: c.DrainEvents, WebhookEvents: c.WebhookEvents,
		ScaleEvents: []int{c.ScaleSmall, c.ScaleLarge}, ScalingEvents: c.ScalingEvents,
		DurationSeconds: c.Duration.Seconds(), Rates: c.Rates, Clients: c.Clients, InboxClients: c.InboxClients,
		Instances: c.Instances, Concurrency: c.Concurrency,
		ReceiverLatencyMs: float64(c.ReceiverLatency) / float64(time.Millisecond),
		BrokerEvents:      c.BrokerEvents,
		BloatEvents:       c.BloatEvents, RetentionEvents: c.RetentionEvents, ReplayEvents: c.ReplayEvents,
		RetentionPartitionSeconds: c.RetentionPartition.Seconds(),
		OrderedEvents:             c.OrderedEvents, OrderedAggregates: c.OrderedAggregates,
		SourcesCount: c.SourcesCount, SourcesEvents: c.SourcesEvents, SourcesBacklog: c.SourcesBacklog,
		SourcesPerSecond: c.SourcesPerSecond, SourcesWindowSeconds: c.SourcesWindow.Seconds(),
	}
}

func setDefault(field *int, def int) {
	if *field == 0 {
		*field = def
	}
}

func orDefault(v, def []int) []int {
	if len(v) == 0 {
		return slices.Clone(def)
	}
	return v
}
