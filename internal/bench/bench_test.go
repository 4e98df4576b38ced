package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/internal/bench"
	"github.com/postbox-go/postbox/internal/pgtest"
)

// TestMain makes the test binary a relay child when the scale and scaling
// scenarios start it (see testChild).
func TestMain(m *testing.M) {
	if os.Getenv(bench.ChildEnv) != "" {
		if err := bench.ServeChild(context.Background(), os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "relay child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testChild starts this test binary as a relay child.
func testChild(ctx context.Context) (*exec.Cmd, error) {
	return exec.CommandContext(ctx, os.Args[0], "-test.run=^$"), nil
}

// tiny is a run of every scenario, small enough for a test.
func tiny(db string, progress *syncBuffer) bench.Config {
	return bench.Config{
		DB: db, Scenarios: bench.AllScenarios,
		DrainEvents: 2000, WebhookEvents: 2000, ScaleSmall: 1000, ScaleLarge: 2000, ScalingEvents: 1000,
		Duration: time.Second, Rates: []int{200, 2000}, Clients: 8,
		Instances: []int{1, 2}, Concurrency: []int{16, 64},
		Progress: progress, ChildCommand: testChild,
	}
}

// TestRunEveryScenario runs every scenario in a tiny size on PostgreSQL
// and SQLite, and checks that the report has every measure, each a
// positive number, and that the scratch outboxes are gone afterwards. The
// figures are never compared with the goals: they depend on the machine.
func TestRunEveryScenario(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		checkRun(t, pgtest.URL())
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		checkRun(t, "sqlite:"+filepath.Join(t.TempDir(), "bench.db"))
	})
}

func checkRun(t *testing.T, db string) {
	ctx := context.Background()
	var progress syncBuffer
	cfg := tiny(db, &progress)
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}

	want := []string{
		"drain.postbox", "drain.raw_delete", "drain.raw_update", "drain.ratio_delete", "drain.ratio_update",
		"webhook.events",
		"write.tx_without", "write.tx_with_enqueue_tx", "write.ratio_enqueue_tx", "write.tx_with", "write.ratio",
		"write.tx_with_relay", "write.ratio_relay",
		"scale.small", "scale.large", "scale.ratio", "scale.rss_small", "scale.rss_large",
	}
	for _, r := range cfg.Rates {
		for _, m := range []string{"p50", "p99", "max", "rate"} {
			want = append(want, fmt.Sprintf("latency.%s_%d", m, r))
		}
	}
	for _, sk := range []string{bench.SinkNoop, bench.SinkWebhook} {
		for _, i := range cfg.Instances {
			for _, c := range cfg.Concurrency {
				want = append(want, fmt.Sprintf("scaling.%s.relays_%d_concurrency_%d", sk, i, c))
			}
		}
	}
	for _, key := range want {
		m, ok := rep.Measure(key)
		switch {
		case !ok:
			t.Errorf("no measure %s", key)
		case !(m.Value > 0):
			t.Errorf("measure %s = %v %s, want a positive number", key, m.Value, m.Unit)
		}
	}
	// Idle CPU may well be zero; it is measured wherever /proc is.
	for _, key := range []string{"latency.idle_cpu_relay", "latency.idle_cpu_server"} {
		if m, ok := rep.Measure(key); ok && m.Value < 0 {
			t.Errorf("measure %s = %v, want at least 0", key, m.Value)
		}
	}
	if want := 2 * len(cfg.Instances) * len(cfg.Concurrency); len(rep.Scaling) != want {
		t.Errorf("scaling has %d points, want %d", len(rep.Scaling), want)
	}
	for _, m := range rep.Measures {
		if (m.Met != nil) != (m.Goal != nil && rep.Database == "postgres") {
			t.Errorf("measure %s: goal %v, met %v on %s", m.Key, m.Goal, m.Met, rep.Database)
		}
	}

	var table, js bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"SCENARIO", "postbox / raw DELETE", "relays"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, table.String())
		}
	}
	for _, s := range []string{bench.AllScenarios[0], "drain.ratio_delete", `"scaling"`} {
		if !strings.Contains(js.String(), s) {
			t.Errorf("JSON lacks %q", s)
		}
	}
	for _, s := range bench.AllScenarios {
		if !strings.Contains(progress.String(), "["+s+"]") {
			t.Errorf("no progress shown for %s", s)
		}
	}

	left, err := bench.Leftovers(ctx, db, rep.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("scratch outboxes left after the run: %v", left)
	}
}

// TestKeepAndUnknownScenario checks that Keep leaves the scratch outboxes
// (and that they can be found), and that an unknown scenario is refused.
func TestKeepAndUnknownScenario(t *testing.T) {
	ctx := context.Background()
	if _, err := bench.Run(ctx, bench.Config{DB: pgtest.URL(), Scenarios: []string{"drain", "webhook"}}); err == nil ||
		!strings.Contains(err.Error(), `"drain"`) {
		t.Errorf("unknown scenario: err = %v, want it named", err)
	}
	db := "sqlite:" + filepath.Join(t.TempDir(), "keep.db")
	cfg := bench.Config{DB: db, Scenarios: []string{bench.ScenarioWebhook}, WebhookEvents: 100, Keep: true}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	left, err := bench.Leftovers(ctx, db, rep.Run)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(left, func(f string) bool { return strings.HasSuffix(f, rep.Run+"_webhook") }) {
		t.Errorf("kept %v, want the webhook scenario's file", left)
	}
}

// syncBuffer is a bytes.Buffer safe for the writes of several goroutines
// (progress lines and the children's logs).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
