package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/cmd/postbox/internal/bench"
)

func setupBench(fs *flag.FlagSet) func(context.Context) error {
	var (
		db          = fs.String("db", "", "database: postgres://... (scratch schemas in it), sqlite:PATH (scratch files beside PATH) or mysql://user:pass@host:3306/ (MariaDB or MySQL: scratch databases on that server; drain-noop and the scenarios without PostgreSQL's features)")
		scenarios   = fs.String("scenarios", "all", "comma-separated scenarios: "+strings.Join(bench.AllScenarios, ", ")+"; all is the default set ("+strings.Join(bench.DefaultScenarios, ", ")+"); scaling and endpoints run when named, and so do "+bench.ScenarioInbox+" (signed webhooks into the inbox's handler against bare pgx transactions), WAL mode, "+strings.Join(bench.WALScenarios, ", ")+" (wal: these and their default-mode counterparts), the history's, "+strings.Join(bench.HistoryScenarios, ", ")+" (history: these three), "+bench.ScenarioOrdered+" (ordered against unordered drains of a backlog spread over --ordered-aggregates aggregates: the relay library to a no-op sink, and postbox relay with and without --ordered to a local webhook receiver; PostgreSQL and SQLite), "+bench.ScenarioSources+" (postbox relay --sources over --sources-count sources in three scratch databases it creates and drops: the drain rate of many sources against one, a trickle's commit → delivery beside one source's --sources-backlog, and while one source's database is unreachable; PostgreSQL only), and the brokers: "+strings.Join(bench.BrokerScenarios, ", "))
		events      = fs.Int("events", 0, fmt.Sprintf("backlog of drain-noop (and the burst ending latency-wal), webhook, each scaling drain, each broker scenario, each drain of bloat, replay's, each drain of ordered and each drain of sources, all in one source, then spread over --sources-count (default %d, %d, %d, %d, %d, %d, %d and %d; --quick %d, %d, %d, %d, %d, %d, %d and %d); endpoints delivers as many requests as webhook: a tenth as many events to each of its 10 endpoints (a twentieth in its isolation phases)", bench.DrainEventsDefault, bench.WebhookEventsDefault, bench.ScalingEventsDefault, bench.BrokerEventsDefault, bench.BloatEventsDefault, bench.ReplayEventsDefault, bench.OrderedEventsDefault, bench.SourcesEventsDefault, bench.DrainEventsQuick, bench.WebhookEventsQuick, bench.ScalingEventsQuick, bench.BrokerEventsQuick, bench.BloatEventsQuick, bench.ReplayEventsQuick, bench.OrderedEventsQuick, bench.SourcesEventsQuick))
		orderedAggs = fs.Int("ordered-aggregates", bench.OrderedAggregatesDefault, fmt.Sprintf("aggregates the ordered scenario's backlog is spread over, round-robin (its goal, ordered at least 0.7 of unordered, is judged with %d and more)", bench.OrderedAggregatesDefault))
		scaleEvents = fs.String("scale-events", "", fmt.Sprintf("the small and large backlogs of scale, SMALL,LARGE (default %d,%d; --quick %d,%d)", bench.ScaleSmallDefault, bench.ScaleLargeDefault, bench.ScaleSmallDefault, bench.ScaleLargeQuick))
		duration    = fs.Duration("duration", 0, fmt.Sprintf("how long latency runs at each rate, and each write-overhead run and each side of inbox lasts (default %s; --quick %s)", bench.DurationDefault, bench.DurationQuick))
		rates       = fs.String("rates", "", "commit rates of latency, events/s (default "+joinInts(bench.RatesDefault)+")")
		clients     = fs.Int("clients", bench.ClientsDefault, "concurrent clients of write-overhead")
		inboxClient = fs.Int("inbox-clients", bench.InboxClientsDefault, "concurrent senders of inbox's signed requests, and its concurrent pgx clients (both share one pool of the size the URL gives, pool_max_conns)")
		instances   = fs.String("instances", "", "postbox relay processes that scaling runs at once (default "+joinInts(bench.InstancesDefault)+")")
		concurrency = fs.String("concurrency", "", "--concurrency values of postbox relay that scaling tries (default "+joinInts(bench.ConcurrencyDefault)+")")
		amqpURL     = fs.String("amqp-url", bench.AMQPURLDefault, "RabbitMQ server of the amqp scenario (it declares, then deletes, an exchange and a quorum queue there)")
		retention   = fs.Int("retention-events", 0, fmt.Sprintf("delivered events the retention scenario removes from each outbox (default %d; --quick %d); its figures are extrapolated to the goal's 10,000,000", bench.RetentionEventsDefault, bench.RetentionEventsQuick))
		recvLatency = fs.Duration("receiver-latency", 0, "how long the webhook receiver of webhook and scaling takes to answer, to stand for a remote endpoint")
		srcCount    = fs.Int("sources-count", bench.SourcesCountDefault, "sources of the sources scenario, in one postbox relay --sources process: one alone in a database, the others in two more, half each (at least 3)")
		srcBacklog  = fs.Int("sources-backlog", 0, fmt.Sprintf("backlog one source of the sources scenario drains while the others get their trickle (default %d; --quick %d)", bench.SourcesBacklogDefault, bench.SourcesBacklogQuick))
		srcPerSec   = fs.Int("source-events-per-second", bench.SourcesPerSecondDefault, "the sources scenario's trickle: one-event transactions a second into each source but one")
		srcWindow   = fs.Duration("sources-window", 0, fmt.Sprintf("how long each measured window of the sources scenario's trickle lasts: alone, beside the backlog (at most), during the outage; and the bare commits (default %s; --quick %s)", bench.SourcesWindowDefault, bench.SourcesWindowQuick))
		quick       = fs.Bool("quick", false, "small sizes: the default scenarios finish in under a minute")
		asJSON      = fs.Bool("json", false, "print the report as JSON")
		keep        = fs.Bool("keep", false, "keep the scratch schemas or files")
		natsURL     = fs.String("nats-url", bench.NATSURLDefault, "NATS server with JetStream of the nats scenario")
		kafkaSeeds  = fs.String("kafka-brokers", "", "seed brokers of the kafka scenario's Kafka cluster, `HOST:PORT`[,...], plaintext (it creates, then deletes, three topics there), e.g. 127.0.0.1:9092 of go run ./examples/kafka/devkafka; without it the scenario needs a postbox built with -tags kfake, which runs franz-go's in-memory cluster in process")
	)
	return func(ctx context.Context) error {
		if err := positive(fs, "clients", "inbox-clients", "ordered-aggregates", "sources-count", "source-events-per-second"); err != nil {
			return err
		}
		if err := notNegative(fs, "events", "retention-events", "duration", "receiver-latency", "sources-backlog", "sources-window"); err != nil {
			return err
		}
		if *srcCount < 3 {
			return fmt.Errorf("%w: --sources-count %d: at least 3 (one source alone in a database, the others in two more)", errUsage, *srcCount)
		}
		if *srcWindow != 0 && *srcWindow < time.Second {
			return fmt.Errorf("%w: --sources-window %s: at least 1s", errUsage, *srcWindow)
		}
		if err := required("db", *db); err != nil {
			return err
		}
		cfg := bench.Config{
			DB: *db, Scenarios: splitList(*scenarios), DrainEvents: *events, WebhookEvents: *events,
			ScalingEvents: *events, Duration: *duration, Clients: *clients, InboxClients: *inboxClient, ReceiverLatency: *recvLatency,
			BrokerEvents: *events, BloatEvents: *events, RetentionEvents: *retention, ReplayEvents: *events, OrderedEvents: *events, OrderedAggregates: *orderedAggs,
			SourcesCount: *srcCount, SourcesEvents: *events, SourcesBacklog: *srcBacklog, SourcesPerSecond: *srcPerSec, SourcesWindow: *srcWindow, NATSURL: *natsURL, KafkaBrokers: splitList(*kafkaSeeds), AMQPURL: *amqpURL, Quick: *quick, Keep: *keep, Progress: os.Stderr,
		}
		var err error
		if cfg.Rates, err = parseInts("rates", *rates); err != nil {
			return err
		}
		if cfg.Instances, err = parseInts("instances", *instances); err != nil {
			return err
		}
		if cfg.Concurrency, err = parseInts("concurrency", *concurrency); err != nil {
			return err
		}
		sizes, err := parseInts("scale-events", *scaleEvents)
		if err != nil {
			return err
		}
		switch len(sizes) {
		case 0:
		case 2:
			cfg.ScaleSmall, cfg.ScaleLarge = sizes[0], sizes[1]
		default:
			return fmt.Errorf("%w: --scale-events %q: want SMALL,LARGE", errUsage, *scaleEvents)
		}
		rep, err := bench.Run(ctx, cfg)
		if err != nil {
			return err
		}
		if *asJSON {
			return rep.WriteJSON(os.Stdout)
		}
		return rep.WriteTable(os.Stdout)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseInts(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: --%s %q: want positive integers separated by commas", errUsage, flagName, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
