package main_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/store/postgres"
)

// kafkaTopic is where the relay's Kafka sink sends the test's events by
// default: Debezium's "outbox.event.{aggregate_type}" for aggregate type
// "order".
const kafkaTopic = "outbox.event.order"

// insertKafkaEvents writes n events with the article's plain SQL, one
// statement, spread over 50 aggregates, and returns their ids.
func insertKafkaEvents(t *testing.T, s *postgres.Store, n int) []uuid.UUID {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(),
		"insert into "+s.Table("outbox_events")+" (aggregate_type, aggregate_id, event_type, payload) "+
			"select 'order', (g % 50)::text, 'order.paid', jsonb_build_object('order_id', g) from generate_series(1, $1) g returning id", n)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// slowProduce makes the cluster take a while over every produce request,
// so that a relay is caught in the middle of its batches.
func slowProduce(c *kfake.Cluster, d time.Duration) {
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		time.Sleep(d)
		return nil, nil, false // then handled as usual; the function stays
	})
}

// A relay killed with SIGKILL in the middle of its batches, restarted;
// consumers whose handler fails 30% of the time, a second one joining and
// the first leaving: every event written by plain SQL is applied exactly
// once.
func TestKafkaRelayKilledMidBatch(t *testing.T) {
	s, db := schemaStore(t)
	c, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, kafkaTopic, 6)
	slowProduce(c, 5*time.Millisecond)
	ledger := kafkatest.NewLedger(t, s)
	first := ledger.StartConsumer(t, brokers, "shipping", kafkaTopic, 0.3)
	ids := insertKafkaEvents(t, s, 3000)

	relayArgs := append(db, "--sink", kafkatest.URL(brokers, ""), "--batch", "100", "--concurrency", "64", "--lease", "2s", "--retention", "1h")
	logs, pid := startRelayLogged(t, relayArgs...)
	waitFor(t, "some events applied", 30*time.Second, func() bool { return len(ledger.Applied(t)) >= 300 })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if st := status(t, db); st["processing"] == 0 || st["done"] == float64(len(ids)) {
		t.Fatalf("killed relay left %v: the test did not kill it mid-batch", st)
	}
	for _, want := range []string{"relay started", "kafka brokers " + strings.Join(brokers, ","), "topic outbox.event.{aggregate_type}, acks=all, idempotent"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("relay log lacks %q:\n%s", want, logs)
		}
	}

	startRelayLogged(t, relayArgs...)
	second := ledger.StartConsumer(t, brokers, "shipping", kafkaTopic, 0.3)
	waitFor(t, "the second consumer's first event", 30*time.Second, func() bool { return second.Processed() > 0 })
	first.Stop()
	ledger.WaitExactlyOnce(t, ids, 2*time.Minute)
	waitFor(t, "every event done", 30*time.Second, func() bool { return status(t, db)["done"] == float64(len(ids)) })
}

// The brokers fail every produce request for a while, with a retriable
// error or by closing the connection: the relay retries, and once they
// recover every event is applied exactly once.
func TestKafkaBrokersFailProduce(t *testing.T) {
	s, db := schemaStore(t)
	c, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, kafkaTopic, 3)
	var failed atomic.Int64
	var until atomic.Int64 // unix nanoseconds; set at the first produce
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		now := time.Now().UnixNano()
		until.CompareAndSwap(0, now+int64(3*time.Second))
		if now > until.Load() {
			return nil, nil, false
		}
		c.KeepControl()
		if failed.Add(1)%2 == 0 {
			return nil, errors.New("injected: connection closed"), true
		}
		return failedProduce(req.(*kmsg.ProduceRequest), kerr.NotEnoughReplicas.Code), nil, true
	})
	ledger := kafkatest.NewLedger(t, s)
	ledger.StartConsumer(t, brokers, "billing", kafkaTopic, 0.3)
	ids := insertKafkaEvents(t, s, 500)
	logs, _ := startRelayLogged(t, append(db, "--sink", kafkatest.URL(brokers, "topic="+kafkaTopic),
		"--timeout", "1s", "--backoff-min", "100ms", "--backoff-max", "500ms", "--retention", "1h")...)
	ledger.WaitExactlyOnce(t, ids, 2*time.Minute)
	waitFor(t, "every event done", 30*time.Second, func() bool { return status(t, db)["done"] == float64(len(ids)) })
	if failed.Load() == 0 || !strings.Contains(logs.String(), "delivery failed; will retry") {
		t.Fatalf("%d produce requests failed, and the relay logged no retry: the fault did not happen", failed.Load())
	}
}

// failedProduce answers every partition of req with the error code.
func failedProduce(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
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
	return resp
}

// SASL credentials from $POSTBOX_SINK_USER and $POSTBOX_SINK_PASSWORD: the
// relay authenticates and delivers, and the password is never logged; a
// wrong password stops it at start.
func TestKafkaRelaySASLFromEnvironment(t *testing.T) {
	s, db := schemaStore(t)
	const password = "kafka-test-password-1234"
	_, brokers := kafkatest.NewCluster(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "relay", password),
		kfake.SeedTopics(1, kafkaTopic))
	sinkURL := kafkatest.URL(brokers, "sasl=scram-sha-256")

	wrong := command(append([]string{"relay", "--sink", sinkURL}, db...)...)
	wrong.Env = append(wrong.Env, "POSTBOX_SINK_USER=relay", "POSTBOX_SINK_PASSWORD=wrong-password")
	if last := runFails(t, wrong); !strings.Contains(last, "no broker of") || strings.Contains(last, "wrong-password") {
		t.Fatalf("relay with a wrong password said %q", last)
	}

	ids := insertKafkaEvents(t, s, 20)
	logs := &logbuf.Buffer{}
	relay := command(append([]string{"relay", "--sink", sinkURL, "--retention", "1h"}, db...)...)
	relay.Env = append(relay.Env, "POSTBOX_SINK_USER=relay", "POSTBOX_SINK_PASSWORD="+password)
	relay.Stderr = logs
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Process.Kill(); _ = relay.Wait() })
	waitFor(t, "every event done", 30*time.Second, func() bool { return status(t, db)["done"] == float64(len(ids)) })
	if !strings.Contains(logs.String(), "sasl scram-sha-256") || strings.Contains(logs.String(), password) {
		t.Fatalf("relay log (want the mechanism, never the password):\n%s", logs)
	}
}

// A fixed topic that does not exist stops the relay at start, and says
// what to do.
func TestKafkaRelayMissingTopic(t *testing.T) {
	_, db := schemaStore(t)
	_, brokers := kafkatest.NewCluster(t)
	cmd := command(append([]string{"relay", "--sink", kafkatest.URL(brokers, "topic=orders")}, db...)...)
	want := []string{`topic "orders" (6 partitions, replication factor 3) does not exist; create it with: postbox sink setup --sink URL`, "allow_auto_topic_creation=true"}
	if last := runFails(t, cmd); !strings.Contains(last, want[0]) || !strings.Contains(last, want[1]) {
		t.Fatalf("relay with a missing topic said %q, want %q", last, want)
	}
}
