package bench_test

import (
	"context"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/cmd/postbox/internal/bench"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// The kafka scenario in a tiny size: its four drains each give a positive
// rate, the ratio is sink / the lower limit, and both drains of the sink
// ran `postbox relay --sink kafka://...` on a scratch outbox that is gone
// afterwards.
func TestKafkaScenario(t *testing.T) {
	var (
		progress logbuf.Buffer
		relays   relayCalls
	)
	cfg := bench.Config{DB: pgtest.URL(), Scenarios: []string{bench.ScenarioKafka}, BrokerEvents: 2000,
		Progress: &progress, Command: relays.command}
	rep, err := bench.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	values := map[string]float64{}
	for key, relay := range map[string]string{
		"kafka.sink": bench.RelayProcess, "kafka.sink_concurrency": bench.RelayProcess, "kafka.franz_go": "",
		"kafka.noop": bench.RelayInProcess, "kafka.ratio": bench.RelayProcess,
	} {
		m, ok := rep.Measure(key)
		switch {
		case !ok:
			t.Fatalf("no measure %s", key)
		case !(m.Value > 0):
			t.Errorf("measure %s = %v, want a positive number", key, m.Value)
		case m.Relay != relay:
			t.Errorf("measure %s: relay %q, want %q", key, m.Relay, relay)
		}
		values[key] = m.Value
	}
	if want := values["kafka.sink"] / min(values["kafka.franz_go"], values["kafka.noop"]); values["kafka.ratio"] != want {
		t.Errorf("kafka.ratio %v, want %v", values["kafka.ratio"], want)
	}
	if m, _ := rep.Measure("kafka.ratio"); m.Goal == nil || m.Met == nil {
		t.Errorf("kafka.ratio has no goal judged: %+v", m)
	}
	if len(relays.args) != 2 {
		t.Fatalf("started `postbox relay` %d times, want 2", len(relays.args))
	}
	for _, args := range relays.args {
		if joined := strings.Join(args, " "); !strings.Contains(joined, "--sink kafka://127.0.0.1:") {
			t.Errorf("relay args %q: want --sink kafka://...", joined)
		}
	}
	if !strings.Contains(strings.Join(relays.args[1], " "), "--concurrency 256") {
		t.Errorf("second relay args %q: want --concurrency 256", relays.args[1])
	}
	left, err := bench.Leftovers(context.Background(), cfg.DB, rep.Run)
	if err != nil || len(left) > 0 {
		t.Fatalf("scratch outboxes left: %v %v", left, err)
	}
}
