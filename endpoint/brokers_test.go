package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/postboxtest/netfault"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// outboxEndpoints is a store's driver as endpoints mode takes it.
type outboxEndpoints interface {
	store.Outbox
	store.Endpoints
}

// sqliteDriver is a migrated SQLite store in a new file.
func sqliteDriver(t *testing.T) *sqlite.Driver {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "postbox.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s.Driver()
}

// enqueueIDs is enqueue of n order.created events, their ids as text.
func enqueueIDs(t *testing.T, s store.Outbox, n int) []string {
	t.Helper()
	var ids []string
	for _, id := range enqueue(t, s, "order.created", n) {
		ids = append(ids, id.String())
	}
	return ids
}

// counter counts the event ids a destination received.
type counter struct {
	mu  sync.Mutex
	ids map[string]int
}

func (c *counter) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[string]int{}
	}
	c.ids[id]++
}

// exactlyOnce reports whether the ids received are exactly want, each
// once, and says what differs when not.
func (c *counter) exactlyOnce(want []string) (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range want {
		if c.ids[id] != 1 {
			return false, fmt.Sprintf("event %s received %d times", id, c.ids[id])
		}
	}
	if len(c.ids) != len(want) {
		return false, fmt.Sprintf("%d distinct events received, want %d", len(c.ids), len(want))
	}
	return true, ""
}

// self returns c: a counter that counts as it receives.
func (c *counter) self() *counter { return c }

// waitExactlyOnce waits until got returns a counter of exactly ids, each
// once, failing t after timeout with what differs.
func waitExactlyOnce(t *testing.T, timeout time.Duration, name string, got func() *counter, ids []string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := got().exactlyOnce(ids)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after %v: %s", name, timeout, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// natsCounter counts, until the test ends, the ids of what st receives.
func natsCounter(t *testing.T, st jetstream.Stream) *counter {
	c := &counter{}
	cons, err := st.OrderedConsumer(t.Context(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) { c.add(m.Headers().Get(postbox.HeaderEventID)) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return c
}

// One event fans out to a mix of endpoints, a webhook, a NATS subject, a
// RabbitMQ exchange (its queue) and a Kafka topic, each receiving each
// event exactly once, on both stores, with deliveries written first and
// with the fan-out delivering directly; the attempts log holds the
// brokers' attempts, without a status code nor an answer.
func TestFanOutToEveryKindOfEndpoint(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		store  func(*testing.T) outboxEndpoints
		direct bool
	}{
		{"postgres/written first", func(t *testing.T) outboxEndpoints { return pgStore(t) }, false},
		{"postgres/direct", func(t *testing.T) outboxEndpoints { return pgStore(t) }, true},
		{"sqlite/written first", func(t *testing.T) outboxEndpoints { return sqliteDriver(t) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fanOutToEveryKind(t, c.store(t), c.direct)
		})
	}
}

func fanOutToEveryKind(t *testing.T, s outboxEndpoints, direct bool) {
	const n = 30
	hook := receiver.New(t, secret, nil)

	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, nil)
	natsGot := natsCounter(t, st)

	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	rabbitGot := &counter{}
	consumeQueue(t, srv.Queue(exchange, "#", nil), func(d amqp091.Delivery) { rabbitGot.add(d.MessageId) })

	_, brokers := kafkatest.NewCluster(t)
	topic := newTopic(t, brokers)
	kafkaReader := kafkatest.NewReader(t, brokers, topic)

	endpoints := map[string]store.Endpoint{
		"webhook": addEndpoint(t, s, "webhook", hook.URL+"/hidden-path", nil),
		"nats":    addEndpoint(t, s, "nats", natstest.URL()+"?subject="+prefix+".{event_type}", nil),
		"amqp":    addEndpoint(t, s, "amqp", amqptest.URL()+"?exchange="+exchange, nil),
		"kafka":   addEndpoint(t, s, "kafka", kafkatest.URL(brokers, "topic="+topic), nil),
	}
	var logs logbuf.Buffer
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
		c.Kinds = brokerKinds
		c.KeepDelivered = !direct
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	waitFor(t, 20*time.Second, "the four lanes running", func() bool { return sup.Stats().Lanes == 4 })
	startRelay(t, s, sup.FanOut(), nil)
	var ids []string
	if direct {
		// One event first, written for the lanes, which measure the
		// endpoints with it: the next ones are offered.
		ids = enqueueIDs(t, s, 1)
		waitFor(t, 20*time.Second, "the first event delivered to each endpoint", func() bool { return sup.Stats().Delivered == 4 })
	}
	ids = append(ids, enqueueIDs(t, s, n)...)
	hookGot := func() *counter {
		c := &counter{}
		for _, d := range hook.Accepted() {
			c.add(d.ID)
		}
		return c
	}
	kafkaGot := func() *counter {
		c := &counter{}
		for _, rec := range kafkaReader.Records() {
			c.add(kafkatest.Header(rec, postbox.HeaderEventID))
		}
		return c
	}
	total := int64(4 * len(ids))
	waitFor(t, 60*time.Second, "every endpoint's deliveries made", func() bool { return sup.Stats().Delivered == total })
	for name, got := range map[string]func() *counter{
		"webhook": hookGot, "nats": natsGot.self, "amqp": rabbitGot.self, "kafka": kafkaGot,
	} {
		waitExactlyOnce(t, 20*time.Second, "the "+name+" endpoint", got, ids)
	}
	if st := sup.Stats(); st.Failed != 0 || st.Retried != 0 || direct != (st.Direct > 0) {
		t.Errorf("stats = %+v: want nothing failed nor retried, and deliveries made directly exactly when offered", st)
	}
	for _, name := range []string{"nats", "amqp", "kafka"} {
		e := endpoints[name]
		var attempts []store.Attempt
		waitFor(t, 10*time.Second, "the "+name+" endpoint's attempts logged", func() bool {
			var err error
			attempts, err = s.AttemptList(context.Background(), e.ID, 2*n)
			return err == nil && len(attempts) == len(ids)
		})
		for _, a := range attempts {
			if a.StatusCode != 0 || a.Response != "" || a.Error != "" || a.Attempt != 1 {
				t.Errorf("%s endpoint's attempt %+v: want a first attempt that succeeded, no status code nor answer", name, a)
			}
		}
	}
	for _, want := range []string{
		"delivers_to=\"nats " + natstest.URL() + " subject=" + prefix + ".{event_type}\"",
		"delivers_to=\"amqp ", "exchange=" + exchange,
		"delivers_to=\"kafka kafka://", "topic=" + topic,
		"delivers_to=\"webhook http://127.0.0.1",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the lanes' start lines do not say %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "guest:guest") || strings.Contains(logs.String(), "hidden-path") {
		t.Errorf("a lane's start line shows a password or a webhook's path:\n%s", logs.String())
	}
}

// A broker endpoint whose broker is down (its port refuses connections)
// holds back no other endpoint: the webhook beside it receives every event
// while the broker's deliveries wait, its sink's failure to open logged
// once however many refreshes try it again. Once the broker is reachable
// the next refresh opens the sink (logged once) and its deliveries go,
// each once.
func TestBrokerEndpointDownDelaysNoOtherEndpoint(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	const n = 20
	hook := receiver.New(t, secret, nil)
	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, nil)
	natsGot := natsCounter(t, st)
	target, err := url.Parse(natstest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := netfault.NewProxy(target.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	if err := proxy.SetRefusing(true); err != nil {
		t.Fatal(err)
	}
	addEndpoint(t, s, "webhook", hook.URL, nil)
	broker := addEndpoint(t, s, "nats", "nats://"+proxy.Addr()+"?subject="+prefix+".{event_type}", nil)
	var logs logbuf.Buffer
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
		c.Kinds = brokerKinds
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.Relay.Logger = c.Logger
	})
	ids := enqueueIDs(t, s, n)
	startRelay(t, s, sup.FanOut(), nil)

	hook.WaitAccepted(t, n, 20*time.Second)
	const cannotOpen = "its sink cannot be opened"
	waitFor(t, 10*time.Second, "the broker's sink failing to open logged", func() bool { return strings.Contains(logs.String(), cannotOpen) })
	// Ten refreshes more: each tries the sink again, none logs it again.
	time.Sleep(10 * 100 * time.Millisecond)
	if c := counts(t, s, broker.ID); c.Pending != n {
		t.Errorf("the broker endpoint's deliveries %+v while its broker is down, want all %d pending", c, n)
	}
	if got := strings.Count(logs.String(), cannotOpen); got != 1 {
		t.Errorf("the sink that cannot be opened was logged %d times, want once:\n%s", got, logs.String())
	}
	if st := sup.Stats(); st.Lanes != 1 {
		t.Errorf("stats = %+v, want the webhook's lane alone running", st)
	}

	if err := proxy.SetRefusing(false); err != nil {
		t.Fatal(err)
	}
	waitExactlyOnce(t, 30*time.Second, "the broker endpoint", natsGot.self, ids)
	waitFor(t, 10*time.Second, "the broker endpoint's deliveries done", func() bool { return counts(t, s, broker.ID) == store.DeliveryCounts{Done: n} })
	if got := strings.Count(logs.String(), "endpoint's sink opened"); got != 1 {
		t.Errorf("the sink opened after failing was logged %d times, want once:\n%s", got, logs.String())
	}
	if got := strings.Count(logs.String(), cannotOpen); got != 1 {
		t.Errorf("the sink that cannot be opened was logged %d times, want once:\n%s", got, logs.String())
	}
}

// An endpoint whose scheme no kind has gets no lane, logged once however
// many refreshes pass, and its deliveries wait, as an auto-disabled
// endpoint's do; the endpoint beside it is delivered to.
func TestEndpointOfAnUnknownSchemeWaits(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	const n = 5
	hook := receiver.New(t, secret, nil)
	addEndpoint(t, s, "webhook", hook.URL, nil)
	mqtt := addEndpoint(t, s, "mqtt", "mqtt://broker.example:1883/orders", nil)
	var logs logbuf.Buffer
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
		c.Kinds = brokerKinds
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	fanOut(t, sup.FanOut(), "a", "b", "c", "d", "e")
	hook.WaitAccepted(t, n, 20*time.Second)
	time.Sleep(10 * 100 * time.Millisecond) // ten refreshes
	const refused = "its lane cannot start until its settings change"
	if got := strings.Count(logs.String(), refused); got != 1 {
		t.Errorf("the endpoint of an unknown scheme was logged %d times, want once:\n%s", got, logs.String())
	}
	for _, want := range []string{`unknown scheme \"mqtt\"`, "nats", "amqps", "kafka", "https"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, logs.String())
		}
	}
	if c := counts(t, s, mqtt.ID); c.Pending != n {
		t.Errorf("the unknown scheme's deliveries %+v, want all %d pending", c, n)
	}
}

// leakyKind is a sink kind whose Open quotes its whole URL in its error, as
// a careless driver's might.
var leakyKind = sink.URLKind{
	Name: "leaky", Schemes: []string{"leaky"},
	Open: func(_ context.Context, u *url.URL, _ sink.URLOptions) (sink.Sink, error) {
		return nil, fmt.Errorf("leaky: cannot reach %s: %w", u.String(), errors.New("connection refused"))
	},
}

// No password, token nor secret parameter of a broker endpoint's URL
// reaches a log line or OpenSink's error: not the real kinds' errors for a
// broker that cannot be reached, and not those of a kind that quotes its
// URL, whose errors OpenSink scrubs.
func TestBrokerEndpointCredentialsNeverLogged(t *testing.T) {
	t.Parallel()
	const password, token, param = "pa55-w0rd-Secret", "t0ken-Secret", "sasl-Secret"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	urls := []string{
		"amqp://guest:" + password + "@" + closed + "/?exchange=x",
		"nats://user:" + password + "@" + closed + "?subject=s.{event_type}",
		"nats://" + token + "@" + closed + "?subject=s.{event_type}",
		"kafka://user:" + password + "@" + closed + "?topic=t&sasl=plain",
		"leaky://user:" + password + "@" + closed + "/?key=" + param,
		"leaky://" + token + "@" + closed + "/",
	}
	kinds := append([]sink.URLKind{leakyKind}, brokerKinds...)
	leaks := func(text string) bool {
		return strings.Contains(text, password) || strings.Contains(text, token) || strings.Contains(text, param)
	}
	for _, u := range urls {
		e := store.Endpoint{ID: uuid.New(), URL: u, Concurrency: 1}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := endpoint.OpenSink(ctx, endpoint.SinkConfig{Kinds: kinds, Logger: slog.New(slog.DiscardHandler)}, e, time.Now())
		cancel()
		if err == nil {
			t.Fatalf("OpenSink of a closed port succeeded")
		}
		if leaks(err.Error()) {
			t.Errorf("OpenSink's error shows a credential: %v", err)
		}
		if desc := endpoint.DescribeURL(kinds, u); leaks(desc) {
			t.Errorf("DescribeURL shows a credential: %s", desc)
		}
	}

	s := pgStore(t)
	for i, u := range urls {
		addEndpoint(t, s, fmt.Sprint("broker", i), u, nil)
	}
	var logs logbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
		c.Kinds = kinds
		c.Logger, c.Relay.Logger = logger, logger
	})
	waitFor(t, 20*time.Second, "every endpoint's failure to open logged", func() bool {
		return strings.Count(logs.String(), "its sink cannot be opened") == len(urls)
	})
	if leaks(logs.String()) {
		t.Errorf("the logs show a credential:\n%s", logs.String())
	}
}

// CheckURL takes the URLs of every kind whose parameters their kind takes,
// connecting nowhere, and refuses the others with a *sink.OptionError that
// names what is wrong and shows no password.
func TestCheckURL(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"https://partner.example/hooks?token=x",
		"http://127.0.0.1:1/in",
		"nats://127.0.0.1:1?subject=orders.{event_type}",
		"amqp://guest:guest@127.0.0.1:1/?exchange=orders",
		"kafka://127.0.0.1:1?topic=orders",
	} {
		if err := endpoint.CheckURL(brokerKinds, ok); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", ok, err)
		}
	}
	const password = "pa55-w0rd-Secret"
	for bad, why := range map[string]string{
		"ftp://x/":                                       `unknown scheme "ftp"`,
		"https:///no-host":                               "absolute",
		"mailto:someone@example.com":                     `unknown scheme "mailto"`,
		"http:opaque":                                    "absolute",
		"https://partner.example:99999/hooks":            "port 99999: want 1 to 65535",
		"http://partner.example:0/hooks":                 "port 0",
		"not a url":                                      "not a URL",
		"nats://u:" + password + "@h:4222/orders":        "path",
		"nats://u:" + password + "@h:4222?subj=x":        "unknown URL parameter",
		"amqp://u:" + password + "@h/?exchange=x&x=1":    "unknown parameter",
		"kafka://u:" + password + "@h?topic=t&sasl=nope": "sasl",
	} {
		err := endpoint.CheckURL(brokerKinds, bad)
		var refused *sink.OptionError
		if !errors.As(err, &refused) {
			t.Errorf("CheckURL(%q) = %v, want a *sink.OptionError", sink.Redact(bad), err)
			continue
		}
		if !strings.Contains(err.Error(), why) || strings.Contains(err.Error(), password) {
			t.Errorf("CheckURL(%q) = %v, want it to say %q and show no password", sink.Redact(bad), err, why)
		}
	}
}

// Whatever an endpoint's URL holds, CheckURL, DescribeURL and OpenSink's
// refusal of it never show its password: a URL of each scheme, with a
// host, a path and a query the fuzzer makes.
func FuzzEndpointURLNeverShowsItsPassword(f *testing.F) {
	for _, seed := range [][4]string{
		{"nats", "127.0.0.1:1", "", "subject=a.{event_type}"},
		{"nats", "h:4222", "/orders.events", ""},
		{"amqp", "h", "/vhost", "exchange=x&routing_key={event_type}"},
		{"amqps", "h:5671", "", "exchange="},
		{"kafka", "b1:9092,b2:9092", "", "topic=t&sasl=plain"},
		{"kafka", "b1", "/x", "tls=maybe"},
		{"https", "partner.example", "/hooks/tok", "a=b"},
		{"mqtt", "h", "", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	const password = "Fz-pa55w0rd-Secret"
	f.Fuzz(func(t *testing.T, scheme, host, path, query string) {
		if strings.Contains(host+path+query+scheme, password) {
			return
		}
		raw := (&url.URL{Scheme: scheme, User: url.UserPassword("user", password), Host: host, Path: path, RawQuery: query}).String()
		if err := endpoint.CheckURL(brokerKinds, raw); err != nil && strings.Contains(err.Error(), password) {
			t.Errorf("CheckURL(%q) shows the password: %v", raw, err)
		}
		if desc := endpoint.DescribeURL(brokerKinds, raw); strings.Contains(desc, password) {
			t.Errorf("DescribeURL(%q) shows the password: %s", raw, desc)
		}
		if _, _, err := endpoint.LookupKind(brokerKinds, raw); err != nil && strings.Contains(err.Error(), password) {
			t.Errorf("LookupKind(%q) shows the password: %v", raw, err)
		}
	})
}
