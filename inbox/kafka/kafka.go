// Package kafka consumes Kafka topics as a consumer group and applies each
// record once through the inbox: the consumer side of the relay's Kafka
// sink (package sink/kafka), and of Debezium's Outbox Event Router.
//
// Each record is decoded with inbox.EventFromBroker (the Postbox-* headers;
// for a record Debezium produced, the event id from its "id" header and the
// aggregate id from the key) and handed to Config.Process, usually
// Inbox.Process with the application's handler. Its offset is committed
// only after Process returned, that is after the inbox transaction
// committed:
//
//   - processed or duplicate (inbox.Ack): the record is done;
//   - a temporary failure (inbox.Redeliver: the handler failed and rolled
//     back, the database is down, the event is out of order): the same
//     record is processed again after inbox.RedeliveryDelay, growing with
//     each try; the records after it in its partition wait, and other
//     partitions go on;
//   - never processable (inbox.Discard: not a postbox event, a payload
//     that is not JSON): the record is logged at warning level and skipped,
//     its offset committed past. Kafka has no dead-letter queue of its own.
//
// One worker per assigned partition keeps each partition's order (and so
// each aggregate's, as the sink keys records by aggregate id) while
// partitions are processed in parallel. A partition whose worker is busy is
// paused, so a record that keeps failing holds back its partition only.
// When a rebalance takes partitions away, their workers stop (a Process in
// flight is cancelled and rolls back) and commit what they finished before
// the partitions move; records in flight are never committed, so the new
// owner reads them again. Offsets are committed at the end of each fetched
// batch, before each redelivery wait, and when a partition stops: after a
// crash, the records since the last commit come again, and the inbox
// recognises them as duplicates.
//
// # What it trusts
//
// A message is trusted because of who could publish it: Kafka messages
// carry no signature, so the consumer relies on the broker's own
// authentication and authorization of publishers, for the payload as for
// the Postbox-* headers it routes and orders on (event type, aggregate,
// Postbox-Sequence) and the event id. Whoever may publish where the
// consumer reads can send any event, with any type or sequence number. So
// let only the relay publish there (Kafka ACLs granting Write on the topics to the relay's (or Debezium's) principal alone), and connect with TLS.
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
	"github.com/postbox-go/postbox/internal/kafkalog"
)

const (
	// fetchMaxWait bounds an idle fetch, and so how long a resumed
	// partition may wait for its next fetch.
	fetchMaxWait = 500 * time.Millisecond
	// commitTimeout bounds one offset commit.
	commitTimeout = 10 * time.Second
)

// Config configures a Consumer. Brokers, Group, Topics and Process are
// required; a zero field takes its default.
type Config struct {
	// Brokers are the seed brokers, HOST:PORT. Required.
	Brokers []string
	// Group is the consumer group: the consumers of one group share the
	// partitions of Topics. Required.
	Group string
	// Topics are consumed from the group's committed offsets, or from
	// their start for a new group. Required.
	Topics []string
	// Process applies one event, usually by calling Inbox.Process (see
	// Inbox.Processor) with the application's handler; its error decides
	// what happens to the record (inbox.VerdictOf). It may adjust ev
	// first, for instance set ev.Seq from the payload. It must return
	// soon after ctx is cancelled: a rebalance, and the consumer's stop,
	// wait for it. Required.
	Process func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error)
	// Logger receives redeliveries (info), discarded records and failed
	// commits (warning). Default slog.Default().
	Logger *slog.Logger
	// RedeliveryMin and RedeliveryMax bound the wait before a failed
	// record is processed again (see inbox.RedeliveryDelay). Default
	// inbox.RedeliveryMinDefault and inbox.RedeliveryMaxDefault.
	RedeliveryMin, RedeliveryMax time.Duration
	// Options are more franz-go client options, for TLS
	// (kgo.DialTLSConfig), SASL (kgo.SASL), timeouts. The consumer's own
	// (auto-commit off, blocking rebalances on poll, the partition
	// callbacks) are applied after them and win.
	Options []kgo.Opt
}

// Consumer consumes Config.Topics in Config.Group until its Run returns.
type Consumer struct {
	cfg  Config
	log  *slog.Logger
	opts []kgo.Opt

	mu      sync.Mutex
	workers map[topicPartition]*worker
}

type topicPartition struct {
	topic     string
	partition int32
}

// New checks cfg and returns its consumer; Run connects.
func New(cfg Config) (*Consumer, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, errors.New("kafka consumer: Config.Brokers is empty")
	case cfg.Group == "":
		return nil, errors.New("kafka consumer: Config.Group is empty")
	case len(cfg.Topics) == 0:
		return nil, errors.New("kafka consumer: Config.Topics is empty")
	case cfg.Process == nil:
		return nil, errors.New("kafka consumer: Config.Process is nil")
	case cfg.RedeliveryMin < 0 || cfg.RedeliveryMax < 0:
		return nil, errors.New("kafka consumer: Config.RedeliveryMin and RedeliveryMax must not be negative")
	}
	c := &Consumer{cfg: cfg, log: cfg.Logger, workers: map[topicPartition]*worker{}}
	if c.log == nil {
		c.log = slog.Default()
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.WithLogger(kafkalog.New(c.log)),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(fetchMaxWait),
	}, cfg.Options...)
	opts = append(opts,
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.assigned),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.revoked),
	)
	c.opts = opts
	return c, nil
}

// Run joins the group and consumes until ctx is cancelled, then stops
// every partition's worker (each commits what it finished), leaves the
// group and returns nil. It returns an error only if the client cannot be
// made from Config.Options. Call it once.
func (c *Consumer) Run(ctx context.Context) error {
	client, err := kgo.NewClient(c.opts...)
	if err != nil {
		return fmt.Errorf("kafka consumer: %w", err)
	}
	c.log.Info("kafka consumer started", "brokers", strings.Join(c.cfg.Brokers, ","),
		"group", c.cfg.Group, "topics", strings.Join(c.cfg.Topics, ","))
	for {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			client.AllowRebalance()
			break
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.log.Warn("kafka consumer: fetch failed", "topic", topic, "partition", partition, "error", err)
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
	c.stopWorkers(nil)
	client.Close()
	c.log.Info("kafka consumer stopped", "group", c.cfg.Group)
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

// revoked stops the workers of the partitions taken away, and waits until
// they have committed what they finished.
func (c *Consumer) revoked(_ context.Context, cl *kgo.Client, revoked map[string][]int32) {
	c.stopWorkers(revoked)
	cl.ResumeFetchPartitions(revoked)
}

// stopWorkers stops the workers of partitions (every worker when nil) and
// waits for them.
func (c *Consumer) stopWorkers(partitions map[string][]int32) {
	c.mu.Lock()
	var stopping []*worker
	for tp, w := range c.workers {
		if partitions == nil || containsPartition(partitions[tp.topic], tp.partition) {
			w.cancel()
			stopping = append(stopping, w)
			delete(c.workers, tp)
		}
	}
	c.mu.Unlock()
	for _, w := range stopping {
		<-w.done
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
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}

	mu      sync.Mutex
	batches [][]*kgo.Record

	// settled is the last record processed or discarded; committed the
	// last one whose offset was committed. Only the worker's goroutine
	// uses them.
	settled, committed *kgo.Record
}

func newWorker(cl *kgo.Client, tp topicPartition) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	return &worker{client: cl, tp: tp, ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
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
		if len(w.batches) > 0 {
			batch, w.batches = w.batches[0], w.batches[1:]
			w.mu.Unlock()
			return batch, true
		}
		if w.ctx.Err() == nil {
			w.client.ResumeFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.partition}})
		}
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-w.ctx.Done():
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
			if !c.settle(w, rec) {
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
	for delivered := 1; ; delivered++ {
		err := c.process(w.ctx, rec)
		switch inbox.VerdictOf(err) {
		case inbox.Ack:
			return true
		case inbox.Discard:
			c.log.Warn("kafka consumer: discarding a record that can never be processed",
				"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "error", err)
			return true
		}
		if w.ctx.Err() != nil {
			return false
		}
		delay := inbox.RedeliveryDelay(delivered, c.cfg.RedeliveryMin, c.cfg.RedeliveryMax)
		c.log.Info("kafka consumer: processing failed; trying the record again later",
			"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "tries", delivered, "delay", delay, "error", err)
		c.commit(w) // what came before it is done, whatever happens to this one
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
			return false
		}
	}
}

// process decodes rec and hands its event to Config.Process.
func (c *Consumer) process(ctx context.Context, rec *kgo.Record) error {
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
		return err
	}
	if ev.AggregateID == "" && utf8.Valid(rec.Key) {
		ev.AggregateID = string(rec.Key) // a Debezium record: the key is the aggregate id
	}
	_, err = c.cfg.Process(ctx, ev)
	return err
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
		c.log.Warn("kafka consumer: committing an offset failed; the records since the last commit will be read again",
			"topic", w.tp.topic, "partition", w.tp.partition, "offset", w.settled.Offset+1, "error", err)
		return
	}
	w.committed = w.settled
}
