// Package kafka is the inbox's Kafka consumer: it reads topics as a
// consumer group, fed by the relay's Kafka sink (package sink/kafka) or by
// Debezium's Outbox Event Router, applies each event once through
// Config.Process (usually an Inbox's Processor, with the application's
// handler or a Router's Apply), and settles each record by the outcome
// (inbox.VerdictOf):
//
//	c, err := kafka.New(kafka.Config{Brokers: brokers, Group: "shipping", Topics: []string{"outbox.event.order"}, Process: ib.Processor(routes.Apply)})
//	if err != nil {
//		return err
//	}
//	return c.Run(ctx) // until ctx ends
//
// Packages inbox/nats and inbox/amqp have the same shape, the same Config
// fields for the same things, and settle alike; postboxtest/consumertest
// is the suite all three pass.
//
// # Settling
//
//   - Processed, or a duplicate: done, its offset committed only after
//     Process has returned, that is after the inbox transaction has
//     committed. A record whose commit is lost comes back, and the inbox
//     answers it as a duplicate.
//   - A temporary failure (the handler failed and rolled back, the event
//     came before its predecessor or is claimed elsewhere, the database is
//     down): processed again after a delay that grows with its tries
//     (inbox.RedeliveryDelay, within Config.RedeliveryMin and
//     RedeliveryMax), for as long as it fails.
//   - Never processable (not a postbox event, a Postbox-* header no sender
//     writes, a payload that is not JSON, an event the handler rejects with
//     inbox.Reject, a sequence number another event took): discarded, with
//     a warning giving the event id and the reason; it is never processed
//     again.
//
// A record fails alone: the other partitions go on. Config.Concurrency
// records are processed at once, at most one per partition, in the
// partition's order; as the sink keys records by aggregate id, the events
// of one aggregate are applied in their order, and ordered events
// (inbox.Event.Seq, the Postbox-Sequence header) need no redelivery. A
// broker message carries no signature (see "What it trusts").
//
// When Run's context ends, it takes no more records; those in progress
// may finish and be committed for Config.ShutdownTimeout, then their
// processing is cancelled, rolls back, and they are read again by the
// group's next consumer. Metrics of the processing come from the inbox's
// own observer (inbox.WithObserver).
//
// # What is particular to Kafka
//
//   - Offsets are committed per partition, never past a record that has
//     not finished: at the end of each fetched batch, before each
//     redelivery wait, and when a partition stops (Run's stop, a
//     rebalance); after a crash, the records since the last commit come
//     again, as duplicates.
//   - A failed record is processed again in place, by this consumer, so
//     the records behind it in its partition wait for it, and a discarded
//     one is skipped (its offset committed past), since Kafka has no
//     redelivery or dead-letter queue of its own.
//   - The delivery count is this consumer's own count of tries of the
//     record, from 1; there is no limit on it.
//   - When a rebalance takes partitions away, their records in progress
//     are cancelled at once (they roll back), what was finished is
//     committed, and the new owner starts there.
//   - A record Debezium produced is read too: the event id from its "id"
//     header, and the aggregate id from its key when it has no
//     Postbox-Aggregate-Id header.
//   - Run connects lazily, as franz-go does: brokers that cannot be reached
//     and topics that do not exist yet are logged and waited for.
//
// # What it trusts
//
// A message is trusted because of who could publish it: Kafka messages
// carry no signature, so the consumer relies on the broker's own
// authentication and authorization of publishers, for the payload as for
// the Postbox-* headers it routes and orders on (event type, aggregate,
// Postbox-Sequence) and the event id. Whoever may publish where the
// consumer reads can send any event, with any type or sequence number. So
// let only the relay publish there (Kafka ACLs granting Write on the
// topics to the relay's, or Debezium's, principal alone), and connect with
// TLS.
//
// A Postbox-Metadata-Signature header, if a message carries one, is not
// checked: the relay's broker sinks do not sign, and a signature of the
// headers alone would prove nothing while the body beside it is unsigned.
// Should a broker sink sign messages end to end one day, with the same
// signature.Signer as webhooks, the consumer should verify both the body
// (signature.Verifier.Verify) and the metadata (VerifyMetadata) and refuse
// messages without them, as the webhook handler does.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/inbox/internal/consume"
	"github.com/postbox-go/postbox/internal/kafkalog"
)

// Defaults of the Config fields left zero.
const (
	ConcurrencyDefault     = consume.ConcurrencyDefault
	ShutdownTimeoutDefault = consume.ShutdownTimeoutDefault
)

const (
	// fetchMaxWait bounds an idle fetch, and so how long a resumed
	// partition may wait for its next fetch.
	fetchMaxWait = 500 * time.Millisecond
	// commitTimeout bounds one offset commit.
	commitTimeout = 10 * time.Second
)

// Config configures a Consumer. Brokers, Group, Topics and Process are
// required; a zero field takes its default and a negative one is refused.
type Config struct {
	// Brokers are the seed brokers, HOST:PORT. Required.
	Brokers []string
	// Group is the consumer group: the consumers of one group share the
	// partitions of Topics. Required.
	Group string
	// Topics are consumed from the group's committed offsets, or from
	// their start for a new group. Required.
	Topics []string

	// Process applies one event, usually an Inbox's Processor (Inbox.Process
	// with the application's handler or a Router's Apply); its outcome and
	// error decide how the record is settled (inbox.VerdictOf). It may
	// adjust ev first, for instance set ev.Seq from the payload. It runs
	// for several records at once, and must return soon after its context
	// is cancelled: a rebalance waits for it. Required.
	Process func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error)
	// Concurrency is the most records processed at once, at most one per
	// partition. Default ConcurrencyDefault (16).
	Concurrency int
	// RedeliveryMin and RedeliveryMax bound the delay before a record
	// whose processing failed is processed again (see
	// inbox.RedeliveryDelay). Defaults inbox.RedeliveryMinDefault (1s) and
	// inbox.RedeliveryMaxDefault (5m, or RedeliveryMin when it is more);
	// RedeliveryMin above RedeliveryMax is refused.
	RedeliveryMin, RedeliveryMax time.Duration
	// ShutdownTimeout is how long the records in progress when Run's
	// context ends may still take to be processed; then their processing
	// is cancelled (it rolls back, and they are read again). Default
	// ShutdownTimeoutDefault (10s).
	ShutdownTimeout time.Duration
	// Logger receives a line per discarded record and per failure, with
	// the event id and the reason, commits that failed, and the client's
	// warnings; never payloads. Default slog.Default().
	Logger *slog.Logger

	// Options are more franz-go client options, for TLS
	// (kgo.DialTLSConfig), SASL (kgo.SASL), timeouts. The consumer's own
	// (auto-commit off, blocking rebalances on poll, the partition
	// callbacks) are applied after them and win.
	Options []kgo.Opt
}

// Consumer applies the records of Kafka topics through an inbox, as a
// member of a consumer group; see the package documentation.
type Consumer struct {
	cfg  Config
	s    consume.Settings
	opts []kgo.Opt
	// slots bounds the records processed at once (Config.Concurrency).
	slots chan struct{}

	mu      sync.Mutex
	workers map[topicPartition]*worker
}

type topicPartition struct {
	topic     string
	partition int32
}

// New checks cfg and returns its Consumer; Run connects.
func New(cfg Config) (*Consumer, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, errors.New("inbox/kafka: Config.Brokers is empty")
	case cfg.Group == "":
		return nil, errors.New("inbox/kafka: Config.Group is empty")
	case len(cfg.Topics) == 0:
		return nil, errors.New("inbox/kafka: Config.Topics is empty")
	}
	s, err := consume.Settings{
		Process: cfg.Process, Concurrency: cfg.Concurrency,
		RedeliveryMin: cfg.RedeliveryMin, RedeliveryMax: cfg.RedeliveryMax,
		ShutdownTimeout: cfg.ShutdownTimeout, Logger: cfg.Logger,
	}.Check("inbox/kafka")
	if err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, s: s, slots: make(chan struct{}, s.Concurrency), workers: map[topicPartition]*worker{}}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.WithLogger(kafkalog.New(s.Logger)),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(fetchMaxWait),
	}, cfg.Options...)
	c.opts = append(opts,
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.assigned),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.revoked),
	)
	return c, nil
}

// Run joins the group and processes records until ctx ends, then lets
// those in progress finish (for at most Config.ShutdownTimeout), commits
// what every partition finished, leaves the group and returns nil. It
// returns an error only if the client cannot be made from Config.Options.
// Call it once.
func (c *Consumer) Run(ctx context.Context) error {
	client, err := kgo.NewClient(c.opts...)
	if err != nil {
		return fmt.Errorf("inbox/kafka: %w", err)
	}
	c.s.Logger.Info("inbox/kafka: consumer started", "brokers", strings.Join(c.cfg.Brokers, ","),
		"group", c.cfg.Group, "topics", strings.Join(c.cfg.Topics, ","))
	for {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			client.AllowRebalance()
			break
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.s.Logger.Warn("inbox/kafka: fetch failed", "topic", topic, "partition", partition, "error", err)
			}
		})
		// Between a poll and AllowRebalance no rebalance runs: the
		// records go to the workers of partitions this consumer owns.
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			c.mu.Lock()
			w := c.workers[topicPartition{p.Topic, p.Partition}]
			c.mu.Unlock()
			if w != nil {
				w.push(p.Records)
			}
		})
		client.AllowRebalance()
	}
	c.stopWorkers(nil, c.s.ShutdownTimeout)
	client.Close()
	c.s.Logger.Info("inbox/kafka: consumer stopped", "group", c.cfg.Group)
	return nil
}

// assigned starts a worker for each partition the group gave this
// consumer.
func (c *Consumer) assigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	cl.ResumeFetchPartitions(assigned) // a partition paused when it was last ours starts afresh
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, partitions := range assigned {
		for _, p := range partitions {
			tp := topicPartition{topic, p}
			if c.workers[tp] == nil {
				w := newWorker(cl, tp)
				c.workers[tp] = w
				go c.work(w)
			}
		}
	}
}

// revoked stops the workers of the partitions taken away at once, and
// waits until they have committed what they finished.
func (c *Consumer) revoked(_ context.Context, cl *kgo.Client, revoked map[string][]int32) {
	c.stopWorkers(revoked, 0)
	cl.ResumeFetchPartitions(revoked)
}

// stopWorkers stops the workers of partitions (every worker when nil),
// lets the records in progress finish for grace, and waits for them. The
// workers stay in place meanwhile, so that a revocation during the grace
// stops them at once.
func (c *Consumer) stopWorkers(partitions map[string][]int32, grace time.Duration) {
	c.mu.Lock()
	stopping := map[*worker]bool{}
	for tp, w := range c.workers {
		if partitions == nil || containsPartition(partitions[tp.topic], tp.partition) {
			w.stop(grace)
			stopping[w] = true
		}
	}
	c.mu.Unlock()
	for w := range stopping {
		<-w.done
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp, w := range c.workers {
		if stopping[w] {
			delete(c.workers, tp)
		}
	}
}

func containsPartition(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// worker processes the records of one partition, in order.
type worker struct {
	client *kgo.Client
	tp     topicPartition
	// quit ends when the worker is to stop: it takes no more records and
	// no more tries. ctx, the context of Process, ends at once after it or
	// a grace later (stop).
	quit    context.Context
	stopped context.CancelFunc
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	wake    chan struct{}

	mu      sync.Mutex
	batches [][]*kgo.Record

	// settled is the last record processed or discarded; committed the
	// last one whose offset was committed. Only the worker's goroutine
	// uses them.
	settled, committed *kgo.Record
}

func newWorker(cl *kgo.Client, tp topicPartition) *worker {
	w := &worker{client: cl, tp: tp, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	w.quit, w.stopped = context.WithCancel(context.Background())
	w.ctx, w.cancel = context.WithCancel(context.Background())
	return w
}

// stop has the worker take no more records, and cancels the record in
// progress after grace (at once when grace is 0).
func (w *worker) stop(grace time.Duration) {
	w.stopped()
	if grace <= 0 {
		w.cancel()
		return
	}
	t := time.AfterFunc(grace, w.cancel)
	go func() {
		<-w.done
		t.Stop()
		w.cancel()
	}()
}

// push queues a batch and pauses the partition until the worker has
// processed everything queued.
func (w *worker) push(records []*kgo.Record) {
	w.mu.Lock()
	w.client.PauseFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.partition}})
	w.batches = append(w.batches, records)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// next returns the next queued batch, resuming the partition once nothing
// is queued; ok is false once the worker is stopped.
func (w *worker) next() (batch []*kgo.Record, ok bool) {
	for {
		w.mu.Lock()
		if w.quit.Err() != nil {
			w.mu.Unlock()
			return nil, false
		}
		if len(w.batches) > 0 {
			batch, w.batches = w.batches[0], w.batches[1:]
			w.mu.Unlock()
			return batch, true
		}
		w.client.ResumeFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.partition}})
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-w.quit.Done():
			return nil, false
		}
	}
}

// work processes the worker's batches until it is stopped, then commits
// what it finished.
func (c *Consumer) work(w *worker) {
	defer close(w.done)
	defer c.commit(w)
	for {
		batch, ok := w.next()
		if !ok {
			return
		}
		for _, rec := range batch {
			if w.quit.Err() != nil || !c.settle(w, rec) {
				return
			}
			w.settled = rec
		}
		c.commit(w)
	}
}

// settle processes rec until it is processed, a duplicate or discarded,
// waiting between tries; it returns false if the worker stopped first.
func (c *Consumer) settle(w *worker, rec *kgo.Record) bool {
	where := []slog.Attr{slog.String("topic", rec.Topic), slog.Int("partition", int(rec.Partition)), slog.Int64("offset", rec.Offset)}
	for delivery := 1; ; delivery++ {
		select {
		case c.slots <- struct{}{}:
		case <-w.quit.Done():
			return false
		}
		ev, err := c.process(w.ctx, rec)
		<-c.slots
		verdict, delay := c.s.Verdict(ev, err, delivery, where...)
		if verdict != inbox.Redeliver {
			return true
		}
		if w.quit.Err() != nil {
			return false
		}
		c.commit(w) // what came before it is done, whatever happens to this one
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-w.quit.Done():
			t.Stop()
			return false
		}
	}
}

// process decodes rec and hands its event to Config.Process; ev is nil
// when rec did not decode.
func (c *Consumer) process(ctx context.Context, rec *kgo.Record) (*inbox.Event, error) {
	header := func(name string) string {
		for _, h := range rec.Headers {
			if h.Key == name {
				return string(h.Value)
			}
		}
		return ""
	}
	// Debezium's header converter may write the id as a JSON string.
	debeziumID := strings.Trim(header(postbox.HeaderDebeziumID), `"`)
	ev, err := inbox.EventFromBroker(header, debeziumID, rec.Value)
	if err != nil {
		return nil, err
	}
	if ev.AggregateID == "" && utf8.Valid(rec.Key) {
		ev.AggregateID = string(rec.Key) // a Debezium record: the key is the aggregate id
	}
	_, err = c.s.Process(ctx, ev)
	return ev, err
}

// commit commits the offset past the worker's last settled record, if it
// is not committed yet. A failed commit is logged: those records will be
// read again, and the inbox absorbs them.
func (c *Consumer) commit(w *worker) {
	if w.settled == nil || w.settled == w.committed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if err := w.client.CommitRecords(ctx, w.settled); err != nil {
		c.s.Unsent("commit", err, slog.String("topic", w.tp.topic), slog.Int("partition", int(w.tp.partition)), slog.Int64("offset", w.settled.Offset+1))
		return
	}
	w.committed = w.settled
}
