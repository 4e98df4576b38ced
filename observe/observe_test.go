package observe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/observe"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func newMetrics(t testing.TB, opts observe.Options) (*prometheus.Registry, *observe.Prometheus) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := observe.NewPrometheus(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return reg, m
}

// runRelay runs a relay until the test ends, or stop is called
// (relaytest.Start), into a webhook receiver unless cfg has a sink.
func runRelay(t *testing.T, cfg relay.Config) (r *relaytest.Running, stop func()) {
	t.Helper()
	if cfg.Sink == nil {
		rcv := receiver.New(t, secret, nil)
		cfg.Sink = newSink(t, rcv.URL)
	}
	r = relaytest.Start(t, cfg)
	return r, r.Stop
}

func newSink(t *testing.T, url string) *webhook.Sink {
	t.Helper()
	s, err := webhook.New(webhook.Config{URL: url, Secrets: []string{secret}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func event(eventType, aggregateID string) postbox.Event {
	return postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: aggregateID,
		EventType: eventType, Payload: []byte(`{}`)}
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// value returns the value of the counter or gauge name with the given
// labels (all of them, or a subset: the matching series are summed), or
// the sample count of a histogram.
func value(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

// A relay delivering 100 events, a fifth of them answered 503 once, and one
// answered 410, moves every delivery metric, and the outbox gauges follow
// the store: 101 pending with an age before, one failed after.
func TestRelayMetricsMove(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	reg, m := newMetrics(t, observe.Options{})
	sampler, err := m.NewOutboxSampler(s, observe.SamplerConfig{Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rcv := receiver.New(t, secret, func(_ http.ResponseWriter, _ *http.Request, d receiver.Delivery, n int) int {
		switch {
		case d.AggregateID == "gone":
			return http.StatusGone
		case d.EventType == "order.flaky" && n == 1:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	events := make([]postbox.Event, 0, 101)
	for i := range 100 {
		typ := "order.created"
		if i%5 == 0 {
			typ = "order.flaky"
		}
		events = append(events, event(typ, fmt.Sprint(i)))
	}
	events = append(events, event("order.created", "gone"))
	ctx := context.Background()
	if err := s.Enqueue(ctx, events...); err != nil {
		t.Fatal(err)
	}
	if err := sampler.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "postbox_outbox_events", map[string]string{"status": "pending"}); got != 101 {
		t.Errorf("outbox_events{status=pending} before the relay = %v, want 101", got)
	}
	if got := value(t, reg, "postbox_outbox_oldest_pending_age_seconds", nil); got <= 0 {
		t.Errorf("oldest pending age before the relay = %v, want > 0", got)
	}

	r, stop := runRelay(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL), Observer: m.Relay(),
		BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	delivered := map[string]string{"outcome": "delivered"}
	waitFor(t, "every outcome", 10*time.Second, func() bool {
		return value(t, reg, "postbox_deliveries_total", delivered) == 100 &&
			value(t, reg, "postbox_deliveries_total", map[string]string{"outcome": "failed"}) == 1
	})
	// Stopped, so that no claim comes between the reads of the counters
	// compared below (a running relay's empty claims still count).
	stop()
	st := r.Stats()
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"postbox_deliveries_total", map[string]string{"outcome": "retry", "event_type": "order.flaky"}, 20},
		{"postbox_deliveries_total", map[string]string{"outcome": "delivered", "event_type": "order.flaky"}, 20},
		{"postbox_deliveries_total", map[string]string{"outcome": "delivered", "event_type": "order.created"}, 80},
		{"postbox_deliveries_total", map[string]string{"outcome": "failed", "event_type": "order.created"}, 1},
		{"postbox_delivery_duration_seconds", nil, 121},
		{"postbox_event_lag_seconds", nil, 100},
		{"postbox_claimed_events_total", nil, float64(st.Claimed)},
		{"postbox_claim_errors_total", nil, 0},
	} {
		if got := value(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// 101 events and 20 retries, at least (an event may be claimed once
	// more, released, when its delivery is cut short).
	if got := value(t, reg, "postbox_claimed_events_total", nil); got < 121 {
		t.Errorf("claimed_events_total = %v, want at least 121", got)
	}
	if claims := value(t, reg, "postbox_claims_total", nil); claims < 1 || claims != value(t, reg, "postbox_claim_duration_seconds", nil) {
		t.Errorf("claims_total = %v, claim_duration_seconds count %v: want equal and positive", claims, value(t, reg, "postbox_claim_duration_seconds", nil))
	}
	if err := sampler.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	for status, want := range map[string]float64{"pending": 0, "processing": 0, "failed": 1} {
		if got := value(t, reg, "postbox_outbox_events", map[string]string{"status": status}); got != want {
			t.Errorf("outbox_events{status=%s} after the relay = %v, want %v", status, got, want)
		}
	}
}

// The events of a crashed relay are counted reclaimed, and leases renewed
// while a delivery lasts longer than a third of the lease.
func TestLeaseMetricsMove(t *testing.T) {
	// Not parallel: its 300 ms leases must be renewed in time (no lease
	// lost), which the load of tests run beside it may delay.
	s := pgtest.Store(t).Driver()
	ctx := context.Background()
	if err := s.Enqueue(ctx, event("order.created", "1"), event("order.created", "2"), event("order.created", "3")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, store.ClaimParams{Owner: "crashed", Limit: 10, Lease: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	reg, m := newMetrics(t, observe.Options{})
	rcv := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		time.Sleep(400 * time.Millisecond) // past a renewal (every lease/3)
		return http.StatusOK
	})
	runRelay(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL), Observer: m.Relay(), Lease: 300 * time.Millisecond})
	waitFor(t, "the crashed relay's events to be delivered", 10*time.Second, func() bool {
		return value(t, reg, "postbox_deliveries_total", map[string]string{"outcome": "delivered"}) == 3
	})
	if got := value(t, reg, "postbox_reclaimed_events_total", nil); got != 3 {
		t.Errorf("reclaimed_events_total = %v, want 3", got)
	}
	if got := value(t, reg, "postbox_lease_renewals_total", nil); got < 1 {
		t.Errorf("lease_renewals_total = %v, want at least 1", got)
	}
	if got := value(t, reg, "postbox_leases_lost_total", nil); got != 0 {
		t.Errorf("leases_lost_total = %v, want 0", got)
	}
}

// Lease renewals, their errors and lost leases are counted as the relay
// reports them.
func TestLeaseRenewalCounts(t *testing.T) {
	reg, m := newMetrics(t, observe.Options{})
	o := m.Relay()
	o.LeasesRenewed(10, 0, nil)
	o.LeasesRenewed(10, 4, nil)
	o.LeasesRenewed(10, 0, errors.New("connection refused"))
	for name, want := range map[string]float64{
		"postbox_lease_renewals_total": 2, "postbox_lease_renewal_errors_total": 1, "postbox_leases_lost_total": 4,
	} {
		if got := value(t, reg, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// A relay whose endpoint refuses connections sets postbox_relay_sink_up to
// 0 and counts its probes; the gauge is 1 again once the relay stops.
func TestSinkOutageMetrics(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	if err := s.Enqueue(context.Background(), event("order.created", "1")); err != nil {
		t.Fatal(err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	reg, m := newMetrics(t, observe.Options{})
	if got := value(t, reg, "postbox_relay_sink_up", nil); got != 1 {
		t.Fatalf("relay_sink_up = %v before any relay runs, want 1", got)
	}
	_, stop := runRelay(t, relay.Config{Store: s, Sink: newSink(t, closed.URL), Observer: m.Relay(),
		ProbeInterval: 20 * time.Millisecond})
	waitFor(t, "probes", 10*time.Second, func() bool { return value(t, reg, "postbox_relay_sink_probes_total", nil) >= 2 })
	if got := value(t, reg, "postbox_relay_sink_up", nil); got != 0 {
		t.Fatalf("relay_sink_up = %v during the outage, want 0", got)
	}
	if got := value(t, reg, "postbox_deliveries_total", map[string]string{"outcome": "failed"}); got != 0 {
		t.Fatalf("deliveries_total{outcome=failed} = %v during the outage, want 0", got)
	}
	stop()
	if got := value(t, reg, "postbox_relay_sink_up", nil); got != 1 {
		t.Fatalf("relay_sink_up = %v after the relay stopped, want 1", got)
	}
}

// Several relays share one observer: the sink is down while any of them
// finds it so.
func TestSinkUpWhileNoRelaySeesItDown(t *testing.T) {
	reg, m := newMetrics(t, observe.Options{})
	a, b := m.Relay(), m.Relay()
	for i, step := range []struct {
		o    relay.Observer
		up   bool
		want float64
	}{{a, false, 0}, {b, false, 0}, {a, true, 0}, {b, true, 1}} {
		step.o.SinkState(step.up)
		if got := value(t, reg, "postbox_relay_sink_up", nil); got != step.want {
			t.Fatalf("step %d: relay_sink_up = %v, want %v", i, got, step.want)
		}
	}
}

// The inbox's outcomes and its handler's duration are counted, against a
// real store.
func TestInboxMetricsMove(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	reg, m := newMetrics(t, observe.Options{})
	ib := inbox.New(s, inbox.WithObserver(m.Inbox()))
	fails := 1
	fn := func(_ context.Context, _ pgx.Tx, ev *inbox.Event) error {
		switch {
		case ev.EventType == "order.bad":
			return inbox.Reject(errors.New("bad"))
		case fails > 0:
			fails--
			return errors.New("lock timeout")
		}
		return nil
	}
	ctx := context.Background()
	ev := &inbox.Event{ID: postbox.NewID(), EventType: "order.created", AggregateType: "order", AggregateID: "1", Payload: []byte(`{}`)}
	bad := &inbox.Event{ID: postbox.NewID(), EventType: "order.bad", AggregateType: "order", AggregateID: "2", Payload: []byte(`{}`)}
	for _, e := range []*inbox.Event{ev, ev, ev, bad} { // failed, processed, duplicate, rejected
		_, _ = ib.Process(ctx, e, fn)
	}
	for _, c := range []struct {
		outcome, eventType string
	}{{"failed", "order.created"}, {"processed", "order.created"}, {"duplicate", "order.created"}, {"rejected", "order.bad"}} {
		if got := value(t, reg, "postbox_inbox_events_total", map[string]string{"outcome": c.outcome, "event_type": c.eventType}); got != 1 {
			t.Errorf("inbox_events_total{outcome=%s,event_type=%s} = %v, want 1", c.outcome, c.eventType, got)
		}
	}
	if got := value(t, reg, "postbox_inbox_handler_duration_seconds", nil); got != 3 {
		t.Errorf("inbox_handler_duration_seconds count = %v, want 3 (the duplicate runs no handler)", got)
	}
}

// Past MaxEventTypes distinct types, the rest are counted as "other": the
// series stay bounded, and no attempt goes uncounted.
func TestEventTypeLabelIsCapped(t *testing.T) {
	reg, m := newMetrics(t, observe.Options{MaxEventTypes: 3})
	o, ib := m.Relay(), m.Inbox()
	for i := range 10 {
		typ := fmt.Sprintf("type.%d", i)
		o.Attempted(relay.Attempt{EventType: typ, Outcome: relay.OutcomeDelivered, Sent: true})
		ib.Handled(inbox.Handling{EventType: typ, Outcome: inbox.Processed})
	}
	o.Attempted(relay.Attempt{EventType: "type.0", Outcome: relay.OutcomeDelivered, Sent: true})
	for _, name := range []string{"postbox_deliveries_total", "postbox_inbox_events_total"} {
		types := map[string]bool{}
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, mt := range f.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "event_type" {
						types[l.GetValue()] = true
					}
				}
			}
		}
		if len(types) != 4 || !types["type.0"] || !types["type.1"] || !types["type.2"] || !types[observe.OtherEventType] {
			t.Errorf("%s has event types %v, want type.0, type.1, type.2 and other", name, types)
		}
	}
	if got := value(t, reg, "postbox_deliveries_total", map[string]string{"event_type": "other", "outcome": "delivered"}); got != 7 {
		t.Errorf("deliveries_total{event_type=other} = %v, want 7", got)
	}
	if got := value(t, reg, "postbox_deliveries_total", map[string]string{"event_type": "type.0", "outcome": "delivered"}); got != 2 {
		t.Errorf("deliveries_total{event_type=type.0} = %v, want 2 (a known type keeps its series)", got)
	}
}

// faultyStore is a PostgreSQL store whose claims and stats fail while a
// test asks.
type faultyStore struct {
	*postgres.Driver
	fail atomic.Bool
}

var errInjected = errors.New("injected failure")

func (s *faultyStore) Claim(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error) {
	if s.fail.Load() {
		return nil, errInjected
	}
	return s.Driver.Claim(ctx, p)
}

func (s *faultyStore) StatsUpTo(ctx context.Context, limit int64) (store.StatusCounts, error) {
	if s.fail.Load() {
		return store.StatusCounts{}, errInjected
	}
	return s.Driver.StatsUpTo(ctx, limit)
}

// healthz returns the status code and reason of GET /healthz.
func healthz(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	var body struct{ Status, Reason string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("healthz body %q: %v", w.Body.String(), err)
	}
	return w.Code, body.Reason
}

// /healthz is 200 while the relay delivers and the database answers, 503
// with a reason while claims and samples fail, 200 again once they
// succeed, and 503 once the relay stops.
func TestHealthz(t *testing.T) {
	t.Parallel()
	s := &faultyStore{Driver: pgtest.Store(t).Driver()}
	reg, m := newMetrics(t, observe.Options{})
	sampler, err := m.NewOutboxSampler(s, observe.SamplerConfig{Every: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := observe.Handler(reg, observe.Health{Outbox: sampler})
	if code, reason := healthz(t, h); code != http.StatusServiceUnavailable || reason == "" {
		t.Fatalf("healthz before the first sample: %d %q, want 503 with a reason", code, reason)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sampler.Run(ctx)
	r, stop := runRelay(t, relay.Config{Store: s, Observer: m.Relay(), PollInterval: 20 * time.Millisecond})
	h = observe.Handler(reg, observe.Health{Ready: r.Ready, Outbox: sampler})
	ok := func() bool { code, _ := healthz(t, h); return code == http.StatusOK }
	waitFor(t, "healthz 200", 10*time.Second, ok)

	s.fail.Store(true)
	waitFor(t, "healthz 503", 10*time.Second, func() bool { return !ok() })
	if _, reason := healthz(t, h); reason == "" {
		t.Error("healthz 503 without a reason")
	}
	s.fail.Store(false)
	waitFor(t, "healthz 200 again", 10*time.Second, ok)

	stop()
	if code, reason := healthz(t, h); code != http.StatusServiceUnavailable || reason == "" {
		t.Fatalf("healthz after the relay stopped: %d %q, want 503 with a reason", code, reason)
	}
}

// /metrics serves the registry in the exposition format; other methods
// are refused.
func TestMetricsEndpoint(t *testing.T) {
	reg, m := newMetrics(t, observe.Options{})
	m.Relay().Attempted(relay.Attempt{EventType: "order.created", Outcome: relay.OutcomeDelivered, Sent: true})
	h := observe.Handler(reg, observe.Health{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	body, _ := io.ReadAll(resp.Body)
	if err := testutil.ScrapeAndCompare(srv.URL+"/metrics", stringsReader(`
# HELP postbox_deliveries_total Delivery attempts whose outcome the relay recorded, by endpoint ("" for the single-URL relay), event type and outcome (delivered, retry, failed, released). In endpoints mode the fan-out is counted apart, in postbox_fanout_events_total.
# TYPE postbox_deliveries_total counter
postbox_deliveries_total{endpoint="",event_type="order.created",outcome="delivered"} 1
postbox_deliveries_total{endpoint="",event_type="order.created",outcome="failed"} 0
postbox_deliveries_total{endpoint="",event_type="order.created",outcome="released"} 0
postbox_deliveries_total{endpoint="",event_type="order.created",outcome="retry"} 0
`), "postbox_deliveries_total"); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	post, err := http.Post(srv.URL+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /metrics: %s, want 405", post.Status)
	}
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

// labelValues returns the values of label among the series of name.
func labelValues(t testing.TB, g prometheus.Gatherer, name, label string) map[string]bool {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]bool{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == label {
					values[l.GetValue()] = true
				}
			}
		}
	}
	return values
}

// A relay observed by Endpoint("billing") delivers through a real store
// and receiver: its deliveries, durations and lags carry
// endpoint="billing", none carries the single-URL relay's endpoint="".
func TestEndpointLabel(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	reg, m := newMetrics(t, observe.Options{})
	for i := range 3 {
		if err := s.Enqueue(context.Background(), event("order.created", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	runRelay(t, relay.Config{Store: s, Observer: m.Endpoint("billing")})
	billing := map[string]string{"endpoint": "billing"}
	waitFor(t, "3 deliveries", 10*time.Second, func() bool {
		return value(t, reg, "postbox_deliveries_total", map[string]string{"endpoint": "billing", "outcome": "delivered"}) == 3
	})
	for _, name := range []string{"postbox_deliveries_total", "postbox_delivery_duration_seconds", "postbox_event_lag_seconds"} {
		if got := value(t, reg, name, billing); got != 3 {
			t.Errorf("%s{endpoint=billing} = %v, want 3", name, got)
		}
		if got := value(t, reg, name, map[string]string{"endpoint": ""}); got != 0 {
			t.Errorf("%s{endpoint=\"\"} = %v, want 0 (no single-URL relay ran)", name, got)
		}
	}
	if got := value(t, reg, "postbox_fanout_events_total", nil); got != 0 {
		t.Errorf("fanout_events_total = %v, want 0 (no fan-out ran)", got)
	}
	if got := value(t, reg, "postbox_claims_total", nil); got < 1 {
		t.Errorf("claims_total = %v, want the lane's claims counted", got)
	}
}

// Each endpoint's sink state has its own sink_up series: one endpoint
// unreachable leaves the others', and the single-URL relay's, at 1.
func TestSinkUpByEndpoint(t *testing.T) {
	reg, m := newMetrics(t, observe.Options{})
	a, a2, b := m.Endpoint("a"), m.Endpoint("a"), m.Endpoint("b")
	for i, step := range []struct {
		o      relay.Observer
		up     bool
		wantA  float64
		wantB  float64
		wantUp float64
	}{{a, false, 0, 1, 1}, {a2, false, 0, 1, 1}, {a, true, 0, 1, 1}, {a2, true, 1, 1, 1}, {b, false, 1, 0, 1}} {
		step.o.SinkState(step.up)
		for endpoint, want := range map[string]float64{"a": step.wantA, "b": step.wantB, "": step.wantUp} {
			if got := value(t, reg, "postbox_relay_sink_up", map[string]string{"endpoint": endpoint}); got != want {
				t.Fatalf("step %d: relay_sink_up{endpoint=%q} = %v, want %v", i, endpoint, got, want)
			}
		}
	}
	b.SinkProbed()
	if got := value(t, reg, "postbox_relay_sink_probes_total", map[string]string{"endpoint": "b"}); got != 1 {
		t.Errorf("relay_sink_probes_total{endpoint=b} = %v, want 1", got)
	}
	if got := value(t, reg, "postbox_relay_sink_probes_total", map[string]string{"endpoint": ""}); got != 0 {
		t.Errorf("relay_sink_probes_total{endpoint=\"\"} = %v, want 0", got)
	}
}

// Past MaxEndpoints distinct names, the rest are counted as "other": the
// series stay bounded, no attempt goes uncounted, and endpoint "" (the
// single-URL relay) takes no place under the cap.
func TestEndpointLabelIsCapped(t *testing.T) {
	reg, m := newMetrics(t, observe.Options{MaxEndpoints: 2})
	m.Relay().Attempted(relay.Attempt{EventType: "order.created", Outcome: relay.OutcomeDelivered, Sent: true})
	for i := range 6 {
		o := m.Endpoint(fmt.Sprintf("hooks-%d", i))
		o.Attempted(relay.Attempt{EventType: "order.created", Outcome: relay.OutcomeDelivered, Sent: true})
		o.SinkState(false)
	}
	m.Endpoint("hooks-0").Attempted(relay.Attempt{EventType: "order.created", Outcome: relay.OutcomeDelivered, Sent: true})
	want := map[string]bool{"": true, "hooks-0": true, "hooks-1": true, observe.OtherEndpoint: true}
	for _, name := range []string{"postbox_deliveries_total", "postbox_delivery_duration_seconds", "postbox_event_lag_seconds", "postbox_relay_sink_up"} {
		if got := labelValues(t, reg, name, "endpoint"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s has endpoints %v, want %v", name, got, want)
		}
	}
	for endpoint, want := range map[string]float64{"": 1, "hooks-0": 2, "hooks-1": 1, observe.OtherEndpoint: 4} {
		if got := value(t, reg, "postbox_deliveries_total", map[string]string{"endpoint": endpoint}); got != want {
			t.Errorf("deliveries_total{endpoint=%q} = %v, want %v", endpoint, got, want)
		}
	}
	if got := value(t, reg, "postbox_relay_sink_up", map[string]string{"endpoint": observe.OtherEndpoint}); got != 0 {
		t.Errorf("relay_sink_up{endpoint=other} = %v, want 0 (its endpoints are down)", got)
	}
}

// The fan-out's attempts, through a real relay and store, are counted in
// postbox_fanout_*, not as deliveries; its claims count with every
// relay's.
func TestFanOutCountedApart(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	reg, m := newMetrics(t, observe.Options{})
	for i := range 4 {
		if err := s.Enqueue(context.Background(), event("order.created", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	runRelay(t, relay.Config{Store: s, Observer: m.FanOut()})
	waitFor(t, "4 fan-outs", 10*time.Second, func() bool {
		return value(t, reg, "postbox_fanout_events_total", map[string]string{"outcome": "delivered", "event_type": "order.created"}) == 4
	})
	if got := value(t, reg, "postbox_fanout_duration_seconds", nil); got != 4 {
		t.Errorf("fanout_duration_seconds count = %v, want 4", got)
	}
	for _, name := range []string{"postbox_deliveries_total", "postbox_delivery_duration_seconds", "postbox_event_lag_seconds"} {
		if got := value(t, reg, name, nil); got != 0 {
			t.Errorf("%s = %v after a fan-out only, want 0", name, got)
		}
	}
	if got := value(t, reg, "postbox_claimed_events_total", nil); got < 4 {
		t.Errorf("claimed_events_total = %v, want at least 4", got)
	}
}

// TestLongLabelsAreCut: an event type of a megabyte (plain SQL writes
// anything) labels its series with its first 128 bytes, valid UTF-8.
func TestLongLabelsAreCut(t *testing.T) {
	reg, m := newMetrics(t, observe.Options{})
	long := "é" + strings.Repeat("x", 1<<20)
	m.Relay().Attempted(relay.Attempt{EventType: long, Outcome: relay.OutcomeDelivered, Sent: true})
	m.Relay().Attempted(relay.Attempt{EventType: long + "y", Outcome: relay.OutcomeDelivered, Sent: true})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels, delivered := map[string]bool{}, 0.0
	for _, f := range families {
		if f.GetName() != "postbox_deliveries_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "event_type" {
					labels[l.GetValue()] = true
					delivered += mt.GetCounter().GetValue()
				}
			}
		}
	}
	if len(labels) != 1 {
		t.Errorf("%d event_type labels, want the two long types under one", len(labels))
	}
	for v := range labels {
		if len(v) > 128 || !utf8.ValidString(v) || !strings.HasPrefix(v, "éxx") {
			t.Errorf("event_type label of %d bytes %q..., want the first 128 bytes", len(v), v[:min(len(v), 10)])
		}
	}
	if delivered != 2 {
		t.Errorf("the two long types counted %v, want 2", delivered)
	}
}
