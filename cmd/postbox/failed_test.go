package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// failedListJSON is the output of "postbox failed list --json".
type failedListJSON struct {
	Events []struct {
		ID        string          `json:"id"`
		Status    string          `json:"status"`
		EventType string          `json:"event_type"`
		Attempts  int             `json:"attempts"`
		LastError string          `json:"last_error"`
		FailedAt  *time.Time      `json:"failed_at"`
		Payload   json.RawMessage `json:"payload"`
	} `json:"events"`
	Next string `json:"next"`
}

// groupsJSON is the output of "postbox failed list --group-by error --json".
type groupsJSON struct {
	Groups   []store.FailureGroup `json:"groups"`
	Scanned  int                  `json:"scanned"`
	Complete bool                 `json:"complete"`
}

func jsonOut(t *testing.T, v any, args ...string) {
	t.Helper()
	out := runOK(t, args...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("postbox %s printed %q: %v", strings.Join(args, " "), out, err)
	}
}

// failEvents writes events of eventType and makes them failed through the
// store's Settle, the i-th with the error errText(i); it returns their ids.
// Nothing else may be pending.
func failEvents(t *testing.T, s store.Outbox, eventType string, n int, errText func(i int) string) []string {
	t.Helper()
	ctx := context.Background()
	events := make([]postbox.Event, n)
	for i := range events {
		events[i] = postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: fmt.Sprint(i),
			EventType: eventType, Payload: []byte(fmt.Sprintf(`{"n": %d, "items": [1, 2]}`, i))}
	}
	if err := s.Enqueue(ctx, events...); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, store.ClaimParams{Owner: "test", Limit: n, Lease: time.Minute})
	if err != nil || len(claimed) != n {
		t.Fatalf("claimed %d of %d: %v", len(claimed), n, err)
	}
	failures := make([]store.Failure, n)
	ids := make([]string, n)
	for i, e := range events {
		failures[i] = store.Failure{ID: e.ID, LastError: errText(i)}
		ids[i] = e.ID.String()
	}
	if err := s.Settle(ctx, store.SettleParams{Owner: "test", Failed: failures}); err != nil {
		t.Fatal(err)
	}
	return ids
}

func sameIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	g := map[string]bool{}
	for _, id := range got {
		g[id] = true
	}
	if len(g) != len(got) || len(got) != len(want) {
		t.Fatalf("%s: got %d ids (%d distinct), want %d", what, len(got), len(g), len(want))
	}
	for _, id := range want {
		if !g[id] {
			t.Fatalf("%s: %s is missing", what, id)
		}
	}
}

// The scenario: events dead-lettered against a dead endpoint (410)
// are listed by "failed list --json", grouped by their error, and once the
// endpoint is back "failed retry --all" gets every one delivered by the
// running relay.
func TestFailedRetryAllAfterDeadEndpoint(t *testing.T) {
	s, db := schemaStore(t)
	var dead atomic.Bool
	dead.Store(true)
	rcv := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		if dead.Load() {
			return http.StatusGone
		}
		return 0
	})
	events := enqueueN(t, s, 30)
	startRelay(t, db, rcv.URL, "--max-attempts", "1", "--poll", "100ms")
	waitFor(t, "every event failed", 30*time.Second, func() bool { return status(t, db)["failed"] == float64(len(events)) })

	var list failedListJSON
	jsonOut(t, &list, append([]string{"failed", "list", "--json", "--limit", "1000"}, db...)...)
	var listed []string
	for _, e := range list.Events {
		listed = append(listed, e.ID)
		if e.Status != "failed" || e.Attempts != 1 || !strings.Contains(e.LastError, "410") || e.FailedAt == nil || e.EventType != "order.created" {
			t.Fatalf("listed event: %+v", e)
		}
	}
	want := make([]string, len(events))
	for i, e := range events {
		want[i] = e.ID.String()
	}
	sameIDs(t, "failed list --json", listed, want)
	if list.Next != "" {
		t.Fatalf("one page holds them all, yet next is %q", list.Next)
	}

	var groups groupsJSON
	jsonOut(t, &groups, append([]string{"failed", "list", "--group-by", "error", "--json"}, db...)...)
	if len(groups.Groups) != 1 || groups.Groups[0].Count != len(events) || !groups.Complete || !strings.Contains(groups.Groups[0].Fingerprint, "status N") {
		t.Fatalf("groups of one dead endpoint: %+v", groups)
	}

	dead.Store(false)
	out := runOK(t, append([]string{"failed", "retry", "--all"}, db...)...)
	if !strings.Contains(out, fmt.Sprintf("retried %d failed events", len(events))) {
		t.Fatalf("failed retry --all printed %q", out)
	}
	rcv.WaitAccepted(t, len(events), 30*time.Second)
	var got []string
	for _, d := range rcv.Accepted() {
		got = append(got, d.ID)
	}
	sameIDs(t, "delivered after the retry", got, want)
	waitFor(t, "nothing failed", 10*time.Second, func() bool {
		st := status(t, db)
		return st["failed"] == 0 && st["done"] == float64(len(events))
	})
}

// purge --older-than deletes only what failed longer ago than the duration,
// of the type given; show prints one event.
func TestFailedPurgeOlderThanAndShow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	paid := failEvents(t, s.Driver(), "order.paid", 4, func(i int) string { return fmt.Sprintf("permanent: status 410: order %d gone", i) })
	created := failEvents(t, s.Driver(), "order.created", 3, func(int) string { return "timeout" })

	show := runOK(t, append([]string{"failed", "show", paid[2]}, db...)...)
	for _, want := range []string{"status      failed", "event type  order.paid", "attempts    1", "last error  permanent: status 410: order 2 gone", "\"n\": 2", "failed      "} {
		if !strings.Contains(show, want) {
			t.Fatalf("failed show lacks %q:\n%s", want, show)
		}
	}

	if out := runOK(t, append([]string{"failed", "purge", "--older-than", "1h"}, db...)...); !strings.Contains(out, "purged 0 failed events") {
		t.Fatalf("purge of events younger than an hour printed %q", out)
	}
	if out := runOK(t, append([]string{"failed", "purge", "--older-than", "0s", "--type", "order.paid"}, db...)...); !strings.Contains(out, "purged 4 failed events") {
		t.Fatalf("purge --type order.paid printed %q", out)
	}
	var list failedListJSON
	jsonOut(t, &list, append([]string{"failed", "list", "--json"}, db...)...)
	var left []string
	for _, e := range list.Events {
		left = append(left, e.ID)
	}
	sameIDs(t, "failed events left after the purge", left, created)
	if _, err := s.Get(context.Background(), mustUUID(t, paid[0])); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("purged event: %v, want it gone", err)
	}
	last := usageError(t, append([]string{"failed", "purge"}, db...)...)
	if !strings.Contains(last, "--older-than is required") {
		t.Fatalf("purge without --older-than said %q", last)
	}
}

// --group-by error lists one group per error fingerprint; retry --group and
// purge --group act on one group only.
func TestFailedGroups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	unavailable := failEvents(t, s.Driver(), "order.paid", 5, func(i int) string {
		return fmt.Sprintf("retryable: status 503: upstream 10.0.0.%d busy since 2025-03-01T12:00:%02dZ", i, i)
	})
	refused := failEvents(t, s.Driver(), "order.paid", 3, func(i int) string {
		return fmt.Sprintf(`retryable: Post "http://127.0.0.1:%d/hook": connection refused`, 40000+i)
	})

	var groups groupsJSON
	jsonOut(t, &groups, append([]string{"failed", "list", "--group-by", "error", "--json"}, db...)...)
	if len(groups.Groups) != 2 || groups.Scanned != 8 || !groups.Complete {
		t.Fatalf("groups: %+v, want 2 groups of 8 events", groups)
	}
	big, small := groups.Groups[0], groups.Groups[1]
	if big.Count != 5 || big.Fingerprint != "retryable: status N: upstream N busy since <time>" || small.Count != 3 {
		t.Fatalf("groups: %+v", groups.Groups)
	}
	table := runOK(t, append([]string{"failed", "list", "--group-by", "error"}, db...)...)
	if !strings.Contains(table, big.ID) || !strings.Contains(table, small.Fingerprint) {
		t.Fatalf("group table lacks the groups:\n%s", table)
	}

	if out := runOK(t, append([]string{"failed", "retry", "--group", big.ID}, db...)...); !strings.Contains(out, "retried 5 failed events") {
		t.Fatalf("retry --group printed %q", out)
	}
	for _, id := range unavailable {
		if r, err := s.Get(context.Background(), mustUUID(t, id)); err != nil || r.Status != store.StatusPending || r.Attempts != 0 {
			t.Fatalf("event of the retried group: %+v, %v", r, err)
		}
	}
	if out := runOK(t, append([]string{"failed", "purge", "--group", small.ID, "--older-than", "0s"}, db...)...); !strings.Contains(out, "purged 3 failed events") {
		t.Fatalf("purge --group printed %q", out)
	}
	for _, id := range refused {
		if _, err := s.Get(context.Background(), mustUUID(t, id)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("event of the purged group: %v", err)
		}
	}
	if last := usageError(t, append([]string{"failed", "retry", "--group", "nonsense"}, db...)...); !strings.Contains(last, "--group") {
		t.Fatalf("retry of a malformed group said %q", last)
	}
}

// SIGINT during a retry stops it after the batch in flight, and says how
// many were retried and that running it again continues; the second run
// retries the rest. (The hidden $POSTBOX_FAILED_BATCH_SIZE makes batches of
// one event.)
func TestFailedRetryInterruptedThenRerun(t *testing.T) {
	s, db := schemaStore(t)
	const n = 3000
	failEvents(t, s.Driver(), "order.paid", n, func(int) string { return "permanent: status 410: gone" })

	cmd := command(append([]string{"failed", "retry", "--all"}, db...)...)
	cmd.Env = append(cmd.Env, "POSTBOX_FAILED_BATCH_SIZE=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	first := make(chan string, 1)
	var lines []string
	var mu sync.Mutex
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			select {
			case first <- sc.Text():
			default:
			}
		}
	}()
	select {
	case line := <-first:
		if line != "retried 1 so far" {
			t.Fatalf("first progress line %q, want \"retried 1 so far\" (a plain line per batch off a terminal)", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no progress line")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-readDone
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("interrupted retry: %v, want exit status 1\n%s", err, errOut.String())
	}
	msg := strings.TrimSpace(errOut.String())
	m := regexp.MustCompile(`^postbox: interrupted: retried (\d+) failed events, each batch whole; run the same command again to retry the rest$`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("interrupted retry said %q", msg)
	}
	done, _ := strconv.Atoi(m[1])
	mu.Lock()
	lastLine := lines[len(lines)-1]
	mu.Unlock()
	if lastLine != fmt.Sprintf("retried %d so far", done) {
		t.Fatalf("last progress line %q, but the message says %d", lastLine, done)
	}
	st := status(t, db)
	if done >= n || st["failed"] != float64(n-done) || st["pending"] != float64(done) {
		t.Fatalf("after retrying %d of %d and stopping: %v", done, n, st)
	}

	rerun := command(append([]string{"failed", "retry", "--all"}, db...)...)
	rerun.Env = append(rerun.Env, "POSTBOX_FAILED_BATCH_SIZE=1000")
	out, err := rerun.Output()
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if !strings.Contains(string(out), fmt.Sprintf("retried %d failed events", n-done)) {
		t.Fatalf("second run printed %q, want the %d left retried", out, n-done)
	}
	if st := status(t, db); st["failed"] != 0 || st["pending"] != n {
		t.Fatalf("after the second run: %v", st)
	}
}

// status shows the unfinished events per type, the most numerous first,
// and sums up the rest as "other"; --watch prints again until SIGINT.
func TestStatusByTypeAndWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	failEvents(t, s.Driver(), "order.paid", 3, func(int) string { return "gone" })
	for i, typ := range []string{"order.created", "order.created", "user.signed_up", "order.paid"} {
		e := postbox.Event{AggregateType: "order", AggregateID: fmt.Sprint(i), EventType: typ, Payload: []byte(`{}`)}
		if err := s.Enqueue(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	var st struct {
		Failed     int               `json:"failed"`
		Types      []store.TypeStats `json:"types"`
		OtherTypes *struct {
			Types   int `json:"types"`
			Pending int `json:"pending"`
		} `json:"other_types"`
	}
	jsonOut(t, &st, append([]string{"status", "--json", "--types", "2"}, db...)...)
	want := []store.TypeStats{{EventType: "order.paid", Pending: 1, Failed: 3}, {EventType: "order.created", Pending: 2}}
	if st.Failed != 3 || fmt.Sprint(st.Types) != fmt.Sprint(want) || st.OtherTypes == nil || st.OtherTypes.Types != 1 || st.OtherTypes.Pending != 1 {
		t.Fatalf("status --json --types 2: %+v", st)
	}
	table := runOK(t, append([]string{"status"}, db...)...)
	if !regexp.MustCompile(`order\.paid\s+1\s+0\s+3`).MatchString(table) {
		t.Fatalf("status table lacks the per-type line of order.paid:\n%s", table)
	}

	watch := command(append([]string{"status", "--watch", "100ms"}, db...)...)
	var out logbuf.Buffer
	watch.Stdout = &out
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watch.Process.Kill() })
	waitFor(t, "three status blocks", 20*time.Second, func() bool { return strings.Count(out.String(), "oldest pending") >= 3 })
	if err := watch.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := watch.Wait(); err != nil {
		t.Fatalf("status --watch after SIGINT: %v, want exit status 0", err)
	}
	if blocks := strings.Count(out.String(), "\n-- "); blocks < 2 || strings.Contains(out.String(), "\033[") {
		t.Fatalf("status --watch off a terminal: want plain blocks with a time line, no escape codes:\n%s", out.String())
	}
}

// usageError runs postbox with args, which must exit with status 2 (a
// usage error) and one line on stderr, and returns that line.
func usageError(t *testing.T, args ...string) string {
	t.Helper()
	var errOut bytes.Buffer
	cmd := command(args...)
	cmd.Stderr = &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("postbox %v: %v, want exit status 2\n%s", args, err, errOut.String())
	}
	line := strings.TrimSpace(errOut.String())
	if strings.Contains(line, "\n") || !strings.HasPrefix(line, "postbox: ") {
		t.Fatalf("postbox %v: stderr %q, want one \"postbox: ...\" line", args, line)
	}
	return line
}

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
