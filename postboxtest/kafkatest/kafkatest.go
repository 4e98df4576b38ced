// Package kafkatest starts in-process Kafka clusters (franz-go's kfake,
// which speaks the real protocol on 127.0.0.1 ports that other processes
// reach too) and makes topics in them, for the tests of the Kafka sink,
// the Kafka inbox consumer and `postbox relay --sink kafka://...`.
package kafkatest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Brokers is the number of brokers of a test cluster: several, so that
// partitions have different leaders.
const Brokers = 3

// timeout bounds each admin call.
const timeout = 15 * time.Second

// NewCluster starts a cluster of Brokers brokers with opts until the test
// ends, and returns it and its addresses.
func NewCluster(t testing.TB, opts ...kfake.Opt) (*kfake.Cluster, []string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(Brokers)}, opts...)...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()
}

// URL is the sink URL of brokers with query appended ("topic=...").
func URL(brokers []string, query string) string {
	return "kafka://" + strings.Join(brokers, ",") + "/?" + query
}

// CreateTopic creates a topic of partitions partitions.
func CreateTopic(t testing.TB, brokers []string, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// DeleteTopic deletes a topic, as an operator would before creating it
// again (a new topic id) or replacing the cluster.
func DeleteTopic(t testing.TB, brokers []string, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := kadm.NewClient(cl).DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("delete topic %s: %v", topic, err)
	}
}

// Reader reads every record of some topics from their start, in the
// background, until the test ends.
type Reader struct {
	mu      sync.Mutex
	records []*kgo.Record
}

// NewReader starts reading topics.
func NewReader(t testing.TB, brokers []string, topics ...string) *Reader {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r := &Reader{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fetches := cl.PollFetches(ctx)
			r.mu.Lock()
			r.records = append(r.records, fetches.Records()...)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
	})
	return r
}

// Records returns the records read so far, in the order of each partition.
func (r *Reader) Records() []*kgo.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*kgo.Record(nil), r.records...)
}

// Header returns the value of the record's header name, or "".
func Header(rec *kgo.Record, name string) string {
	for _, h := range rec.Headers {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}
