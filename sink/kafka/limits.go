package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postbox-go/postbox/sink"
)

const (
	// MessageMaxBytesDefault is Kafka's own default of the brokers'
	// message.max.bytes (a topic's max.message.bytes): the largest record
	// batch they accept, 1 MiB and 12 bytes.
	MessageMaxBytesDefault = 1048588
	// batchOverhead is the header of a record batch (magic v2).
	batchOverhead = 61
	// recordOverhead bounds what a record adds to its key, value and
	// headers: its length, attributes, timestamp and offset deltas.
	recordOverhead = binary.MaxVarintLen32 + 1 + binary.MaxVarintLen64 + binary.MaxVarintLen32
	// maxTopicLen is the longest topic name Kafka accepts.
	maxTopicLen = 249
)

// refusal returns why rec, the record of event m, is one Kafka would
// refuse, or nil: a topic name that is not valid (the template gave it),
// a header key that is not UTF-8 (the protocol's header keys are strings),
// or a record that could not fit alone in a batch of s.maxBatch bytes.
func (s *Sink) refusal(m *sink.Message, rec *kgo.Record) error {
	if err := checkTopic(rec.Topic); err != nil {
		return fmt.Errorf("kafka: event %s: template %s gave topic %.64q: %w", m.ID, s.topic, rec.Topic, err)
	}
	size := recordOverhead + varBytes(len(rec.Key)) + varBytes(len(rec.Value)) + varintLen(len(rec.Headers))
	largest := -1
	for i, h := range rec.Headers {
		if !utf8.ValidString(h.Key) {
			return fmt.Errorf("kafka: event %s: header name %.64q is not UTF-8", m.ID, h.Key)
		}
		size += varBytes(len(h.Key)) + varBytes(len(h.Value))
		if largest < 0 || len(h.Value) > len(rec.Headers[largest].Value) {
			largest = i
		}
	}
	if size+batchOverhead > s.maxBatch {
		var most string
		if largest >= 0 {
			h := rec.Headers[largest]
			most = fmt.Sprintf(", its largest header %.64q %d", h.Key, len(h.Key)+len(h.Value))
		}
		return fmt.Errorf("kafka: event %s: its record takes %d bytes (a payload of %d%s), over the %d of a batch (Config.MaxMessageBytes, else the brokers' message.max.bytes or the topic's max.message.bytes) less its %d-byte header",
			m.ID, size, len(rec.Value), most, s.maxBatch, batchOverhead)
	}
	return nil
}

// varBytes is the size of n bytes after their varint length.
func varBytes(n int) int { return varintLen(n) + n }

// varintLen is the size of n as a zigzag varint.
func varintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], int64(n))
}

// checkTopic checks a topic name as the brokers do: 1 to 249 of
// [a-zA-Z0-9._-], and neither "." nor "..".
func checkTopic(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("%q is not a topic name", name)
	case len(name) > maxTopicLen:
		return fmt.Errorf("a topic name is at most %d characters, not %d", maxTopicLen, len(name))
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("a topic name holds only letters, digits, '.', '_' and '-', not %q", c)
		}
	}
	return nil
}

// batchLimit returns the largest record batch the sink produces:
// Config.MaxMessageBytes when set, else what the cluster accepts, a fixed
// topic's max.message.bytes or a broker's message.max.bytes. When the
// cluster does not say (describing configurations may be denied), Kafka's
// default.
func batchLimit(ctx context.Context, client *kgo.Client, cfg Config, topic sink.Template) int {
	if cfg.MaxMessageBytes > 0 {
		return cfg.MaxMessageBytes
	}
	adm := kadm.NewClient(client)
	var (
		configs kadm.ResourceConfigs
		err     error
		key     = "message.max.bytes"
	)
	if topic.IsFixed() && !cfg.AllowAutoTopicCreation {
		key = "max.message.bytes"
		configs, err = adm.DescribeTopicConfigs(ctx, topic.String())
	} else {
		var brokers kadm.BrokerDetails
		if brokers, err = adm.ListBrokers(ctx); err == nil && len(brokers) > 0 {
			configs, err = adm.DescribeBrokerConfigs(ctx, brokers[0].NodeID)
		}
	}
	if err != nil {
		return MessageMaxBytesDefault
	}
	for _, rc := range configs {
		for _, c := range rc.Configs {
			if c.Key != key || c.Value == nil {
				continue
			}
			if n, err := strconv.Atoi(*c.Value); err == nil && n > batchOverhead {
				return n
			}
		}
	}
	return MessageMaxBytesDefault
}
