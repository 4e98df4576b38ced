package main_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// TestBenchInboxAndUnknownScenario runs `postbox bench --scenarios inbox`
// in its own process with its flags, and checks that the JSON report has
// the inbox's measures at the concurrency --inbox-clients asked for; and
// that an unknown scenario fails the command, naming it.
func TestBenchInboxAndUnknownScenario(t *testing.T) {
	out := runOK(t, "bench", "--db", pgtest.URL(), "--scenarios", "inbox", "--duration", "1s", "--inbox-clients", "4", "--json")
	var rep struct {
		Params struct {
			Scenarios    []string `json:"scenarios"`
			InboxClients int      `json:"inbox_clients"`
		} `json:"params"`
		Measures []struct {
			Key   string  `json:"key"`
			Value float64 `json:"value"`
		} `json:"measures"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if len(rep.Params.Scenarios) != 1 || rep.Params.Scenarios[0] != "inbox" || rep.Params.InboxClients != 4 {
		t.Errorf("params %+v, want the inbox scenario with 4 clients", rep.Params)
	}
	got := map[string]float64{}
	for _, m := range rep.Measures {
		got[m.Key] = m.Value
	}
	for _, key := range []string{"inbox.handler", "inbox.pgx", "inbox.ratio"} {
		if !(got[key] > 0) {
			t.Errorf("measure %s = %v, want a positive number (measures: %v)", key, got[key], got)
		}
	}

	cmd := command("bench", "--db", pgtest.URL(), "--scenarios", "drain-noop,no-such-scenario")
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Run(); err == nil || !strings.Contains(errOut.String(), `"no-such-scenario"`) {
		t.Errorf("unknown scenario: err %v, stderr %q; want a failure naming it", err, errOut.String())
	}
}

// TestBenchEndpointsAgainstWebhook runs `postbox bench --scenarios
// endpoints,webhook` in its own process (which runs itself as `postbox
// endpoints add` and `postbox relay --endpoints`), and checks that the
// report has the endpoints' deliveries/s, their ratio to the webhook
// scenario's events/s of the same run with its goal, and the isolation
// measures.
func TestBenchEndpointsAgainstWebhook(t *testing.T) {
	out := runOK(t, "bench", "--db", pgtest.URL(), "--scenarios", "endpoints,webhook", "--events", "1000", "--json")
	var rep struct {
		Measures []struct {
			Key   string  `json:"key"`
			Name  string  `json:"name"`
			Value float64 `json:"value"`
			Goal  *struct {
				Value float64 `json:"value"`
			} `json:"goal"`
		} `json:"measures"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	got := map[string]float64{}
	for _, m := range rep.Measures {
		got[m.Key] = m.Value
		if m.Key == "endpoints.ratio_webhook" && (m.Goal == nil || m.Goal.Value != 0.8 || !strings.Contains(m.Name, "webhook scenario")) {
			t.Errorf("measure %s %q, goal %+v: want the goal 0.8 against the webhook scenario", m.Key, m.Name, m.Goal)
		}
	}
	for _, key := range []string{"webhook.events", "endpoints.deliveries", "endpoints.ratio_webhook", "endpoints.healthy", "endpoints.faulty", "endpoints.isolation"} {
		if !(got[key] > 0) {
			t.Errorf("measure %s = %v, want a positive number (measures: %v)", key, got[key], got)
		}
	}
	if want := got["endpoints.deliveries"] / got["webhook.events"]; math.Abs(got["endpoints.ratio_webhook"]-want) > 1e-9*want {
		t.Errorf("endpoints.ratio_webhook = %v, want endpoints.deliveries / webhook.events = %v", got["endpoints.ratio_webhook"], want)
	}
}

// TestBenchKafkaBrokers runs `postbox bench --scenarios kafka` in its own
// process: the postbox built without -tags kfake refuses it without
// --kafka-brokers, naming both ways to run it, and with --kafka-brokers
// of a running cluster (kfake, started by the test) it measures the drain
// through the Kafka sink to that cluster.
func TestBenchKafkaBrokers(t *testing.T) {
	cmd := command("bench", "--db", pgtest.URL(), "--scenarios", "kafka")
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Run(); err == nil || !strings.Contains(errOut.String(), "--kafka-brokers") || !strings.Contains(errOut.String(), "-tags kfake") {
		t.Errorf("kafka without --kafka-brokers: err %v, stderr %q; want a failure naming --kafka-brokers and -tags kfake", err, errOut.String())
	}

	_, brokers := kafkatest.NewCluster(t)
	out := runOK(t, "bench", "--db", pgtest.URL(), "--scenarios", "kafka", "--kafka-brokers", strings.Join(brokers, ","), "--events", "1000", "--json")
	var rep struct {
		Measures []struct {
			Key   string  `json:"key"`
			Name  string  `json:"name"`
			Value float64 `json:"value"`
		} `json:"measures"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	var found bool
	for _, m := range rep.Measures {
		if m.Key == "kafka.sink" {
			found = true
			if !(m.Value > 0) || !strings.Contains(m.Name, "--kafka-brokers") {
				t.Errorf("kafka.sink %+v: want a positive rate to the cluster of --kafka-brokers", m)
			}
		}
	}
	if !found {
		t.Errorf("no measure kafka.sink in %s", out)
	}
}
