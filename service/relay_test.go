package service_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/service"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/sink/webhook/guard"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// stores is a database as the service takes it: through the contracts.
type stores struct {
	outbox    store.Outbox
	endpoints store.Endpoints
	presence  store.Presence
}

// pgStores is a migrated PostgreSQL store in a fresh schema.
func pgStores(t *testing.T) stores {
	s := pgtest.Store(t)
	d := s.Driver()
	return stores{d, d, d}
}

// sqliteStores is a migrated SQLite store in a new file.
func sqliteStores(t *testing.T) stores {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	d := s.Driver()
	return stores{d, d, d}
}

// enqueue writes n events of type order.created to s's outbox.
func enqueue(t *testing.T, s store.Outbox, n int) {
	t.Helper()
	for i := range n {
		ev := postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: fmt.Sprint(i),
			EventType: "order.created", Payload: []byte(fmt.Sprintf(`{"order":%d}`, i))}
		if err := s.Enqueue(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
}

// start runs r until the test ends, then checks that Run returned nil.
func start(t *testing.T, r *service.Relay) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond every 20ms, failing the test after 20 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// presences reads the presence table.
func presences(t *testing.T, s store.Presence) []store.RelayPresence {
	t.Helper()
	rows, err := s.RelayPresences(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// metric is the sum of the samples of the metric name gathered from reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += value(m)
		}
	}
	return sum
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return 0
}

// In sink mode the service delivers the outbox through the sink, on
// PostgreSQL and on SQLite alike; the relay's presence row, describing the
// sink as given, appears while it runs and is gone once Run returned; the
// metrics count the deliveries, and the relay is ready.
func TestSinkModeDeliversWithPresence(t *testing.T) {
	for name, open := range map[string]func(*testing.T) stores{"postgres": pgStores, "sqlite": sqliteStores} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			rcv := receiver.New(t, secret, nil)
			sk, err := webhook.New(webhook.Config{URL: rcv.URL, Secrets: []string{secret}})
			if err != nil {
				t.Fatal(err)
			}
			const n = 20
			enqueue(t, s.outbox, n)
			reg := prometheus.NewRegistry()
			r, err := service.NewRelay(context.Background(), service.RelayConfig{
				Outbox: s.outbox, Sink: sk, Metrics: reg,
				Presence: &service.PresenceConfig{Store: s.presence, Sink: "webhook under test", Version: "v-test"},
				Relay:    relay.Config{Logger: testlog.Discard(), PollInterval: 50 * time.Millisecond},
			})
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, r)
			rcv.WaitAccepted(t, n, 20*time.Second)
			waitFor(t, "the presence row", func() bool { return len(presences(t, s.presence)) == 1 })
			if p := presences(t, s.presence)[0]; p.Sink != "webhook under test" || p.Version != "v-test" {
				t.Errorf("presence row %+v, want the sink and version given", p)
			}
			waitFor(t, "the deliveries counted", func() bool { return metric(t, reg, "postbox_deliveries_total") == n })
			waitFor(t, "the relay ready", r.Ready)
			if got := metric(t, reg, "postbox_relay_ready"); got != 1 {
				t.Errorf("postbox_relay_ready = %v while the relay runs, want 1", got)
			}
			stop()
			if rows := presences(t, s.presence); len(rows) != 0 {
				t.Errorf("after Run returned, the presence table holds %+v", rows)
			}
			if r.Ready() {
				t.Error("Ready after Run returned")
			}
		})
	}
}

// In endpoints mode the service fans each event out to every matching
// endpoint, through the SSRF guard: one endpoint reachable because it was
// added with AllowPrivate, the other because the guard allows its address;
// a third, which matches no event, receives nothing. The start line says
// what endpoints mode does, the presence row says endpoints mode, and the
// endpoint counters count the lanes.
// Without Presence the relay keeps no presence row, and still observes its
// sink going down (the heartbeat is the observer that is left out, not a
// nil one that would be called).
func TestWithoutPresenceTheSinkCanGoDown(t *testing.T) {
	t.Parallel()
	s := sqliteStores(t)
	sk, err := webhook.New(webhook.Config{URL: "http://127.0.0.1:1/", Secrets: []string{secret}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := service.NewRelay(context.Background(), service.RelayConfig{
		Outbox: s.outbox, Sink: sk, Metrics: reg,
		Relay: relay.Config{Logger: testlog.Discard(), PollInterval: 50 * time.Millisecond, ProbeInterval: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, s.outbox, 3)
	stop := start(t, r)
	waitFor(t, "the sink found down", func() bool {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "postbox_relay_sink_up" && len(f.GetMetric()) > 0 {
				return metric(t, reg, "postbox_relay_sink_up") == 0
			}
		}
		return false // no series yet: the relay has not published
	})
	stop()
	if rows := presences(t, s.presence); len(rows) != 0 {
		t.Errorf("presence rows without Presence: %+v", rows)
	}
}

func TestEndpointsModeFansOut(t *testing.T) {
	ctx := context.Background()
	s := pgStores(t)
	private, allowed, other := receiver.New(t, secret, nil), receiver.New(t, secret, nil), receiver.New(t, secret, nil)
	for _, e := range []store.Endpoint{
		{Name: "private", URL: private.URL, Secret: secret, Concurrency: 4, AllowPrivate: true},
		{Name: "allowed", URL: allowed.URL, Types: []string{"order.*"}, Secret: secret, Concurrency: 4},
		{Name: "other", URL: other.URL, Types: []string{"invoice.*"}, Secret: secret, Concurrency: 4, AllowPrivate: true},
	} {
		if _, err := s.endpoints.EndpointCreate(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	const n = 20
	enqueue(t, s.outbox, n)
	logs := &logbuf.Buffer{}
	reg := prometheus.NewRegistry()
	r, err := service.NewRelay(ctx, service.RelayConfig{
		Outbox: s.outbox, Metrics: reg,
		Endpoints: &service.EndpointsConfig{Keyring: testKeyring, Store: s.endpoints, Guard: guard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}},
		Presence:  &service.PresenceConfig{Store: s.presence},
		Relay:     relay.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), PollInterval: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"endpoints mode", "endpoints=3", "enabled=3", "allowed_private=2", "ssrf_guard=\"on, refusing private addresses but 127.0.0.1/32"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the start lines do not say %q:\n%s", want, logs)
		}
	}
	stop := start(t, r)
	private.WaitAccepted(t, n, 20*time.Second)
	allowed.WaitAccepted(t, n, 20*time.Second)
	waitFor(t, "the presence row", func() bool { return len(presences(t, s.presence)) == 1 })
	if p := presences(t, s.presence)[0]; p.Mode != "endpoints" || p.Sink != "endpoints from the database" {
		t.Errorf("presence row %+v, want endpoints mode", p)
	}
	if got := metric(t, reg, "postbox_endpoint_lanes"); got != 3 {
		t.Errorf("postbox_endpoint_lanes = %v, want 3", got)
	}
	stop()
	if len(other.Accepted()) != 0 {
		t.Errorf("the endpoint of invoice.* received %d order events", len(other.Accepted()))
	}
	if rows := presences(t, s.presence); len(rows) != 0 {
		t.Errorf("after Run returned, the presence table holds %+v", rows)
	}
	if !strings.Contains(logs.String(), "endpoints mode stopped") {
		t.Errorf("no stop line:\n%s", logs)
	}
}

// A RelayConfig that cannot run is refused before anything runs, with a
// *ConfigError naming the field at fault and saying why.
func TestNewRelayRefusesWrongConfigs(t *testing.T) {
	s := sqliteStores(t)
	sk, err := webhook.New(webhook.Config{URL: "http://127.0.0.1:1/", Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	quiet := relay.Config{Logger: testlog.Discard()}
	withRelay := func(f func(*relay.Config)) relay.Config {
		c := quiet
		f(&c)
		return c
	}
	for _, c := range []struct {
		name  string
		cfg   service.RelayConfig
		field string
		want  string
	}{
		{"no outbox", service.RelayConfig{Sink: sk}, "Outbox", "required"},
		{"no sink", service.RelayConfig{Outbox: s.outbox}, "Sink", "required, unless Endpoints is set"},
		{"two sinks", service.RelayConfig{Outbox: s.outbox, Sink: sk, Endpoints: &service.EndpointsConfig{Keyring: testKeyring, Store: s.endpoints}}, "Sink", "not both"},
		{"the relay's store given", service.RelayConfig{Outbox: s.outbox, Sink: sk, Relay: withRelay(func(c *relay.Config) { c.Store = s.outbox })}, "Relay", "leave Store and Sink nil"},
		{"the relay's settings", service.RelayConfig{Outbox: s.outbox, Sink: sk, Relay: withRelay(func(c *relay.Config) { c.BackoffMin, c.BackoffMax = time.Minute, time.Second })}, "Relay", "BackoffMax"},
		{"the lanes' settings", service.RelayConfig{Outbox: s.outbox, Endpoints: &service.EndpointsConfig{Keyring: testKeyring, Store: s.endpoints, BreakerFailures: -1}, Relay: quiet}, "Endpoints", "BreakerFailures"},
		{"endpoints without their store", service.RelayConfig{Outbox: s.outbox, Endpoints: &service.EndpointsConfig{}, Relay: quiet}, "Endpoints", "Store is required"},
		{"endpoints without the secrets key", service.RelayConfig{Outbox: s.outbox, Endpoints: &service.EndpointsConfig{Store: s.endpoints}, Relay: quiet}, "Endpoints", "Keyring is required"},
		{"the guard", service.RelayConfig{Outbox: s.outbox, Endpoints: &service.EndpointsConfig{Keyring: testKeyring, Store: s.endpoints, Guard: guard.Config{Allow: []netip.Prefix{{}}}}, Relay: quiet}, "Endpoints.Guard", "not a valid prefix"},
		{"presence without a store", service.RelayConfig{Outbox: s.outbox, Sink: sk, Presence: &service.PresenceConfig{}, Relay: quiet}, "Presence", "Store is required"},
		{"the heartbeat", service.RelayConfig{Outbox: s.outbox, Sink: sk, Presence: &service.PresenceConfig{Store: s.presence, Every: -time.Second}, Relay: quiet}, "Presence", "Every"},
		{"the sampling", service.RelayConfig{Outbox: s.outbox, Sink: sk, Metrics: prometheus.NewRegistry(), MetricsSample: -time.Second, Relay: quiet}, "MetricsSample", "Every"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := service.NewRelay(context.Background(), c.cfg)
			var refused *service.ConfigError
			if !errors.As(err, &refused) || r != nil {
				t.Fatalf("NewRelay: %v, %v; want a *ConfigError", r, err)
			}
			if refused.Field != c.field || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewRelay refused %s: %v; want field %s, saying %q", refused.Field, err, c.field, c.want)
			}
		})
	}
}

// Endpoints mode needs the outbox migrated before it reads the endpoints:
// NewRelay returns the store's error, which says what to run, and no
// ConfigError.
func TestEndpointsModeOnUnmigratedTables(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "empty.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = service.NewRelay(ctx, service.RelayConfig{Outbox: s.Driver(), Endpoints: &service.EndpointsConfig{Keyring: testKeyring, Store: s.Driver()},
		Relay: relay.Config{Logger: testlog.Discard()}})
	if !errors.Is(err, store.ErrNotMigrated) || errors.As(err, new(*service.ConfigError)) {
		t.Fatalf("NewRelay on unmigrated tables: %v, want store.ErrNotMigrated", err)
	}
}
