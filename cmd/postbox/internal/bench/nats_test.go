package bench_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/cmd/postbox/internal/bench"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// The nats scenario, in a tiny size, on the machine's NATS server: every
// measure is a positive number, `postbox relay` ran once with --sink
// nats://..., and neither the scratch outboxes nor the streams are left.
// It is not part of "all", which needs no broker.
func TestRunNATS(t *testing.T) {
	if slices.Contains(bench.AllScenarios, bench.ScenarioNATS) {
		t.Fatal("nats is among the scenarios that need only the database")
	}
	var (
		progress logbuf.Buffer
		relays   relayCalls
	)
	cfg := bench.Config{DB: pgtest.URL(), Scenarios: []string{bench.ScenarioNATS}, BrokerEvents: 2000,
		NATSURL: natstest.URL(), Progress: &progress, Command: relays.command}
	rep, err := bench.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	for _, key := range []string{"nats.relay", "nats.client", "nats.noop", "nats.ratio"} {
		if m, ok := rep.Measure(key); !ok || !(m.Value > 0) {
			t.Errorf("measure %s: %+v (present %v), want a positive number", key, m, ok)
		}
	}
	if m, _ := rep.Measure("nats.ratio"); m.Goal == nil || m.Met == nil {
		t.Errorf("nats.ratio has no goal judged: %+v", m)
	}
	if len(relays.args) != 1 || !slices.ContainsFunc(relays.args[0], func(a string) bool {
		return strings.HasPrefix(a, natstest.URL()+"?subject="+rep.Run+"_relay.")
	}) {
		t.Errorf("relay calls %q, want one with --sink %s?subject=...", relays.args, natstest.URL())
	}
	if left, err := bench.Leftovers(context.Background(), cfg.DB, rep.Run); err != nil || len(left) > 0 {
		t.Errorf("scratch outboxes left: %v, %v", left, err)
	}
	_, js := natstest.Connect(t, natstest.URL())
	for name := range js.StreamNames(t.Context()).Name() {
		if strings.HasPrefix(name, strings.ToUpper(rep.Run)) {
			t.Errorf("stream %s left after the run", name)
		}
	}
}
