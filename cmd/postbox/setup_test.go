package main_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink/nats"
	"github.com/postbox-go/postbox/sink/webhook"
)

// checkSetupTwice runs postbox sink setup with args twice: the first run
// creates (and says so), the second finds everything in place and says
// nothing was to do.
func checkSetupTwice(t *testing.T, env []string, args ...string) {
	t.Helper()
	args = append([]string{"sink", "setup"}, args...)
	first := runEnvOK(t, env, args...)
	if !strings.Contains(first, ": created (") || !strings.Contains(first, "is ready") {
		t.Fatalf("first sink setup printed:\n%s\nwant what it created", first)
	}
	second := runEnvOK(t, env, args...)
	if strings.Contains(second, "created (") || !strings.Contains(second, "exists, unchanged") || !strings.Contains(second, "nothing to do") {
		t.Fatalf("second sink setup printed:\n%s\nwant everything unchanged and nothing to do", second)
	}
}

// runEnvOK runs postbox with args and the variables env, which must
// succeed, and returns its standard output.
func runEnvOK(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := command(args...)
	cmd.Env = append(cmd.Env, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("postbox %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// The relay refuses a NATS sink without a stream and points to postbox
// sink setup; after it, the relay delivers every event into the stream it
// made, with no other tool; a second setup changes nothing.
func TestSetupNATSThenRelayDelivers(t *testing.T) {
	s, db := schemaStore(t)
	prefix := strings.ToLower(natstest.Name("setup"))
	_, js := natstest.Connect(t, natstest.URL())
	stream := strings.ToUpper(prefix)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	sinkURL := natstest.URL() + "?subject=" + prefix + ".{aggregate_type}.{event_type}"

	if last := runFails(t, command(append([]string{"relay", "--sink", sinkURL}, db...)...)); !strings.Contains(last, "stream "+stream+" (subjects "+prefix+".>") || !strings.Contains(last, "postbox sink setup --sink") {
		t.Fatalf("relay without a stream said %q, want it to name the stream and postbox sink setup", last)
	}
	checkSetupTwice(t, nil, "--sink", sinkURL)

	events := enqueueN(t, s, 20)
	startRelayLogged(t, append(db, "--sink", sinkURL, "--retention", "1h")...)
	waitFor(t, "every event done", 30*time.Second, func() bool { return status(t, db)["done"] == float64(len(events)) })
	st, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != uint64(len(events)) {
		t.Errorf("stream %s holds %d messages, want %d", stream, n, len(events))
	}
}

// The relay refuses a RabbitMQ sink without its exchange and points to
// postbox sink setup; after it (with --queue), the relay delivers every
// event into the bound quorum queue; a second setup changes nothing.
func TestSetupAMQPThenRelayDelivers(t *testing.T) {
	s, db := schemaStore(t)
	srv := amqptest.Connect(t)
	exchange, queue := amqptest.Name("pbtest_setup_x"), amqptest.Name("pbtest_setup_q")
	t.Cleanup(func() {
		srv.Do("delete the queue", func(ch *amqp091.Channel) error { _, err := ch.QueueDelete(queue, false, false, false); return err })
		srv.Do("delete the exchange", func(ch *amqp091.Channel) error { return ch.ExchangeDelete(exchange, false, false) })
	})
	u, _ := url.Parse(amqptest.URL())
	password, _ := u.User.Password()
	env := []string{"POSTBOX_SINK_USER=" + u.User.Username(), "POSTBOX_SINK_PASSWORD=" + password}
	sinkURL := amqpSinkURL(exchange)

	relay := command(append([]string{"relay", "--sink", sinkURL}, db...)...)
	relay.Env = append(relay.Env, env...)
	if last := runFails(t, relay); !strings.Contains(last, `exchange "`+exchange+`" in vhost "/" (type topic, durable) does not exist`) || !strings.Contains(last, "postbox sink setup --sink") {
		t.Fatalf("relay without an exchange said %q, want it to name the exchange and postbox sink setup", last)
	}
	checkSetupTwice(t, env, "--sink", sinkURL, "--queue", queue)

	events := enqueueN(t, s, 20)
	logs, _ := amqpRelay(t, db, exchange)
	waitFor(t, "every event done", 30*time.Second, func() bool { return status(t, db)["done"] == float64(len(events)) })
	if n := srv.Count(queue); n != len(events) {
		t.Errorf("queue %s holds %d messages, want %d", queue, n, len(events))
	}
	if strings.Contains(logs.String(), password) {
		t.Errorf("the relay logged the password")
	}
}

// The relay refuses a Kafka sink without its topic and points to postbox
// sink setup; after it, the relay delivers every event to the topic it
// made (3 partitions asked); a second setup changes nothing.
func TestSetupKafkaThenRelayDelivers(t *testing.T) {
	s, db := schemaStore(t)
	_, brokers := kafkatest.NewCluster(t)
	sinkURL := kafkatest.URL(brokers, "topic=orders")

	if last := runFails(t, command(append([]string{"relay", "--sink", sinkURL}, db...)...)); !strings.Contains(last, `topic "orders" (6 partitions, replication factor 3) does not exist`) || !strings.Contains(last, "postbox sink setup --sink") || !strings.Contains(last, "allow_auto_topic_creation=true") {
		t.Fatalf("relay without a topic said %q, want it to name the topic and postbox sink setup", last)
	}
	checkSetupTwice(t, nil, "--sink", sinkURL, "--partitions", "3")

	ids := insertKafkaEvents(t, s, 20)
	startRelayLogged(t, append(db, "--sink", sinkURL, "--retention", "1h")...)
	waitFor(t, "every event done", 30*time.Second, func() bool { return status(t, db)["done"] == float64(len(ids)) })
}

// A broker's flag given for another broker's sink, and a webhook sink,
// are usage errors.
func TestSetupRefusesFlagsOfAnotherBroker(t *testing.T) {
	for _, args := range [][]string{
		{"--sink", "nats://127.0.0.1:4222?subject=a.b", "--queue", "q"},
		{"--sink", "amqps://127.0.0.1:5671/?exchange=x", "--duplicate-window", "1h"},
		{"--sink", "amqp://127.0.0.1:5672/?exchange=x", "--partitions", "3"},
		{"--sink", "https://example.com/hook"},
	} {
		if out := usageError(t, append([]string{"sink", "setup"}, args...)...); !strings.Contains(out, "applies to a") && !strings.Contains(out, "needs no setup") {
			t.Errorf("sink setup %v said %q", args, out)
		}
	}
}

// The duplicate window sink setup gives a stream covers the longest a
// default relay takes to publish an event again after a publish whose
// PubAck was lost (its longest backoff, or a lease expiring after a crash,
// plus the publish's timeout), so that Nats-Msg-Id stores the retry once.
func TestSetupDuplicateWindowCoversTheRelaysRetry(t *testing.T) {
	retry := max(relay.BackoffMaxDefault, relay.LeaseDefault+relay.PollIntervalDefault) + webhook.TimeoutDefault
	if nats.DuplicateWindowDefault < retry {
		t.Errorf("nats.DuplicateWindowDefault %v is shorter than a default relay's retry horizon %v", nats.DuplicateWindowDefault, retry)
	}
}
