package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/store/postgres"
	"github.com/postbox-go/postbox/store/sqlite"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// binary is the postbox command, built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "postbox-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "postbox")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build postbox: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// secretsKey is the secrets key of the tests' commands: command gives it
// to every one in $POSTBOX_SECRETS_KEY, as an operator's environment
// would.
var secretsKey = keyring.GenerateKey()

// command returns the postbox command with a clean environment: only
// PATH, HOME and the secrets key (commandWithoutKey leaves it out).
func command(args ...string) *exec.Cmd {
	cmd := commandWithoutKey(args...)
	cmd.Env = append(cmd.Env, keyring.EnvVar+"="+secretsKey)
	return cmd
}

// commandWithoutKey returns the postbox command with PATH and HOME alone
// in its environment: no secrets key.
func commandWithoutKey(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	return cmd
}

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := command(args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("postbox %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// schemaStore makes a fresh schema migrated by the command itself.
func schemaStore(t *testing.T) (*postgres.Store, []string) {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	db := []string{"--db", pgtest.URL(), "--schema", schema}
	runOK(t, append([]string{"migrate"}, db...)...)
	if out := runOK(t, append([]string{"migrate"}, db...)...); !strings.Contains(out, "up to date") {
		t.Fatalf("second migrate said %q, want a no-op", out)
	}
	s, err := postgres.New(pool, postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

func enqueueN(t *testing.T, s *postgres.Store, n int) []postbox.Event {
	t.Helper()
	events := make([]postbox.Event, n)
	for i := range events {
		events[i] = postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: fmt.Sprint(i),
			EventType: "order.created", Payload: []byte(fmt.Sprintf(`{"n": %d}`, i))}
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	return events
}

func startRelay(t *testing.T, db []string, url string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"relay", "--retention", "1h"}, db...) // keep delivered events, to count them
	args = append(args, extra...)
	cmd := command(args...)
	cmd.Env = append(cmd.Env, "WEBHOOK_URL="+url, "WEBHOOK_SECRET="+secret)
	cmd.Stderr = &bytes.Buffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func status(t *testing.T, db []string) map[string]float64 {
	t.Helper()
	out := runOK(t, append([]string{"status", "--json"}, db...)...)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("status --json printed %q: %v", out, err)
	}
	st := map[string]float64{}
	for _, k := range []string{"pending", "processing", "done", "failed", "oldest_pending_age_seconds"} {
		var v float64
		if err := json.Unmarshal(raw[k], &v); err != nil {
			t.Fatalf("status --json lacks the number %q: %s", k, out)
		}
		st[k] = v
	}
	return st
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A relay killed with SIGKILL in the middle of a batch: after a restart
// every event is delivered and none stays processing.
func TestRelayKilledMidBatchLosesNothing(t *testing.T) {
	s, db := schemaStore(t)
	slow := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		time.Sleep(100 * time.Millisecond)
		return 0
	})
	events := enqueueN(t, s, 300)
	first := startRelay(t, db, slow.URL, "--lease", "1s", "--concurrency", "8", "--batch", "50")
	waitFor(t, "some deliveries", 20*time.Second, func() bool { return len(slow.Accepted()) >= 30 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if st := status(t, db); st["processing"] == 0 {
		t.Fatalf("killed relay left nothing in processing (%v): the test did not kill it mid-batch", st)
	}
	startRelay(t, db, slow.URL, "--lease", "1s", "--concurrency", "32")
	waitFor(t, "every event done", 60*time.Second, func() bool {
		st := status(t, db)
		return st["done"] == float64(len(events))
	})
	st := status(t, db)
	if st["processing"] != 0 || st["pending"] != 0 || st["failed"] != 0 {
		t.Fatalf("after restart: %v", st)
	}
	got := map[string]bool{}
	for _, d := range slow.Accepted() {
		got[d.ID] = true
	}
	for _, e := range events {
		if !got[e.ID.String()] {
			t.Fatalf("event %s never delivered", e.ID)
		}
	}
}

// SIGTERM: the relay finishes or releases what is in flight and exits 0.
func TestRelayStopsGracefullyOnSignal(t *testing.T) {
	s, db := schemaStore(t)
	slow := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		time.Sleep(300 * time.Millisecond)
		return 0
	})
	events := enqueueN(t, s, 200)
	cmd := startRelay(t, db, slow.URL, "--concurrency", "4", "--batch", "20")
	waitFor(t, "deliveries in flight", 20*time.Second, func() bool { return len(slow.Accepted()) >= 4 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("relay exit after SIGTERM: %v\n%s", err, cmd.Stderr)
	}
	st := status(t, db)
	if st["processing"] != 0 || st["done"]+st["pending"] != float64(len(events)) {
		t.Fatalf("after a graceful stop: %v", st)
	}
	if logs := cmd.Stderr.(*bytes.Buffer).String(); strings.Contains(logs, strings.TrimPrefix(secret, "whsec_")) {
		t.Fatal("the secret appears in the logs")
	}
	if int(st["done"]) != len(slow.Accepted()) {
		t.Fatalf("%v done but the receiver accepted %d", st["done"], len(slow.Accepted()))
	}
}

func TestErrorsAreOneLineAndNonZero(t *testing.T) {
	cases := [][]string{
		{"relay", "--db", "mysql://x"},
		{"status"},
		{"nosuchcommand"},
		{"relay", "--db", pgtest.URL(), "--webhook-url", "http://127.0.0.1:1", "--webhook-secret", "short"},
	}
	for _, args := range cases {
		var errOut bytes.Buffer
		cmd := command(args...)
		cmd.Stderr = &errOut
		err := cmd.Run()
		if err == nil {
			t.Errorf("postbox %v succeeded", args)
			continue
		}
		last := strings.TrimSpace(errOut.String())
		if i := strings.LastIndex(last, "\n"); i >= 0 {
			last = last[i+1:]
		}
		if !strings.HasPrefix(last, "postbox: ") {
			t.Errorf("postbox %v: last stderr line %q, want a \"postbox: ...\" error", args, last)
		}
	}
}

// --db sqlite:PATH works for migrate, relay and status; the relay finds the
// events of another process by polling.
func TestSQLiteCommands(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 50 {
		e := postbox.Event{AggregateType: "order", AggregateID: fmt.Sprint(i), EventType: "order.created", Payload: []byte(`{}`)}
		if err := s.Enqueue(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	rcv := receiver.New(t, secret, nil)
	startRelay(t, db, rcv.URL, "--poll", "50ms")
	rcv.WaitAccepted(t, 50, 20*time.Second)
	waitFor(t, "every event done", 10*time.Second, func() bool { return status(t, db)["done"] == 50 })
}

// The README's first command, with a small run: it exits 0 and reports
// nothing lost and nothing applied twice.
func TestDemoCommand(t *testing.T) {
	out := runOK(t, "demo", "--events", "100", "--rate", "2000", "--fault-rate", "0.2")
	for _, want := range []string{"orders created          100", "applied exactly once    100", "lost                    0", "applied twice           0", "OK:"} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
}

const orderedMessage = `postgres: ordered claims need the index outbox_events_aggregate_open_idx: run "postbox migrate --ordered" (or Store.MigrateOrdered)`

// runFails runs the command, which must exit with code 1 within 30 s, and
// returns the last line of its stderr.
func runFails(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("postbox %v: %v, want exit status 1\n%s", cmd.Args[1:], err, errOut.String())
	}
	last := strings.TrimSpace(errOut.String())
	if i := strings.LastIndex(last, "\n"); i >= 0 {
		last = last[i+1:]
	}
	return last
}

// An ordered relay on PostgreSQL needs "postbox migrate --ordered" once:
// without it the relay exits at start and says what to run; after it, the
// relay starts and delivers each aggregate's events in order.
func TestRelayOrderedNeedsMigrateOrdered(t *testing.T) {
	s, db := schemaStore(t)
	relayArgs := append([]string{"relay", "--ordered", "--poll", "50ms"}, db...)
	cmd := command(relayArgs...)
	cmd.Env = append(cmd.Env, "WEBHOOK_URL=http://127.0.0.1:1", "WEBHOOK_SECRET="+secret)
	if last := runFails(t, cmd); last != "postbox: "+orderedMessage {
		t.Fatalf("relay --ordered without the index said %q, want %q", last, "postbox: "+orderedMessage)
	}

	out := runOK(t, append([]string{"migrate", "--ordered"}, db...)...)
	if !strings.Contains(out, "outbox_events_aggregate_open_idx") {
		t.Fatalf("migrate --ordered printed %q, want the index named", out)
	}
	again := command(append([]string{"migrate"}, db...)...) // the flag from its environment variable
	again.Env = append(again.Env, "POSTBOX_ORDERED=true")
	if out, err := again.Output(); err != nil || !strings.Contains(string(out), "outbox_events_aggregate_open_idx") {
		t.Fatalf("second migrate with POSTBOX_ORDERED=true: %v, printed %q", err, out)
	}

	const aggregates, perAggregate = 5, 10
	var events []postbox.Event
	for n := range perAggregate {
		for a := range aggregates {
			events = append(events, postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: fmt.Sprint(a),
				EventType: "order.updated", Payload: []byte(fmt.Sprintf(`{"n": %d}`, n))})
		}
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	rcv := receiver.New(t, secret, nil)
	startRelay(t, db, rcv.URL, "--ordered", "--poll", "50ms")
	rcv.WaitAccepted(t, len(events), 30*time.Second)
	next := map[string]int{}
	for _, d := range rcv.Accepted() {
		var p struct{ N int }
		if err := json.Unmarshal(d.Body, &p); err != nil {
			t.Fatal(err)
		}
		if p.N != next[d.AggregateID] {
			t.Fatalf("aggregate %s: event %d delivered before %d", d.AggregateID, p.N, next[d.AggregateID])
		}
		next[d.AggregateID]++
	}
}

// SQLite keeps the ordered claim's index in its migrations: "migrate
// --ordered" has nothing more to do, and an ordered relay just starts.
func TestSQLiteOrdered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	if out := runOK(t, append([]string{"migrate", "--ordered"}, db...)...); !strings.Contains(out, "SQLite") {
		t.Fatalf("migrate --ordered on SQLite printed %q, want a note that SQLite needs nothing more", out)
	}
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 20 {
		e := postbox.Event{AggregateType: "order", AggregateID: fmt.Sprint(i % 4), EventType: "order.updated", Payload: []byte(`{}`)}
		if err := s.Enqueue(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	rcv := receiver.New(t, secret, nil)
	startRelay(t, db, rcv.URL, "--ordered", "--poll", "50ms")
	rcv.WaitAccepted(t, 20, 20*time.Second)
}
