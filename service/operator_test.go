package service_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/service"
	"github.com/postbox-go/postbox/sink/webhook/guard"
	"github.com/postbox-go/postbox/store"
)

// With EndpointsConfig.OperatorEvents, endpoints mode writes operator
// events into RelayConfig.Outbox (no Outbox of their own given): an
// endpoint disabled for failing reaches the endpoint subscribed to
// postbox.endpoint.*, once, and postbox_operator_events_total counts it;
// the start line says they are on, with their thresholds and
// subscribers. Without it, the start line says they are off.
func TestEndpointsModeWritesOperatorEvents(t *testing.T) {
	t.Run("postgres", func(t *testing.T) { t.Parallel(); endpointsModeOperatorEvents(t, pgStores(t)) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); endpointsModeOperatorEvents(t, sqliteStores(t)) })
}

func endpointsModeOperatorEvents(t *testing.T, s stores) {
	ctx := context.Background()
	down := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		return http.StatusInternalServerError
	})
	ops := receiver.New(t, secret, nil)
	var downID string
	for _, e := range []store.Endpoint{
		{Name: "down", URL: down.URL, Secret: secret, Concurrency: 4},
		{Name: "ops", URL: ops.URL, Types: []string{"postbox.endpoint.*"}, Secret: secret, Concurrency: 4},
	} {
		created, err := s.endpoints.EndpointCreate(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if e.Name == "down" {
			downID = created.ID.String()
		}
	}
	newRelay := func(events *endpoint.OperatorEventsConfig, reg *prometheus.Registry) (*service.Relay, *logbuf.Buffer) {
		logs := &logbuf.Buffer{}
		r, err := service.NewRelay(ctx, service.RelayConfig{
			Outbox: s.outbox, Metrics: reg,
			Endpoints: &service.EndpointsConfig{Keyring: testKeyring, Store: s.endpoints, DisableAfter: 300 * time.Millisecond,
				Guard: guard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, OperatorEvents: events},
			Relay: relay.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), PollInterval: 50 * time.Millisecond,
				BackoffMin: 50 * time.Millisecond, BackoffMax: 100 * time.Millisecond, MaxAttempts: 1000},
		})
		if err != nil {
			t.Fatal(err)
		}
		return r, logs
	}
	if _, logs := newRelay(nil, prometheus.NewRegistry()); !strings.Contains(logs.String(), "operator_events=off") {
		t.Errorf("without OperatorEvents the start line does not say they are off:\n%s", logs)
	}

	reg := prometheus.NewRegistry()
	r, logs := newRelay(&endpoint.OperatorEventsConfig{DeadLetters: 50}, reg)
	for _, want := range []string{`operator_events="on: postbox.endpoint.failing after 5m0s of failures`, "postbox.deadletters.grew each 50 dead letters of a group (checked every 1m0s)", "operator_event_subscribers=1"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the start line does not say %q:\n%s", want, logs)
		}
	}
	start(t, r)
	enqueue(t, s.outbox, 3)
	waitFor(t, "the disabled event at the ops endpoint", func() bool {
		for _, d := range ops.Accepted() {
			if d.EventType == endpoint.EventEndpointDisabled && d.AggregateID == downID {
				return true
			}
		}
		return false
	})
	waitFor(t, "the event counted", func() bool { return metric(t, reg, "postbox_operator_events_total") == 1 })
	for _, d := range ops.Accepted() {
		if d.EventType != endpoint.EventEndpointDisabled {
			t.Errorf("the ops endpoint received a %s", d.EventType)
		}
	}
}
