package main_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
)

// brokerEndpoints are a NATS subject, a RabbitMQ exchange (and the queue
// bound to it) and a Kafka topic of the test's own, and the endpoint URL
// of each.
type brokerEndpoints struct {
	nats, amqp, kafka string
	natsIDs           func() map[string]int
	queueCount        func() int
	kafkaIDs          func() map[string]int
}

func newBrokerEndpoints(t *testing.T) brokerEndpoints {
	t.Helper()
	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, nil)
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	queue := srv.Queue(exchange, "#", nil)
	_, brokers := kafkatest.NewCluster(t)
	topic := strings.ToLower(natstest.Name("endpoints"))
	kafkatest.CreateTopic(t, brokers, topic, 3)
	reader := kafkatest.NewReader(t, brokers, topic)
	return brokerEndpoints{
		nats:       natstest.URL() + "?subject=" + prefix + ".{event_type}",
		amqp:       amqptest.URL() + "?exchange=" + exchange,
		kafka:      kafkatest.URL(brokers, "topic="+topic),
		natsIDs:    func() map[string]int { return natstest.MessageIDs(t, st) },
		queueCount: func() int { return srv.Count(queue) },
		kafkaIDs: func() map[string]int {
			ids := map[string]int{}
			for _, rec := range reader.Records() {
				ids[kafkatest.Header(rec, postbox.HeaderEventID)]++
			}
			return ids
		},
	}
}

// postbox endpoints add takes a broker's URL as --sink does (no secret is
// generated: a broker's endpoint signs nothing), refuses one its kind
// refuses, or of a scheme no kind has, in one line that names the flag;
// its URL's user and password are sealed, out of the URL list and show
// print, and still used; endpoints test sends the test event
// through the broker; and update refuses a webhook's URL for an endpoint
// that has no secret, saying how to give it one.
func TestEndpointsBrokerURLs(t *testing.T) {
	_, db := schemaStore(t)
	b := newBrokerEndpoints(t)
	add := func(args ...string) string {
		return runOK(t, append(append([]string{"endpoints", "add"}, db...), args...)...)
	}
	ids := map[string]string{}
	for name, url := range map[string]string{"nats": b.nats, "amqp": b.amqp, "kafka": b.kafka} {
		out := add("--url", url, "--name", name)
		m := endpointIDLine.FindStringSubmatch(out)
		if m == nil || strings.Contains(out, "secret") {
			t.Fatalf("endpoints add --url %s printed %q, want its id and no secret", name, out)
		}
		ids[name] = m[1]
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--url", natstest.URL() + "/orders.events"}, "the subject goes in ?subject="},
		{[]string{"--url", "mqtt://broker.example/orders"}, `--url: unknown scheme "mqtt" (want https, http, nats, amqp, amqps or kafka)`},
		{[]string{"--url", b.nats, "--secret", secret}, "--secret: a broker's endpoint signs nothing"},
		{[]string{"--url", "kafka://u:pa55-w0rd@127.0.0.1:1?topic=t&sasl=nope"}, "--url: kafka: sasl="},
	} {
		errText := runFailsWith(t, command(append(append([]string{"endpoints", "add"}, db...), c.args...)...), 2)
		if !strings.Contains(errText, c.want) || strings.Contains(errText, "pa55-w0rd") {
			t.Errorf("endpoints add %q said %q, want %q", c.args, errText, c.want)
		}
	}
	list := runOK(t, append([]string{"endpoints", "list"}, db...)...)
	if strings.Count(list, "\n") != 4 || strings.Contains(list, "guest") || !strings.Contains(list, "amqp://127.0.0.1") {
		t.Errorf("list, want the three endpoints, the RabbitMQ user and password out of the URL (sealed):\n%s", list)
	}
	var shown struct {
		Secret string `json:"secret_fingerprint"`
	}
	if err := json.Unmarshal([]byte(runOK(t, append([]string{"endpoints", "show", "--json", "nats"}, db...)...)), &shown); err != nil || shown.Secret != "" {
		t.Errorf("show --json of a broker's endpoint: %+v, %v; want no secret fingerprint", shown, err)
	}

	for name, received := range map[string]func() int{
		"nats":  func() int { return len(b.natsIDs()) },
		"amqp":  b.queueCount,
		"kafka": func() int { return len(b.kafkaIDs()) },
	} {
		out := runOK(t, append([]string{"endpoints", "test", name}, db...)...)
		if !strings.Contains(out, "delivered") {
			t.Errorf("endpoints test %s printed %q", name, out)
		}
		waitFor(t, "the "+name+" test event received", 10*time.Second, func() bool { return received() == 1 })
	}

	errText := runFailsWith(t, command(append([]string{"endpoints", "update", "--url", "https://partner.example/hooks", "nats"}, db...)...), 2)
	if !strings.Contains(errText, "has no secret") || !strings.Contains(errText, "postbox endpoints rotate-secret --grace 0 "+ids["nats"]) {
		t.Errorf("update of a broker's endpoint to a webhook's URL said %q", errText)
	}
	runOK(t, append([]string{"endpoints", "rotate-secret", "--grace", "0", "nats"}, db...)...)
	runOK(t, append([]string{"endpoints", "update", "--url", "https://partner.example/hooks", "nats"}, db...)...)
}

// postbox relay --endpoints fans each event out to a webhook, a NATS
// subject, a RabbitMQ exchange and a Kafka topic, each receiving it once,
// and says at start which kinds endpoints may be.
func TestEndpointsRelayFansOutToBrokers(t *testing.T) {
	s, db := schemaStore(t)
	b := newBrokerEndpoints(t)
	hook := receiver.New(t, secret, nil)
	addEndpointCmd(t, db, "--url", hook.URL, "--allow-private", "--secret", secret)
	for _, url := range []string{b.nats, b.amqp, b.kafka} {
		addEndpointCmd(t, db, "--url", url)
	}
	const n = 10
	for i := range n {
		insertTyped(t, s, fmt.Sprint(i), "order.created")
	}
	logs, _ := startRelayLogged(t, append(db, "--endpoints", "--poll", "50ms")...)
	hook.WaitAccepted(t, n, 30*time.Second)
	once := func(ids map[string]int) bool {
		for _, c := range ids {
			if c != 1 {
				return false
			}
		}
		return len(ids) == n
	}
	waitFor(t, "each broker received every event once", 30*time.Second, func() bool {
		return once(b.natsIDs()) && once(b.kafkaIDs()) && b.queueCount() == n
	})
	for _, want := range []string{"kinds=\"webhook (http, https), nats (nats), amqp (amqp, amqps), kafka (kafka)\"", "delivers_to=\"nats ", "delivers_to=\"kafka "} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the relay's log does not say %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs.String(), "guest:guest") {
		t.Errorf("the relay's log shows the RabbitMQ password:\n%s", logs)
	}
}
