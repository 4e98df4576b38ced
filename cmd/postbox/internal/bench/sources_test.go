package bench_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/cmd/postbox/internal/bench"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// TestSources runs sources in a small size (10 sources, a 20,000 backlog,
// windows of 2 s) on the test server, and checks that every figure is
// there, that no trickle event was lost (during the outage or at all),
// that the relay process outlived the outage, that every relay ran as
// `postbox relay --sources`, and that the scratch databases are gone. It
// fails when the server cannot be reached. The figures are never compared
// with the goals: they depend on the machine.
func TestSources(t *testing.T) {
	ctx := context.Background()
	var (
		progress logbuf.Buffer
		relays   relayCalls
	)
	cfg := bench.Config{
		DB: pgtest.URL(), Scenarios: []string{bench.ScenarioSources}, Quick: true,
		SourcesCount: 10, SourcesEvents: 5000, SourcesBacklog: 20000, SourcesWindow: 2 * time.Second,
		Progress: &progress, Command: relays.command,
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	if want := []string{bench.ScenarioSources}; !slices.Equal(rep.Params.Scenarios, want) {
		t.Errorf("ran %v, want %v", rep.Params.Scenarios, want)
	}
	positive := []string{
		"sources.one_rate", "sources.many_rate", "sources.one_rate90", "sources.many_rate90", "sources.many_ratio", "sources.one_first", "sources.many_first",
		"sources.one_rss", "sources.many_rss",
		"sources.bare_commit_p50", "sources.bare_commit_p99", "sources.bare_commit_rate",
		"sources.start_ready", "sources.alone_p50", "sources.alone_p99", "sources.alone_rate",
		"sources.backlog_p50", "sources.backlog_p99", "sources.backlog_window", "sources.backlog_rate",
		"sources.outage_p50", "sources.outage_p99", "sources.outage_recovery", "sources.trickle_rss",
	}
	// Counts of log lines, and the difference of two p99s, may be zero
	// or below.
	present := []string{
		"sources.one_not_delivering", "sources.many_not_delivering", "sources.start_not_delivering",
		"sources.backlog_share", "sources.backlog_left", "sources.outage_failed",
	}
	for _, key := range slices.Concat(positive, present) {
		m, ok := rep.Measure(key)
		switch {
		case !ok:
			t.Errorf("no measure %s", key)
		case slices.Contains(positive, key) && !(m.Value > 0):
			t.Errorf("measure %s = %v %s, want a positive number", key, m.Value, m.Unit)
		}
	}
	for key, want := range map[string]float64{"sources.lost": 0, "sources.outage_lost": 0, "sources.outage_alive": 1} {
		if m, ok := rep.Measure(key); !ok || m.Value != want {
			t.Errorf("measure %s = %+v, want %v", key, m, want)
		}
	}
	for _, m := range rep.Measures {
		want := bench.RelayProcess
		if strings.HasPrefix(m.Key, "sources.bare_") {
			want = ""
		}
		if m.Relay != want {
			t.Errorf("measure %s: relay %q, want %q", m.Key, m.Relay, want)
		}
		if (m.Goal != nil) != (m.Met != nil) {
			t.Errorf("measure %s: goal %v, met %v", m.Key, m.Goal, m.Met)
		}
	}
	for _, key := range []string{"sources.many_ratio", "sources.backlog_p99", "sources.outage_p99", "sources.lost", "sources.outage_alive"} {
		if m, _ := rep.Measure(key); m.Goal == nil {
			t.Errorf("measure %s has no goal", key)
		}
	}
	// One process for each drain of many_ratio, one for the trickle,
	// backlog and outage.
	if len(relays.args) != 3 {
		t.Errorf("started `postbox relay` %d times (%q), want 3", len(relays.args), relays.args)
	}
	for _, args := range relays.args {
		if !slices.Contains(args, "--sources") || slices.Contains(args, "--db") {
			t.Errorf("`postbox relay %s`: want --sources FILE and no --db", strings.Join(args, " "))
		}
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "sizes: sources 10 sources, 5000 events per drain, a 20000 backlog") {
		t.Errorf("the table does not give sources' sizes:\n%s", table.String())
	}
	left, err := bench.Leftovers(ctx, cfg.DB, rep.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("left after the run: %v", left)
	}
}

// TestSourcesConfig checks that sources refuses fewer than 3 sources and a
// window under a second before anything runs.
func TestSourcesConfig(t *testing.T) {
	for _, cfg := range []bench.Config{
		{SourcesCount: 2},
		{SourcesWindow: 500 * time.Millisecond},
	} {
		cfg.DB, cfg.Scenarios = "postgres://127.0.0.1:1/none", []string{bench.ScenarioSources}
		if _, err := bench.Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "Config.Sources") {
			t.Errorf("%+v: run: %v, want a refusal of the config", cfg, err)
		}
	}
}
