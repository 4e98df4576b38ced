package bench_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/cmd/postbox/internal/bench"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// TestOrderedScenario runs ordered in a tiny size (2,000 events over 100
// aggregates) on PostgreSQL and SQLite, and checks that every measure is
// there and positive, that each ratio is the quotient of its two rates,
// that each measure names how its relay ran, that no goal is set with
// fewer aggregates than the goal's 1,000, that `postbox relay` ran twice,
// once with --ordered, and that no scratch outbox is left. The scenario
// fails the run itself when an event does not reach the sink once. The
// figures are never compared with the goal: they depend on the machine.
func TestOrderedScenario(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		checkOrdered(t, pgtest.URL())
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		checkOrdered(t, "sqlite:"+filepath.Join(t.TempDir(), "ordered.db"))
	})
}

func checkOrdered(t *testing.T, db string) {
	ctx := context.Background()
	var (
		progress logbuf.Buffer
		relays   relayCalls
	)
	cfg := bench.Config{
		DB: db, Scenarios: []string{bench.ScenarioOrdered},
		OrderedEvents: 2000, OrderedAggregates: 100,
		Progress: &progress, Command: relays.command,
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	if want := []string{bench.ScenarioOrdered}; !slices.Equal(rep.Params.Scenarios, want) {
		t.Errorf("ran %v, want %v", rep.Params.Scenarios, want)
	}
	if p := rep.Params; p.OrderedEvents != 2000 || p.OrderedAggregates != 100 {
		t.Errorf("params %+v: want the sizes given", p)
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "sizes: ordered 2000 events over 100 aggregates per drain") {
		t.Errorf("the table does not give ordered's sizes:\n%s", table.String())
	}
	value := func(key string) float64 {
		t.Helper()
		m, ok := rep.Measure(key)
		if !ok {
			t.Errorf("no measure %s", key)
			return math.NaN()
		}
		if !(m.Value > 0) {
			t.Errorf("measure %s = %v %s, want a positive number", key, m.Value, m.Unit)
		}
		if !strings.Contains(m.Name, "2000 events over 100 aggregates") {
			t.Errorf("measure %s: name %q does not give the sizes", key, m.Name)
		}
		return m.Value
	}
	for _, path := range []string{"library", "process"} {
		ratio, ord, unord := "ordered."+path+"_ratio", "ordered."+path+"_ordered", "ordered."+path+"_unordered"
		if got, want := value(ratio), value(ord)/value(unord); math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s = %v, want %s / %s = %v", ratio, got, ord, unord, want)
		}
	}
	if len(rep.Measures) != 6 {
		t.Errorf("%d measures, want 6: %+v", len(rep.Measures), rep.Measures)
	}
	for _, m := range rep.Measures {
		want := bench.RelayInProcess
		if strings.HasPrefix(m.Key, "ordered.process_") {
			want = bench.RelayProcess
		}
		if m.Relay != want {
			t.Errorf("measure %s: relay %q, want %q", m.Key, m.Relay, want)
		}
		if m.Goal != nil || m.Met != nil {
			t.Errorf("measure %s: goal %v, met %v: want none with 100 aggregates", m.Key, m.Goal, m.Met)
		}
	}
	if len(relays.args) != 2 {
		t.Fatalf("started `postbox relay` %d times (%q), want twice", len(relays.args), relays.args)
	}
	if slices.Contains(relays.args[0], "--ordered") || !slices.Contains(relays.args[1], "--ordered") {
		t.Errorf("`postbox relay` ran with %q then %q: want without --ordered, then with", relays.args[0], relays.args[1])
	}
	for _, s := range []string{"filling 2000 events over 100 aggregates", "the relay library, ordered drained", "`postbox relay --ordered` delivered"} {
		if !strings.Contains(progress.String(), s) {
			t.Errorf("progress lacks %q:\n%s", s, progress.String())
		}
	}
	left, err := bench.Leftovers(ctx, cfg.DB, rep.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("scratch outboxes left after the run: %v", left)
	}
}

// TestOrderedGoal checks that the goal of ordered's ratios is set with
// 1,000 aggregates and more (judged on PostgreSQL), and that the run
// refuses a count of aggregates that is not positive.
func TestOrderedGoal(t *testing.T) {
	ctx := context.Background()
	var (
		progress logbuf.Buffer
		relays   relayCalls
	)
	cfg := bench.Config{
		DB: pgtest.URL(), Scenarios: []string{bench.ScenarioOrdered},
		OrderedEvents: 2000, OrderedAggregates: 1000,
		Progress: &progress, Command: relays.command,
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	for _, m := range rep.Measures {
		ratio := strings.HasSuffix(m.Key, "_ratio")
		if (m.Goal != nil) != ratio || (m.Met != nil) != ratio {
			t.Errorf("measure %s: goal %v, met %v", m.Key, m.Goal, m.Met)
		}
		if ratio && (m.Goal.Op != ">=" || m.Goal.Value != 0.7) {
			t.Errorf("measure %s: goal %+v, want >= 0.7", m.Key, *m.Goal)
		}
	}
	if _, err := bench.Run(ctx, bench.Config{DB: pgtest.URL(), Scenarios: []string{bench.ScenarioOrdered}, OrderedAggregates: -1}); err == nil || !strings.Contains(err.Error(), "OrderedAggregates") {
		t.Errorf("OrderedAggregates -1: err = %v, want it refused", err)
	}
}
