package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/cmd/postbox/internal/bench"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/mysqltest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// postboxBin is the postbox command built by TestMain, which the latency,
// scale and scaling scenarios run as `postbox relay`.
var postboxBin string

// TestMain builds the postbox command once for the tests; a failed build
// fails them.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "postbox-bench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench test:", err)
		os.Exit(1)
	}
	postboxBin = filepath.Join(dir, "postbox")
	build := exec.Command("go", "build", "-o", postboxBin, "github.com/postbox-go/postbox/cmd/postbox")
	build.Dir = filepath.Join("..", "..") // the module's root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "bench test: go build of the postbox command failed: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// relayCalls records the arguments of every `postbox relay` a run starts
// (without "relay"), and of every `postbox endpoints add`.
type relayCalls struct {
	mu        sync.Mutex
	args      [][]string
	endpoints [][]string
}

// command runs the postbox command built by TestMain with args.
func (c *relayCalls) command(ctx context.Context, args ...string) *exec.Cmd {
	c.mu.Lock()
	switch {
	case len(args) > 0 && args[0] == "relay" && !slices.Contains(args, "--help"):
		c.args = append(c.args, args[1:])
	case len(args) > 1 && args[0] == "endpoints" && args[1] == "add" && !slices.Contains(args, "--help"):
		c.endpoints = append(c.endpoints, args[2:])
	}
	c.mu.Unlock()
	return exec.CommandContext(ctx, postboxBin, args...)
}

// tiny is a run of every scenario but the brokers' (see nats_test.go,
// amqp_test.go, kafka_test.go), small enough for a test.
func tiny(db string, progress *logbuf.Buffer, relays *relayCalls) bench.Config {
	return bench.Config{
		DB: db, Scenarios: bench.AllScenarios,
		DrainEvents: 2000, WebhookEvents: 2000, ScaleSmall: 1000, ScaleLarge: 2000, ScalingEvents: 1000,
		Duration: time.Second, Rates: []int{200, 2000}, Clients: 8,
		Instances: []int{1, 2}, Concurrency: []int{16, 64},
		Progress: progress, Command: relays.command,
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
	var (
		progress logbuf.Buffer
		relays   relayCalls
	)
	cfg := tiny(db, &progress, &relays)
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}

	want := []string{
		"drain.postbox", "drain.postbox_metrics", "drain.metrics_ratio", "drain.raw_delete", "drain.raw_update", "drain.ratio_delete", "drain.ratio_update",
		"webhook.events", "webhook.signed_http", "webhook.ratio_signed_http", "webhook.cpu_relay", "webhook.cpu_receiver", "webhook.cpu_signed_http",
		"write.tx_without", "write.tx_with_enqueue_tx", "write.ratio_enqueue_tx", "write.tx_with", "write.ratio",
		"write.tx_with_relay", "write.ratio_relay",
		"scale.small", "scale.large", "scale.ratio", "scale.rss_small", "scale.rss_large",
		"endpoints.deliveries", "endpoints.ratio_webhook", "endpoints.healthy", "endpoints.faulty", "endpoints.isolation",
	}
	for _, r := range cfg.Rates {
		for _, m := range []string{"p50", "p99", "max", "rate"} {
			want = append(want, fmt.Sprintf("latency.%s_%d", m, r))
		}
	}
	for _, i := range cfg.Instances {
		for _, c := range cfg.Concurrency {
			want = append(want, fmt.Sprintf("scaling.webhook.relays_%d_concurrency_%d", i, c))
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
	if want := len(cfg.Instances) * len(cfg.Concurrency); len(rep.Scaling) != want {
		t.Errorf("scaling has %d points, want %d", len(rep.Scaling), want)
	}
	for _, m := range rep.Measures {
		if (m.Met != nil) != (m.Goal != nil && rep.Database == "postgres") {
			t.Errorf("measure %s: goal %v, met %v on %s", m.Key, m.Goal, m.Met, rep.Database)
		}
		if want := wantRelay(m.Key); m.Relay != want {
			t.Errorf("measure %s: relay %q, want %q", m.Key, m.Relay, want)
		}
	}
	checkRelayCalls(t, db, cfg, &relays)

	var table, js bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"SCENARIO", "RELAY", "postbox / raw DELETE", "relays", bench.RelayProcess, bench.RelayInProcess} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, table.String())
		}
	}
	for _, s := range []string{bench.AllScenarios[0], "drain.ratio_delete", `"scaling"`, `"relay"`} {
		if !strings.Contains(js.String(), s) {
			t.Errorf("JSON lacks %q", s)
		}
	}
	for _, s := range cfg.Scenarios {
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

// TestDrainMySQL runs drain-noop in a tiny size on the MariaDB or MySQL
// server of mysqltest (a missing server fails the test), and checks that
// every measure is a positive number, that no goal is judged, that no
// scratch database is left, and that a scenario needing PostgreSQL is
// refused.
func TestDrainMySQL(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(mysqltest.URL())
	if err != nil {
		t.Fatalf("mysqltest.URL() %q: %v", mysqltest.URL(), err)
	}
	u.Path = "/postbox_bench" // not touched: the scratch databases are the server's
	var progress logbuf.Buffer
	cfg := bench.Config{DB: u.String(), Scenarios: []string{bench.ScenarioDrain}, DrainEvents: 2000, Progress: &progress}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	if rep.Database != "mysql" {
		t.Errorf("database %q, want mysql", rep.Database)
	}
	for _, key := range []string{
		"drain.postbox", "drain.postbox_metrics", "drain.metrics_ratio", "drain.raw_delete", "drain.raw_update", "drain.ratio_delete", "drain.ratio_update",
	} {
		m, ok := rep.Measure(key)
		switch {
		case !ok:
			t.Errorf("no measure %s", key)
		case !(m.Value > 0):
			t.Errorf("measure %s = %v %s, want a positive number", key, m.Value, m.Unit)
		case m.Met != nil:
			t.Errorf("measure %s judged against its goal on MySQL", key)
		case m.Relay != wantRelay(key):
			t.Errorf("measure %s: relay %q, want %q", key, m.Relay, wantRelay(key))
		}
	}
	if !strings.Contains(progress.String(), rep.Run+"_raw_delete") {
		t.Errorf("no scratch database %s_raw_delete in the progress lines:\n%s", rep.Run, progress.String())
	}
	left, err := bench.Leftovers(ctx, cfg.DB, rep.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("scratch databases left after the run: %v", left)
	}

	cfg.Scenarios = []string{bench.ScenarioDrainWAL}
	rep, err = bench.Run(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "needs PostgreSQL") {
		t.Errorf("drain-noop-wal on MySQL: err = %v, want it refused as needing PostgreSQL", err)
	}
	if rep != nil {
		if left, err := bench.Leftovers(ctx, cfg.DB, rep.Run); err != nil || len(left) > 0 {
			t.Errorf("left after the refused run: %v (%v)", left, err)
		}
	}
}

// TestWALAndInboxScenarios runs the WAL-mode scenarios and inbox in a tiny
// size ("wal" stands for the three WAL-mode ones and their default-mode
// counterparts), and checks every measure, that latency-wal ran `postbox
// relay --wal`, and that no scratch schema, replication slot or
// publication is left.
func TestWALAndInboxScenarios(t *testing.T) {
	ctx := context.Background()
	var (
		progress logbuf.Buffer
		relays   relayCalls
	)
	cfg := bench.Config{
		DB: pgtest.LogicalURL(t), Scenarios: []string{"wal", bench.ScenarioInbox},
		DrainEvents: 2000, Duration: time.Second, Rates: []int{200}, Clients: 4, InboxClients: 4,
		Progress: &progress, Command: relays.command,
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	want := []string{bench.ScenarioDrain, bench.ScenarioDrainWAL, bench.ScenarioLatency, bench.ScenarioLatencyWAL,
		bench.ScenarioWrite, bench.ScenarioWriteWAL, bench.ScenarioInbox}
	if !slices.Equal(rep.Params.Scenarios, want) {
		t.Errorf("ran %v, want %v", rep.Params.Scenarios, want)
	}
	for _, key := range []string{
		"drain_wal.postbox", "drain_wal.raw_delete", "drain_wal.ratio_delete",
		"latency_wal.p50_200", "latency_wal.p99_200", "latency_wal.max_200", "latency_wal.rate_200",
		"latency_wal.after_burst_p50", "latency_wal.after_burst_p99",
		"write_wal.tx_without", "write_wal.tx_with", "write_wal.ratio", "write_wal.tx_with_relay",
		"inbox.handler", "inbox.pgx", "inbox.ratio",
	} {
		m, ok := rep.Measure(key)
		switch {
		case !ok:
			t.Errorf("no measure %s", key)
		case !(m.Value > 0):
			t.Errorf("measure %s = %v %s, want a positive number", key, m.Value, m.Unit)
		case m.Relay != wantRelay(key):
			t.Errorf("measure %s: relay %q, want %q", key, m.Relay, wantRelay(key))
		}
	}
	var wal int
	for _, args := range relays.args {
		if slices.Contains(args, "--wal") {
			wal++
		}
	}
	if len(relays.args) != 2 || wal != 1 {
		t.Errorf("relays started %q, want two (latency and latency-wal), one of them with --wal", relays.args)
	}
	left, err := bench.Leftovers(ctx, cfg.DB, rep.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("left after the run: %v", left)
	}
}

// wantRelay is how the relay of the measure key runs: the webhook,
// latency, scale, scaling and endpoints scenarios run `postbox relay`, the
// others the relay library, and the raw-SQL drains, the signed-HTTP limit
// and the business transactions without a relay none.
func wantRelay(key string) string {
	scenario, _, _ := strings.Cut(key, ".")
	switch {
	case strings.HasPrefix(key, "drain.raw_"), strings.HasPrefix(key, "drain_wal.raw_"),
		(scenario == "write" || scenario == "write_wal") && !strings.HasSuffix(key, "_relay"),
		scenario == "inbox", key == "webhook.signed_http", key == "webhook.cpu_signed_http":
		return ""
	case scenario == "webhook", scenario == "latency", scenario == "latency_wal", scenario == "scale", scenario == "scaling", scenario == "endpoints":
		return bench.RelayProcess
	}
	return bench.RelayInProcess
}

// checkRelayCalls checks that the run started `postbox relay` once for
// webhook, once for latency, twice for scale, three times for endpoints (in
// endpoints mode: its speed and its two isolation phases) and once per
// process for scaling, each with the flags of its outbox, the webhook
// endpoint, a whsec_ secret and the concurrency scaling sets, and nothing
// else; and that the endpoints scenario registered its endpoints with
// `postbox endpoints add`, 10 per phase, each on loopback.
func checkRelayCalls(t *testing.T, db string, cfg bench.Config, relays *relayCalls) {
	t.Helper()
	want := 1 + 1 + 2 + 3 // webhook, latency, scale, the three phases of endpoints
	for _, i := range cfg.Instances {
		want += i * len(cfg.Concurrency)
	}
	if len(relays.args) != want {
		t.Errorf("started `postbox relay` %d times, want %d", len(relays.args), want)
	}
	concurrency := map[string]int{}
	endpointsRelays := 0
	for _, args := range relays.args {
		if i := slices.Index(args, "--endpoints"); i >= 0 {
			// The endpoints scenario: the outbox's flags, then endpoints
			// mode, with the relay's allowance of private addresses
			// when endpoints add has none.
			endpointsRelays++
			rest := strings.Join(args[i:], " ")
			if args[0] != "--db" || (rest != "--endpoints --log-level warn" && rest != "--endpoints --allow-private-endpoints --log-level warn") {
				t.Errorf("relay args %q: want --db first, then --endpoints [--allow-private-endpoints] --log-level warn", args)
			}
			continue
		}
		flags := map[string]string{}
		for i := 0; i+1 < len(args); i += 2 {
			name, ok := strings.CutPrefix(args[i], "--")
			if !ok {
				t.Errorf("relay args %q: %q is not a flag", args, args[i])
			}
			flags[name] = args[i+1]
		}
		if len(args)%2 != 0 {
			t.Errorf("relay args %q: not flag and value pairs", args)
		}
		allowed := []string{"db", "webhook-url", "webhook-secret", "concurrency", "log-level"}
		if strings.HasPrefix(db, "postgres") {
			allowed = append(allowed, "schema")
			if !strings.HasPrefix(flags["schema"], "postbox_bench_") {
				t.Errorf("relay args %q: --schema is not a scratch schema", args)
			}
		} else if !strings.HasPrefix(flags["db"], db+".postbox_bench_") {
			t.Errorf("relay args %q: --db is not a scratch file beside %s", args, db)
		}
		for name := range flags {
			if !slices.Contains(allowed, name) {
				t.Errorf("relay args %q: unexpected --%s", args, name)
			}
		}
		if !strings.HasPrefix(flags["webhook-url"], "http://127.0.0.1:") || !strings.HasPrefix(flags["webhook-secret"], "whsec_") ||
			flags["log-level"] != "warn" || flags["db"] == "" {
			t.Errorf("relay args %q: want --db, a local --webhook-url, a whsec_ --webhook-secret and --log-level warn", args)
		}
		concurrency[flags["concurrency"]]++
	}
	if endpointsRelays != 3 {
		t.Errorf("%d relays ran in endpoints mode, want 3 (the endpoints scenario's three phases)", endpointsRelays)
	}
	if len(relays.endpoints) != 3*10 {
		t.Errorf("%d endpoints added, want 30 (10 in each phase of the endpoints scenario)", len(relays.endpoints))
	}
	names := map[string]bool{}
	for _, args := range relays.endpoints {
		flags := strings.Join(args, " ")
		i := slices.Index(args, "--name")
		if args[0] != "--db" || i < 0 || i+1 >= len(args) || !strings.Contains(flags, " --url http://127.0.0.1:") {
			t.Errorf("endpoints add %q: want --db first, a --name and a --url on loopback", args)
			continue
		}
		names[args[i+1]] = true
	}
	if len(names) != len(relays.endpoints) {
		t.Errorf("endpoints added under %d names, want %d different ones", len(names), len(relays.endpoints))
	}
	if concurrency[""] != 4 {
		t.Errorf("%d relays ran with the default concurrency, want 4 (webhook, latency and scale)", concurrency[""])
	}
	for _, c := range cfg.Concurrency {
		want := 0
		for _, i := range cfg.Instances {
			want += i
		}
		if got := concurrency[strconv.Itoa(c)]; got != want {
			t.Errorf("%d relays ran with --concurrency %d, want %d", got, c, want)
		}
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
	var relays relayCalls
	cfg := bench.Config{DB: db, Scenarios: []string{bench.ScenarioWebhook}, WebhookEvents: 100, Keep: true, Command: relays.command}
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

// TestRelayProcessExit checks that a `postbox relay` process that exits
// before the bench stops it (here: refused flags) fails the run at once,
// with its log among the progress lines, instead of a stalled drain.
func TestRelayProcessExit(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "exit.db")
	var progress logbuf.Buffer
	cfg := bench.Config{
		DB: db, Scenarios: []string{bench.ScenarioScale}, ScaleSmall: 100, ScaleLarge: 200, Progress: &progress,
		Command: func(ctx context.Context, args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, postboxBin, append([]string{args[0], "--no-such-flag"}, args[1:]...)...)
		},
	}
	start := time.Now()
	rep, err := bench.Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "exited before the bench stopped it") {
		t.Fatalf("run: err = %v, want the relay's exit\nprogress:\n%s", err, progress.String())
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the run failed after %s, want at once", took)
	}
	if !strings.Contains(progress.String(), "no-such-flag") {
		t.Errorf("the relay's complaint is not among the progress lines:\n%s", progress.String())
	}
	left, lerr := bench.Leftovers(context.Background(), db, rep.Run)
	if lerr != nil || len(left) > 0 {
		t.Errorf("scratch outboxes left after the failed run: %v (%v)", left, lerr)
	}
}
