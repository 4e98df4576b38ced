package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/kafka"
)

const (
	// kafkaRatioGoal is the goal of the kafka scenario: the drain through
	// the Kafka sink / the lower of its two limits.
	kafkaRatioGoal = 0.5
	// kafkaBrokers and kafkaPartitions shape the bench's in-process
	// cluster (-tags kfake); kafkaPartitions is the partition count of the
	// topics the bench creates in a cluster of Config.KafkaBrokers too.
	kafkaBrokers    = 3
	kafkaPartitions = 6
	// kafkaAdminTimeout bounds creating and deleting the scenario's topics
	// in a cluster of Config.KafkaBrokers.
	kafkaAdminTimeout = 30 * time.Second
	// kafkaOffsetsEvery is how often the records of the relay's drain are
	// counted (from the topic's end offsets, one request each time).
	kafkaOffsetsEvery = 50 * time.Millisecond
	// kafkaConcurrency is the --concurrency of the scenario's second
	// drain: each publisher of the relay waits for its acknowledgement,
	// so the default's drain rate is bound by concurrency / latency.
	kafkaConcurrency = 256
)

// kafkaCluster is the Kafka cluster of the kafka scenario, its topics
// made.
type kafkaCluster struct {
	// brokers are its seed brokers, HOST:PORT.
	brokers []string
	// what names it in the progress and the measures.
	what string
	// close lets it go: stops the in-process cluster, or deletes the
	// scenario's topics from the cluster of Config.KafkaBrokers.
	close func(context.Context) error
}

// openKafka returns the scenario's cluster with topics in it: the cluster
// of brokers, where it creates them, or with no brokers the in-process
// cluster of a build with -tags kfake (inProcessKafka), seeded with them.
func openKafka(ctx context.Context, brokers, topics []string) (kafkaCluster, error) {
	if len(brokers) == 0 {
		start, err := inProcessKafka()
		if err != nil {
			return kafkaCluster{}, err
		}
		return start(ctx, topics)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return kafkaCluster{}, fmt.Errorf("kafka client for --kafka-brokers: %w", err)
	}
	adm := kadm.NewClient(cl)
	create, cancel := context.WithTimeout(ctx, kafkaAdminTimeout)
	defer cancel()
	// Replication factor -1: the cluster's default.replication.factor,
	// which is what its users' topics get.
	resp, err := adm.CreateTopics(create, kafkaPartitions, -1, nil, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		cl.Close()
		return kafkaCluster{}, fmt.Errorf("create the topics %v at %s (see --kafka-brokers): %w", topics, strings.Join(brokers, ","), err)
	}
	return kafkaCluster{
		brokers: brokers,
		what:    "the cluster of --kafka-brokers",
		close: func(ctx context.Context) error {
			defer cl.Close()
			resp, err := adm.DeleteTopics(ctx, topics...)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				return fmt.Errorf("delete the topics %v: %w", topics, err)
			}
			return nil
		},
	}, nil
}

// runKafka drains a backlog (Config.BrokerEvents) through `postbox relay
// --sink kafka://...` as a child process, with its defaults (then again
// with --concurrency kafkaConcurrency), to a Kafka cluster: the brokers of
// Config.KafkaBrokers, where it creates topics of six partitions of its
// own and deletes them at the end; or, without them and in a build with
// -tags kfake, a kfake cluster in the bench's process (three brokers,
// topics of six partitions, acknowledging records without keeping them,
// so that its memory stays out of the figures). Side by side with its two
// limits in the same run: franz-go producing the same records (the sink's
// own layout) directly to the same cluster with the same acknowledgements
// (acks=all, idempotent), all in flight at once; and the relay library's
// drain of an identical backlog to a no-op sink (drain-noop's measure).
// Each drain of the relay has a topic of its own; its published count is
// the sum of the topic's end offsets.
func runKafka(ctx context.Context, e *env, p *progress) (err error) {
	n := e.cfg.BrokerEvents
	directTopic := e.rep.Run + "_direct"
	cluster, err := openKafka(ctx, e.cfg.KafkaBrokers, []string{directTopic, kafkaRelayTopic(e.rep.Run, 0), kafkaRelayTopic(e.rep.Run, kafkaConcurrency)})
	if err != nil {
		return err
	}
	defer func() {
		closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), kafkaAdminTimeout)
		defer cancel()
		err = errors.Join(err, cluster.close(closing))
	}()
	brokers := cluster.brokers
	p.printf("Kafka: %s, brokers %s", cluster.what, strings.Join(brokers, ","))

	noop, err := e.noopDrain(ctx, p, "kafka_noop", n)
	if err != nil {
		return err
	}
	direct, err := kafkaDirect(ctx, brokers, directTopic, n)
	if err != nil {
		return err
	}
	p.printf("franz-go produced %d records in %s: %.0f records/s", n, direct.Round(time.Millisecond), rate(n, direct))

	var relayed [2]float64 // with the default --concurrency, and kafkaConcurrency
	for i, concurrency := range []int{0, kafkaConcurrency} {
		sc, err := e.filled(ctx, p, "kafka_"+strconv.Itoa(concurrency), n)
		if err != nil {
			return err
		}
		topic := kafkaRelayTopic(e.rep.Run, concurrency)
		sinkURL := "kafka://" + strings.Join(brokers, ",") + "?topic=" + topic
		args := append(sc.relayFlags(), "--sink", sinkURL, "--log-level", "warn")
		what := "`postbox relay --sink kafka://...`"
		if concurrency > 0 {
			args = append(args, "--concurrency", strconv.Itoa(concurrency))
			what += " --concurrency " + strconv.Itoa(concurrency)
		}
		published, closeCounter, err := endOffsetCounter(brokers, topic)
		if err != nil {
			return err
		}
		d, err := e.childDrain(ctx, p, what, sc, args, published, n)
		closeCounter()
		if err != nil {
			return err
		}
		if err := e.release(ctx, sc); err != nil {
			return err
		}
		relayed[i] = rate(n, d.elapsed)
		p.printf("%s published %d events in %s: %.0f events/s (%.0f/s from 10%% to 90%%)",
			what, n, d.elapsed.Round(time.Millisecond), relayed[i], d.steady)
	}

	limit := min(rate(n, direct), noop)
	r := e.rep
	r.record(Measure{Key: "kafka.sink", Scenario: ScenarioKafka, Relay: RelayProcess, Unit: UnitEventsPerSec, Value: relayed[0],
		Name: "drain through the Kafka sink to " + cluster.what + ", acks=all, defaults"})
	r.record(Measure{Key: "kafka.sink_concurrency", Scenario: ScenarioKafka, Relay: RelayProcess, Unit: UnitEventsPerSec, Value: relayed[1],
		Name: fmt.Sprintf("same, --concurrency %d", kafkaConcurrency)})
	r.addNoRelay(ScenarioKafka, "kafka.franz_go", "franz-go producing the same records to the same cluster, acks=all", rate(n, direct), UnitEventsPerSec, nil)
	r.record(Measure{Key: "kafka.noop", Scenario: ScenarioKafka, Relay: RelayInProcess, Unit: UnitEventsPerSec, Value: noop,
		Name: "relay library, no-op sink, defaults (drain-noop)"})
	r.record(Measure{Key: "kafka.ratio", Scenario: ScenarioKafka, Relay: RelayProcess, Unit: UnitRatio, Value: relayed[0] / limit,
		Name: "Kafka sink / min(franz-go, no-op drain)", Goal: atLeast(kafkaRatioGoal)})
	return nil
}

// kafkaRelayTopic is the topic of the relay's drain with --concurrency
// concurrency (0: the default) in the run named run. Its name holds
// underscores only, no dots: Kafka warns of topics with both, whose
// metric names may collide.
func kafkaRelayTopic(run string, concurrency int) string {
	return run + "_relay_" + strconv.Itoa(concurrency)
}

// noopDrain drains a fresh backlog of n events to a no-op sink with the
// relay library in process, and returns its rate.
func (e *env) noopDrain(ctx context.Context, p *progress, label string, n int) (float64, error) {
	sc, err := e.filled(ctx, p, label, n)
	if err != nil {
		return 0, err
	}
	sk := &noopSink{}
	d, err := libraryDrain(ctx, p, "the relay library to a no-op sink", sc.outbox(), relay.Config{Sink: sk}, sk.n.Load, n)
	if err != nil {
		return 0, err
	}
	if err := e.release(ctx, sc); err != nil {
		return 0, err
	}
	p.printf("the relay library drained %d events to a no-op sink in %s: %.0f events/s", n, d.Round(time.Millisecond), rate(n, d))
	return rate(n, d), nil
}

// kafkaDirect produces n records laid out as the Kafka sink lays out the
// backlog's events, all at once, with franz-go's defaults (acks=all,
// idempotent), and returns the time until the last was acknowledged.
func kafkaDirect(ctx context.Context, brokers []string, topic string, n int) (time.Duration, error) {
	layout, err := kafka.New(ctx, kafka.Config{Brokers: brokers, Topic: topic})
	if err != nil {
		return 0, err
	}
	records := make([]*kgo.Record, n)
	for i := range records {
		records[i] = layout.Record(&sink.Message{Event: orderEvent(int64(i + 1)), Attempt: 1})
	}
	layout.Close()

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	wg.Add(n)
	for _, rec := range records {
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("franz-go produce: %w", err)
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	return time.Since(start), firstErr
}

// endOffsetCounter returns a count of the records in topic: the sum of its
// partitions' end offsets, read at most every kafkaOffsetsEvery.
func endOffsetCounter(brokers []string, topic string) (count func() int64, close func(), err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, nil, err
	}
	adm := kadm.NewClient(cl)
	var (
		last   int64
		readAt time.Time
	)
	count = func() int64 {
		if time.Since(readAt) < kafkaOffsetsEvery {
			return last
		}
		readAt = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offsets, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return last
		}
		var sum int64
		offsets.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		last = sum
		return last
	}
	return count, cl.Close, nil
}

// childDrain runs `postbox relay` with args until published() reaches n
// and sc's backlog is settled, and reports how the drain went.
func (e *env) childDrain(ctx context.Context, p *progress, what string, sc scratch, args []string, published func() int64, n int) (_ drained, err error) {
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() { err = relayExit(parent, ctx, err) }()
	start := time.Now()
	rp, err := e.startRelayProcess(ctx, p, args, cancel)
	if err != nil {
		return drained{}, err
	}
	defer func() { _, _ = rp.stop() }()
	d, err := waitDrained(ctx, p, what, sc.outbox(), published, n, start)
	if err != nil {
		return drained{}, err
	}
	if _, err := rp.stop(); err != nil {
		return drained{}, err
	}
	return d, nil
}
