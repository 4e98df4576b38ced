package service_test

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/service"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/nats"
	"github.com/postbox-go/postbox/sink/webhook/guard"
	"github.com/postbox-go/postbox/store"
)

// With EndpointsConfig.Kinds, endpoints mode delivers to a NATS endpoint
// beside a webhook, on both stores; its start line says which kinds
// endpoints may be and how many endpoints each kind has. An endpoint of a
// kind not offered gets no lane, its deliveries waiting.
func TestEndpointsModeDeliversToBrokerEndpoints(t *testing.T) {
	t.Run("postgres", func(t *testing.T) { t.Parallel(); endpointsModeBrokers(t, pgStores(t)) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); endpointsModeBrokers(t, sqliteStores(t)) })
}

func endpointsModeBrokers(t *testing.T, s stores) {
	ctx := context.Background()
	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, nil)
	hook := receiver.New(t, secret, nil)
	var amqpEndpoint store.Endpoint
	for _, e := range []store.Endpoint{
		{Name: "hook", URL: hook.URL, Secret: secret, Concurrency: 4},
		{Name: "nats", URL: natstest.URL() + "?subject=" + prefix + ".{event_type}", Concurrency: 4},
		{Name: "amqp", URL: "amqp://127.0.0.1:5672/?exchange=not-offered", Concurrency: 4},
	} {
		created, err := s.endpoints.EndpointCreate(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if e.Name == "amqp" {
			amqpEndpoint = created
		}
	}
	const n = 10
	enqueue(t, s.outbox, n)
	logs := &logbuf.Buffer{}
	r, err := service.NewRelay(ctx, service.RelayConfig{
		Outbox: s.outbox,
		Endpoints: &service.EndpointsConfig{Keyring: testKeyring, Store: s.endpoints, Kinds: []sink.URLKind{nats.URL},
			Guard: guard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}},
		Relay: relay.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), PollInterval: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`kinds="webhook (http, https), nats (nats)"`, `by_kind="webhook 1, nats 1, of a scheme no kind has 1 (not delivered to)"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the start lines do not say %q:\n%s", want, logs)
		}
	}
	stop := start(t, r)
	defer stop()
	hook.WaitAccepted(t, n, 20*time.Second)
	waitFor(t, "the NATS endpoint received every event once", func() bool {
		ids := natstest.MessageIDs(t, st)
		for _, c := range ids {
			if c != 1 {
				return false
			}
		}
		return len(ids) == n
	})
	c, err := s.endpoints.DeliveryCounts(ctx, amqpEndpoint.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pending != n {
		t.Errorf("the endpoint of a kind not offered has deliveries %+v, want all %d pending", c, n)
	}
	if !strings.Contains(logs.String(), `unknown scheme \"amqp\"`) {
		t.Errorf("the endpoint of a kind not offered is not said refused:\n%s", logs)
	}
}
