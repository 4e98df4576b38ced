// Package kafka is the relay's Kafka sink, built on franz-go: every event
// becomes one record, produced with acks=all by an idempotent producer.
//
// A record is laid out as Debezium's Outbox Event Router lays it out, so
// that consumers written for one read the other unchanged: the topic comes
// from a template (by default Debezium's "outbox.event.{aggregate_type}"),
// the key is the aggregate id (so one aggregate stays in one partition, in
// order), the value is the payload exactly as stored, and the header "id"
// holds the event id. The broker wire headers (sink.BrokerHeaders:
// Postbox-Event-Id, Postbox-Event-Type, ..., Content-Type) and the
// event's own headers (traceparent) come with it.
//
// The content type travels as "Content-Type: application/json" for an
// event's payload, as it always has; a message that names its own
// (sink.Message.ContentType, set by an envelope of package sink/envelope)
// carries it in the header "content-type" instead, the name the
// CloudEvents Kafka protocol binding reads: Kafka's header names are
// case-sensitive.
//
// Publish returns nil only once the brokers have acknowledged the record.
// Concurrent publishes share produce requests: the producer gathers the
// records that arrive while a request is in flight, and those that arrive
// within Config.Linger, into one batch per partition.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/kafkalog"
	"github.com/postbox-go/postbox/sink"
)

const (
	// startTimeout bounds the checks of New: the brokers answer, the
	// topic exists.
	startTimeout = 15 * time.Second
	// pingTimeout bounds the check, after a failed publish, of whether
	// any broker answers at all.
	pingTimeout = 2 * time.Second
	// pingReuse is how long the outcome of that check stands for other
	// failed publishes.
	pingReuse = time.Second
	// unknownTopicRetries and metadataMinAge make a record for a topic
	// that does not exist fail within a publish's time, rather than wait
	// until its timeout.
	unknownTopicRetries = 2
	metadataMinAge      = 500 * time.Millisecond
	// purgeReuse is how long after the producer forgot a topic it is not
	// made to forget it again: the failures of records buffered before
	// then need no other purge.
	purgeReuse = time.Second
)

// Sink publishes events as Kafka records. It is safe for concurrent use.
type Sink struct {
	client  *kgo.Client
	topic   sink.Template
	timeout time.Duration
	desc    string
	// maxBatch is the largest record batch produced (see batchLimit).
	maxBatch int

	pingMu  sync.Mutex
	pingAt  time.Time
	pingErr error

	purgeMu  sync.Mutex
	purgedAt map[string]time.Time // by topic
}

var _ sink.BatchSink = (*Sink)(nil)

// New connects to the brokers of cfg and checks that they answer; with a
// fixed topic (a template without placeholders) it also checks that the
// topic exists, unless AllowAutoTopicCreation. Close releases the client.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	cfg = cfg.withDefaults()
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: Config.Brokers is empty")
	}
	if err := cfg.SASL.validate(); err != nil {
		return nil, err
	}
	if cfg.MaxMessageBytes < 0 || cfg.MaxMessageBytes > 0 && cfg.MaxMessageBytes <= batchOverhead {
		return nil, fmt.Errorf("kafka: Config.MaxMessageBytes %d: want 0 (the cluster's) or more than a batch's %d-byte header", cfg.MaxMessageBytes, batchOverhead)
	}
	topic, err := sink.ParseTemplate(cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("kafka: topic: %w", err)
	}
	client, err := kgo.NewClient(clientOptions(cfg, 0)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	s := &Sink{client: client, topic: topic, timeout: cfg.Timeout, desc: describe(cfg), purgedAt: map[string]time.Time{}}
	if err := s.check(ctx, cfg); err != nil {
		client.Close()
		return nil, err
	}
	// The producer's batches are bounded by what the cluster accepts, so
	// that a batch of small records is never refused as too large.
	limitCtx, cancel := context.WithTimeout(ctx, startTimeout)
	s.maxBatch = batchLimit(limitCtx, client, cfg, topic)
	cancel()
	s.desc += fmt.Sprintf(", batches of at most %d bytes", s.maxBatch)
	client.Close()
	if s.client, err = kgo.NewClient(clientOptions(cfg, s.maxBatch)...); err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return s, nil
}

// clientOptions are the client's options for cfg, with batches of at most
// maxBatch bytes when it is not 0.
func clientOptions(cfg Config, maxBatch int) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(cfg.MaxBufferedRecords),
		kgo.RecordDeliveryTimeout(cfg.Timeout),
		kgo.UnknownTopicRetries(unknownTopicRetries),
		kgo.MetadataMinAge(metadataMinAge),
		kgo.ProducerLinger(max(cfg.Linger, 0)),
		kgo.ClientID("postbox-relay"),
	}
	if cfg.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(cfg.TLS.Clone()))
	}
	if m := cfg.SASL.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	if cfg.AllowAutoTopicCreation {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	if cfg.Logger != nil {
		opts = append(opts, kgo.WithLogger(kafkalog.New(cfg.Logger)))
	}
	if maxBatch > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(min(maxBatch, math.MaxInt32))))
	}
	return opts
}

func (s SASL) mechanism() sasl.Mechanism {
	switch s.Mechanism {
	case SASLPlain:
		return plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()
	case SASLScramSHA512:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()
	}
	return nil
}

// describe names the destination for logs, without credentials.
func describe(cfg Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kafka brokers %s, topic %s, acks=all, idempotent", strings.Join(cfg.Brokers, ","), cfg.Topic)
	if cfg.TLS != nil {
		b.WriteString(", tls")
	}
	if cfg.SASL.Mechanism != "" {
		b.WriteString(", sasl " + cfg.SASL.Mechanism)
	}
	if cfg.AllowAutoTopicCreation {
		b.WriteString(", topics created on demand")
	}
	return b.String()
}

// check makes sure at start that the brokers answer and, for a fixed
// topic, that it exists.
func (s *Sink) check(ctx context.Context, cfg Config) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := s.client.Ping(ctx); err != nil {
		return fmt.Errorf("kafka: no broker of %s answers: %w", strings.Join(cfg.Brokers, ","), err)
	}
	if !s.topic.IsFixed() || cfg.AllowAutoTopicCreation {
		return nil
	}
	name := s.topic.String()
	topics, err := kadm.NewClient(s.client).ListTopics(ctx, name)
	if err != nil {
		return fmt.Errorf("kafka: reading the metadata of topic %q: %w", name, err)
	}
	if t, ok := topics[name]; !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("kafka: topic %q does not exist: create it (postbox sink setup --sink URL, or kafka.Setup), or add allow_auto_topic_creation=true to the sink URL", name)
	} else if t.Err != nil {
		return fmt.Errorf("kafka: topic %q: %w", name, t.Err)
	}
	return nil
}

// Publish produces m's record and waits for the brokers' acknowledgement
// (acks=all), at most Config.Timeout. A record that Kafka would refuse
// (too large for a batch, see Config.MaxMessageBytes; a header name that
// is not UTF-8; a topic name the template made invalid) fails at once as
// sink.Permanent and is never produced; one a broker finds too large
// after all (a topic's lower limit) is sink.Rejected; a topic that does not exist as sink.Rejected
// (retried a few times, then dead-lettered), but a topic that exists and
// that a broker did not know (stale metadata: see unknownTopic) is
// retryable; a failure while no broker answers is sink.Unavailable;
// anything else is retryable.
func (s *Sink) Publish(ctx context.Context, m *sink.Message) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafka: event %s: %w", m.ID, err)
	}
	rec := s.Record(m)
	if err := s.refusal(m, rec); err != nil {
		return &sink.Error{Kind: sink.Permanent, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	done := make(chan error, 1)
	s.client.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		return nil
	}
	return s.classify(rec.Topic, fmt.Errorf("kafka: event %s to topic %q: %w", m.ID, rec.Topic, err), nil)
}

// headerContentType is the record header of a message's own content type
// (sink.Message.ContentType), as the CloudEvents Kafka protocol binding
// names it.
const headerContentType = "content-type"

// Record returns the record Publish produces for m: topic from the
// template, key = aggregate id, value = payload, headers = the broker wire
// headers (the content type under headerContentType when m names its own)
// and Debezium's "id".
func (s *Sink) Record(m *sink.Message) *kgo.Record {
	rec := &kgo.Record{}
	s.layout(rec, m, make([]kgo.RecordHeader, 0, len(m.Headers)+recordHeaders), nil)
	return rec
}

// recordHeaders is the number of headers a record has besides the event's
// own: the six broker wire headers and Debezium's "id".
const recordHeaders = 7

// layout lays m out in rec as Record describes, appending its headers to
// headers (which should have room for len(m.Headers)+recordHeaders) and
// the bytes of its key and header values to arena, which it returns
// (nil: each its own).
func (s *Sink) layout(rec *kgo.Record, m *sink.Message, headers []kgo.RecordHeader, arena []byte) []byte {
	rec.Topic = s.topic.Expand(&m.Event)
	rec.Value = m.Payload
	rec.Key, arena = appendBytes(arena, m.AggregateID)
	var id []byte
	sink.BrokerHeaders(m, func(name, value string) {
		switch {
		case name == postbox.HeaderDebeziumID:
			return
		case name == postbox.HeaderContentType && m.ContentType != "":
			name = headerContentType
		}
		var v []byte
		v, arena = appendBytes(arena, value)
		if name == postbox.HeaderEventID {
			id = v
		}
		headers = append(headers, kgo.RecordHeader{Key: name, Value: v})
	})
	rec.Headers = append(headers, kgo.RecordHeader{Key: postbox.HeaderDebeziumID, Value: id})
	return arena
}

// appendBytes returns value's bytes, appended to arena when it is not nil,
// else copied on their own, and the arena. A value keeps its bytes when
// the arena grows: they stay in the array it outgrew.
func appendBytes(arena []byte, value string) ([]byte, []byte) {
	if arena == nil {
		return []byte(value), nil
	}
	start := len(arena)
	arena = append(arena, value...)
	return arena[start:len(arena):len(arena)], arena
}

// classify turns a failed produce into a sink.Error where the relay should
// not just retry. topics, when not nil, keeps what the cluster said of
// whether a topic exists, so that the failures of one batch ask once per
// topic (see unknownTopic).
func (s *Sink) classify(topic string, err error, topics map[string]topicState) error {
	switch {
	case errors.Is(err, context.Canceled):
		return err // the relay is stopping: the event is not at fault
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		// The record alone fits the sink's limit (see refusal): the
		// batch it was in, or the topic's own lower limit, was too
		// large. Its batch-mates are not at fault: a few more tries,
		// in other batches.
		return &sink.Error{Kind: sink.Rejected, Err: fmt.Errorf("%w (a batch of %s's records, or the record alone, is over the topic's max.message.bytes)", err, topic)}
	case errors.Is(err, kerr.InvalidRecord), errors.Is(err, kerr.CorruptMessage):
		// The broker refused the batch for a record of it (a compacted
		// topic's record without a key, a timestamp out of range): a
		// few more tries, in other batches.
		return &sink.Error{Kind: sink.Rejected, Err: err}
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		st, ok := topics[topic]
		if !ok {
			st = s.listTopic(topic)
			if topics != nil {
				topics[topic] = st
			}
		}
		return s.unknownTopic(topic, err, st)
	}
	if s.reachable() != nil {
		return &sink.Error{Kind: sink.Unavailable, Err: err}
	}
	return err
}

// topicState is what the cluster said of whether a topic exists: err when
// it could not tell.
type topicState struct {
	exists bool
	err    error
}

// listTopic asks the cluster afresh whether topic exists.
func (s *Sink) listTopic(topic string) topicState {
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	topics, err := kadm.NewClient(s.client).ListTopics(ctx, topic)
	if err != nil {
		return topicState{err: err}
	}
	t, ok := topics[topic]
	return topicState{exists: ok && !errors.Is(t.Err, kerr.UnknownTopicOrPartition)}
}

// unknownTopic classifies err, a broker's word that it does not know
// topic, by what the cluster, asked afresh, said of it (st). When the
// topic does not exist, the event is at fault (a templated topic nobody
// created): sink.Rejected, tried a few times, then failed. When it does,
// the producer's metadata was stale (the topic was created a moment ago,
// its leader moved, or it was deleted and created again under a new topic
// id, as when a cluster is replaced): the error is retryable, and the
// producer forgets what it knew of the topic after a new topic id, which
// it would otherwise refuse until the process restarts. When the cluster
// cannot tell, the error is retryable too.
func (s *Sink) unknownTopic(topic string, err error, st topicState) error {
	if st.err != nil {
		return fmt.Errorf("%w (whether topic %q exists could not be read: %v)", err, topic, st.err)
	}
	if !st.exists {
		return &sink.Error{Kind: sink.Rejected, Err: fmt.Errorf("%w (topic %q does not exist)", err, topic)}
	}
	if errors.Is(err, kerr.UnknownTopicID) {
		s.forget(topic)
	}
	return fmt.Errorf("%w (topic %q exists: the producer's metadata was stale, and is read again)", err, topic)
}

// forget makes the producer drop what it knows of topic, at most once
// every purgeReuse per topic: records of the topic buffered meanwhile fail
// (retryable), and the next ones read its metadata, new topic id
// included, afresh.
func (s *Sink) forget(topic string) {
	s.purgeMu.Lock()
	if time.Since(s.purgedAt[topic]) < purgeReuse {
		s.purgeMu.Unlock()
		return
	}
	s.purgedAt[topic] = time.Now()
	s.purgeMu.Unlock()
	s.client.PurgeTopicsFromProducing(topic)
}

// reachable reports whether any broker answers, asking at most once every
// pingReuse.
func (s *Sink) reachable() error {
	s.pingMu.Lock()
	defer s.pingMu.Unlock()
	if time.Since(s.pingAt) < pingReuse {
		return s.pingErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	s.pingErr = s.client.Ping(ctx)
	s.pingAt = time.Now()
	return s.pingErr
}

// String names the destination for logs, without credentials: the
// brokers, the topic template, the settings that matter and the largest
// batch (see Config.MaxMessageBytes).
func (s *Sink) String() string { return s.desc }

// Destination names the destination for traces: the topic template.
func (s *Sink) Destination() sink.Destination {
	return sink.Destination{System: "kafka", Name: s.topic.String()}
}

// Close waits for the records in the producer (at most Config.Timeout),
// then closes the connections.
func (s *Sink) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	_ = s.client.Flush(ctx)
	s.client.Close()
}
