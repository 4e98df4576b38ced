package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/postbox-go/postbox/postboxtest/receiver"
)

// scrape reads GET url/metrics and parses the exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// sum adds the values of the series of family name that have the given
// labels.
func sum(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f, ok := families[name]
	if !ok {
		return -1
	}
	total := 0.0
series:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

// getHealthz returns the status code and body of GET url/healthz.
func getHealthz(t *testing.T, url string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var answer map[string]string
	if err := json.Unmarshal(body, &answer); err != nil {
		t.Fatalf("healthz body %q: %v", body, err)
	}
	return resp.StatusCode, answer
}

var metricsLine = regexp.MustCompile(`metrics on (http://[0-9.:\[\]a-f]+)/metrics`)

// `postbox relay --metrics-addr 127.0.0.1:0` says where it serves, and its
// /metrics count what it did: 100 events, a fifth of them answered 503
// once, are 100 delivered and 20 retries; the outbox gauges show nothing
// left; /healthz is 200 while it runs.
func TestShippedRelayServesMetrics(t *testing.T) {
	s, db := schemaStore(t)
	rcv := receiver.New(t, secret, func(_ http.ResponseWriter, _ *http.Request, d receiver.Delivery, n int) int {
		if strings.HasSuffix(d.AggregateID, "0") || strings.HasSuffix(d.AggregateID, "5") {
			if n == 1 {
				return http.StatusServiceUnavailable
			}
		}
		return 0
	})
	events := enqueueN(t, s, 100)
	logs, pid := startRelayLogged(t, append(db, "--webhook-url", rcv.URL, "--webhook-secret", secret,
		"--backoff-min", "10ms", "--backoff-max", "20ms", "--metrics-addr", "127.0.0.1:0", "--metrics-sample", "100ms")...)
	var url string
	waitFor(t, "the metrics address in the log", 10*time.Second, func() bool {
		m := metricsLine.FindStringSubmatch(logs.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	})
	rcv.WaitAccepted(t, len(events), 20*time.Second)
	delivered := map[string]string{"outcome": "delivered"}
	waitFor(t, "the deliveries to be counted", 10*time.Second, func() bool {
		return sum(scrape(t, url), "postbox_deliveries_total", delivered) >= float64(len(events))
	})
	waitFor(t, "the outbox gauges to show the outbox drained", 10*time.Second, func() bool {
		f := scrape(t, url)
		return sum(f, "postbox_outbox_events", map[string]string{"status": "pending"}) == 0 &&
			sum(f, "postbox_outbox_events", map[string]string{"status": "processing"}) == 0
	})
	f := scrape(t, url)
	if got := sum(f, "postbox_deliveries_total", delivered); got != float64(len(rcv.Accepted())) || got != 100 {
		t.Errorf("deliveries_total{outcome=delivered} = %v, want the %d deliveries the receiver accepted (100)", got, len(rcv.Accepted()))
	}
	if got := sum(f, "postbox_deliveries_total", map[string]string{"outcome": "retry"}); got != 20 {
		t.Errorf("deliveries_total{outcome=retry} = %v, want 20", got)
	}
	if got := sum(f, "postbox_relay_ready", nil); got != 1 {
		t.Errorf("postbox_relay_ready = %v while the relay runs, want 1", got)
	}
	for _, name := range []string{"postbox_event_lag_seconds", "postbox_delivery_duration_seconds", "go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := f[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if code, answer := getHealthz(t, url); code != http.StatusOK || answer["status"] != "ok" {
		t.Errorf("healthz while the relay runs: %d %v, want 200 ok", code, answer)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relay to stop", 20*time.Second, func() bool { return strings.Contains(logs.String(), "relay stopped") })
}

// --metrics-addr on an address in use stops the relay at start with one
// line that names the flag.
func TestRelayMetricsAddrInUse(t *testing.T) {
	_, db := schemaStore(t)
	rcv := receiver.New(t, secret, nil)
	addr := strings.TrimPrefix(rcv.URL, "http://") // taken by the receiver
	last := runFails(t, command(append(append([]string{"relay"}, db...), "--webhook-url", rcv.URL, "--webhook-secret", secret, "--metrics-addr", addr)...))
	if !strings.Contains(last, "--metrics-addr") || !strings.Contains(last, "address already in use") {
		t.Fatalf("relay with --metrics-addr in use said %q", last)
	}
}
