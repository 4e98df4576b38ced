package bench_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/cmd/postbox/internal/bench"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// TestHistoryScenarios runs bloat, retention and replay ("history" stands
// for them) in a tiny size on PostgreSQL, and checks that every measure is
// there and positive, that each ratio is the quotient of its two rates,
// that the partitioned outbox's retention dropped partitions, that only
// the goals of the partitioned outbox's bloat, its retention and the
// replay on the user's path are set, that the replay ran `postbox relay
// --retention` and `postbox replay` as processes (the rest runs the relay
// library), and that no scratch schema is left. The scenarios fail
// the run themselves when the held snapshot did not hold, when an event is
// left after retention, or when the replay did not deliver every event
// once, marked as a replay. The figures are never compared with the
// goals: they depend on the machine.
func TestHistoryScenarios(t *testing.T) {
	ctx := context.Background()
	var (
		progress logbuf.Buffer
		relays   relayCalls
	)
	cfg := bench.Config{
		DB: pgtest.URL(), Scenarios: []string{"history"},
		BloatEvents: 2000, RetentionEvents: 3000, ReplayEvents: 2000,
		// Partitions of 10 s, not the minute a user's run has: the
		// retention's measure waits for the last one's range to end.
		RetentionPartition: 10 * time.Second,
		Progress:           &progress, Command: relays.command,
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	if want := bench.HistoryScenarios; !slices.Equal(rep.Params.Scenarios, want) {
		t.Errorf("ran %v, want %v", rep.Params.Scenarios, want)
	}
	if p := rep.Params; p.BloatEvents != 2000 || p.RetentionEvents != 3000 || p.ReplayEvents != 2000 || p.RetentionPartitionSeconds != 10 {
		t.Errorf("params %+v: want the sizes given", p)
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
		return m.Value
	}
	quotient := func(ratio, num, den string) {
		t.Helper()
		if got, want := value(ratio), value(num)/value(den); math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s = %v, want %s / %s = %v", ratio, got, num, den, want)
		}
	}
	for _, l := range []string{"plain", "partitioned"} {
		quotient("bloat."+l+"_ratio", "bloat."+l+"_held", "bloat."+l+"_free")
	}
	quotient("retention.ratio", "retention.plain_seconds", "retention.partitioned_seconds")
	for _, l := range []string{"plain", "partitioned"} {
		// Extrapolated linearly from 3000 events to 10,000,000.
		if got, want := value("retention."+l+"_10m"), value("retention."+l+"_seconds")*10_000_000/3000; math.Abs(got-want) > 1e-9*want {
			t.Errorf("retention.%s_10m = %v, want %v", l, got, want)
		}
	}
	value("retention.partitions_dropped")
	value("retention.partitioned_mib")
	quotient("retention.floor_ratio", "retention.partitioned_seconds", "retention.drop_floor_seconds")
	quotient("replay.ratio", "replay.replay", "replay.drain")
	value("replay.requeue")
	quotient("replay.process_ratio", "replay.process_replay", "replay.process_drain")

	goals := map[string]bool{"bloat.partitioned_ratio": true, "retention.partitioned_10m": true, "replay.process_ratio": true}
	for _, m := range rep.Measures {
		if (m.Goal != nil) != goals[m.Key] || (m.Goal != nil) != (m.Met != nil) {
			t.Errorf("measure %s: goal %v, met %v", m.Key, m.Goal, m.Met)
		}
		want := bench.RelayInProcess
		switch {
		case m.Scenario == bench.ScenarioRetention:
			want = ""
		case strings.HasPrefix(m.Key, "replay.process_"):
			want = bench.RelayProcess
		}
		if m.Relay != want {
			t.Errorf("measure %s: relay %q, want %q", m.Key, m.Relay, want)
		}
	}
	if len(relays.args) != 1 || !slices.Contains(relays.args[0], "--retention") {
		t.Errorf("started `postbox relay` %q: want it once, with --retention, for the replay's user path", relays.args)
	}
	for _, s := range []string{"holding a REPEATABLE READ snapshot", "partitions dropped", "replayed 2000 events",
		"`postbox replay --yes` had every event delivered again"} {
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

// TestHistoryScenariosNeedPostgres checks that bloat and retention refuse
// SQLite, saying why, and leave no scratch file.
func TestHistoryScenariosNeedPostgres(t *testing.T) {
	for _, s := range []string{bench.ScenarioBloat, bench.ScenarioRetention} {
		db := "sqlite:" + filepath.Join(t.TempDir(), "history.db")
		rep, err := bench.Run(context.Background(), bench.Config{DB: db, Scenarios: []string{s}, BloatEvents: 10, RetentionEvents: 10})
		if err == nil || !strings.Contains(err.Error(), "needs PostgreSQL") || !strings.HasPrefix(err.Error(), s+": ") {
			t.Errorf("%s on SQLite: err = %v, want it refused as needing PostgreSQL", s, err)
		}
		if rep == nil {
			t.Fatalf("%s: no report", s)
		}
		left, lerr := bench.Leftovers(context.Background(), db, rep.Run)
		if lerr != nil || len(left) > 0 {
			t.Errorf("%s: scratch outboxes left: %v (%v)", s, left, lerr)
		}
	}
}
