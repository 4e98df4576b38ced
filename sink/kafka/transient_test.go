package kafka_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/kafka"
)

// After a topic was deleted and created again (a cluster replaced under a
// running relay), the sink's producer knows a stale topic id and gets
// UNKNOWN_TOPIC_ID for a topic that exists. Its failures are retryable,
// never rejected (which dead-lettered the events), and the sink delivers
// again without a restart.
func TestRecreatedTopicIsRetriedNotRejected(t *testing.T) {
	const topic = "outbox.event.order"
	_, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, topic, 3)
	s := newSink(t, kafka.Config{Brokers: brokers, Timeout: 5 * time.Second})
	if err := s.Publish(t.Context(), message("order", "1", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	kafkatest.DeleteTopic(t, brokers, topic)
	kafkatest.CreateTopic(t, brokers, topic, 3)
	r := kafkatest.NewReader(t, brokers, topic)
	publishUntilDelivered(t, s, message("order", "2", []byte(`{"n": 2}`)))
	waitRecords(t, r, 1)
}

// Transient metadata errors of the brokers (a leader moving, a topic just
// created whose metadata has not reached every broker) are retried: the
// publish succeeds, or fails retryable, never rejected or permanent.
func TestTransientMetadataErrorsAreRetried(t *testing.T) {
	for _, e := range []*kerr.Error{
		kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.NotLeaderForPartition, kerr.LeaderNotAvailable,
	} {
		t.Run(e.Message, func(t *testing.T) {
			t.Parallel()
			c, brokers := kafkatest.NewCluster(t)
			kafkatest.CreateTopic(t, brokers, "t", 1)
			s := newSink(t, kafka.Config{Brokers: brokers, Topic: "t", Timeout: 5 * time.Second})
			failProduces(c, e.Code, 5)
			publishUntilDelivered(t, s, message("order", "1", []byte(`{}`)))
		})
	}
}

// publishUntilDelivered publishes m again, as the relay would retry it,
// until it is delivered, failing t on a failure that is not retryable.
func publishUntilDelivered(t *testing.T, s *kafka.Sink, m *sink.Message) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.Publish(t.Context(), m)
		if err == nil {
			return
		}
		if kind, _, _ := sink.Classify(err); kind != sink.Retryable {
			t.Fatalf("publish: %v (%v), want retryable", err, kind)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not delivered within 30s: %v", err)
		}
		m.Attempt++
		time.Sleep(50 * time.Millisecond)
	}
}

// failProduces makes the cluster answer its next n produce requests with
// code for every partition.
func failProduces(c *kfake.Cluster, code int16, n int) {
	var left atomic.Int32
	left.Store(int32(n))
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if left.Add(-1) < 0 {
			return nil, nil, false
		}
		c.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

// A broker's refusal of a record batch (INVALID_RECORD: a compacted
// topic's record without a key, a timestamp out of range) is rejected:
// tried a few times, in other batches, then failed; not retried until the
// attempts run out.
func TestInvalidRecordIsRejected(t *testing.T) {
	c, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "t", 1)
	s := newSink(t, kafka.Config{Brokers: brokers, Topic: "t", Timeout: 5 * time.Second})
	failProduces(c, kerr.InvalidRecord.Code, 1)
	err := s.Publish(t.Context(), message("order", "1", []byte(`{}`)))
	if kind, _, _ := sink.Classify(err); kind != sink.Rejected {
		t.Fatalf("publish refused as INVALID_RECORD: %v (%v), want rejected", err, kind)
	}
}
