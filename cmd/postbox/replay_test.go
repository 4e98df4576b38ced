package main_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// keptDone writes n events of the given types (the i-th of types[i%len])
// and marks them delivered and kept, as a relay with --retention leaves
// them; it returns them.
func keptDone(t *testing.T, s store.Outbox, n int, types ...string) []postbox.Event {
	t.Helper()
	ctx := context.Background()
	events := make([]postbox.Event, n)
	for i := range events {
		events[i] = postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: fmt.Sprint(i),
			EventType: types[i%len(types)], Payload: []byte(fmt.Sprintf(`{"n": %d}`, i))}
	}
	if err := s.Enqueue(ctx, events...); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, store.ClaimParams{Owner: "test", Limit: n, Lease: time.Minute})
	if err != nil || len(claimed) != n {
		t.Fatalf("claimed %d of %d: %v", len(claimed), n, err)
	}
	p := store.SettleParams{Owner: "test", KeepDone: true}
	for _, c := range claimed {
		p.Done = append(p.Done, c.Event.ID)
		if !slices.Contains(p.Ended, c.Lease) {
			p.Ended = append(p.Ended, c.Lease)
		}
	}
	if err := s.Settle(ctx, p); err != nil {
		t.Fatal(err)
	}
	return events
}

// postbox replay on PostgreSQL, as an operator runs it: --dry-run and no
// --yes print the plan and the count and send nothing; --yes sends the
// chosen events back to the queue, and the running relay delivers each
// once more, with its webhook-id and the replay's name in Postbox-Replay.
func TestReplayCommand(t *testing.T) {
	s, db := schemaStore(t)
	events := keptDone(t, s.Driver(), 30, "order.created", "order.paid", "user.signed_up")
	rcv := receiver.New(t, secret, nil)
	startRelay(t, db, rcv.URL, "--poll", "50ms")
	var paid []string
	for _, e := range events {
		if e.EventType == "order.paid" {
			paid = append(paid, e.ID.String())
		}
	}
	sel := append([]string{"replay", "--since-ago", "1h", "--type", "order.paid", "--type", "nothing.*", "--aggregate-type", "order"}, db...)

	dry := runOK(t, append(sel, "--dry-run")...)
	for _, want := range []string{"replay replay-", "  types      order.paid, nothing.*", "(when the replay began)",
		"  read from  the outbox's table", "  send to    the outbox's queue", "Postbox-Replay: replay-",
		"would replay 10 events: read 10, matched 10; last id ", "--dry-run: nothing replayed"} {
		if !strings.Contains(dry, want) {
			t.Fatalf("replay --dry-run lacks %q:\n%s", want, dry)
		}
	}
	if out := runOK(t, sel...); !strings.Contains(out, "would replay 10 events") || !strings.Contains(out, "nothing replayed: give --yes to replay them") {
		t.Fatalf("replay without --yes printed:\n%s", out)
	}
	if st := status(t, db); st["pending"] != 0 || st["done"] != 30 {
		t.Fatalf("after a dry run and a plan: %v, want nothing requeued", st)
	}

	out := runOK(t, append(sel, "--yes", "--name", "fix-7")...)
	if !strings.Contains(out, "replay fix-7\n") || !strings.Contains(out, "replayed 10 events: read 10, matched 10, requeued 10, inserted 0, skipped 0") {
		t.Fatalf("replay --yes printed:\n%s", out)
	}
	rcv.WaitAccepted(t, 10, 30*time.Second)
	waitFor(t, "the replays delivered", 30*time.Second, func() bool { return status(t, db)["done"] == 30 })
	var got []string
	for _, d := range rcv.Accepted() {
		if d.Header.Get(postbox.HeaderReplay) != "fix-7" {
			t.Fatalf("delivery %s has %s %q, want fix-7", d.ID, postbox.HeaderReplay, d.Header.Get(postbox.HeaderReplay))
		}
		got = append(got, d.ID)
	}
	sameIDs(t, "replayed", got, paid)
}

// Bad flags are usage errors (exit status 2, one line naming the flag);
// an endpoint that does not exist is an error that says where they are
// listed.
func TestReplayCommandRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "nowhere"}, "--from \"nowhere\": want table, archive or both"},
		{[]string{"--from", "archive"}, "give its --archive URL"},
		{[]string{"--since", "yesterday"}, "--since"},
		{[]string{"--since", "2026-12-01T00:00:00Z", "--since-ago", "1h"}, "not both"},
		{[]string{"--since", "2026-12-02T00:00:00Z", "--until", "2026-12-01T00:00:00Z"}, "ends before it begins"},
		{[]string{"--dry-run", "--yes"}, "not both"},
		{[]string{"--since", "2999-01-01T00:00:00Z"}, "is not before the replay began"},
		{[]string{"--batch", "0"}, "--batch 0"},
		{[]string{"--batch", "10001"}, "--batch 10001"},
		{[]string{"--after", "nope"}, "--after \"nope\" is not an event id"},
		{[]string{"--type", "order.["}, "pattern"},
		{[]string{"--type", ""}, "--type"},
		{[]string{"--name", "two\twords"}, "--name"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
	} {
		line := usageError(t, append(append([]string{"replay"}, db...), tc.args...)...)
		if !strings.Contains(line, tc.want) {
			t.Errorf("replay %v said %q, want %q", tc.args, line, tc.want)
		}
	}
	last := runFails(t, command(append([]string{"replay", "--to-endpoint", "nobody", "--yes"}, db...)...))
	if !strings.Contains(last, "--to-endpoint") || !strings.Contains(last, "nobody") || !strings.Contains(last, "postbox endpoints list") {
		t.Fatalf("replay to an unknown endpoint said %q", last)
	}
}

// --to-endpoint NAME backfills that endpoint: only the events its types
// want become its deliveries, pending, marked with the replay's name; the
// outbox's rows are left done.
func TestReplayCommandToEndpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keptDone(t, s.Driver(), 12, "order.created", "user.signed_up")
	e, err := s.Driver().EndpointCreate(context.Background(), store.Endpoint{Name: "late", URL: "https://late.example/hook",
		Types: []string{"order.*"}, Secret: secret, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := runOK(t, append([]string{"replay", "--to-endpoint", "late", "--yes", "--name", "backfill", "--batch", "5"}, db...)...)
	for _, want := range []string{"  send to    endpoint late (" + e.ID.String() + ") only",
		"replayed 6 events: read 12, matched 6 (those the endpoint's types and filter want), requeued 0, inserted 6, skipped 0"} {
		if !strings.Contains(out, want) {
			t.Fatalf("replay --to-endpoint lacks %q:\n%s", want, out)
		}
	}
	pending, err := s.Driver().DeliveryList(context.Background(), e.ID, store.StatusPending, 100)
	if err != nil || len(pending) != 6 {
		t.Fatalf("pending deliveries of the endpoint: %d, %v; want 6", len(pending), err)
	}
	for _, d := range pending {
		if d.EventType != "order.created" || d.Headers[postbox.HeaderReplay] != "backfill" {
			t.Fatalf("delivery %+v: want order.created marked backfill", d)
		}
	}
	if st := status(t, db); st["pending"] != 0 || st["done"] != 12 {
		t.Fatalf("the outbox after an endpoint's backfill: %v", st)
	}
}

// SIGINT during a replay stops it after the batch in flight and prints the
// flags that resume it (--after the last id, the window's end and the
// name it chose); run with them, the rest is replayed: every event once.
func TestReplayCommandInterruptedThenResumed(t *testing.T) {
	s, db := schemaStore(t)
	const n = 3000
	keptDone(t, s.Driver(), n, "order.created")

	cmd := command(append([]string{"replay", "--yes", "--batch", "1"}, db...)...)
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
	planned := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "  consumers") {
				close(planned)
			}
		}
	}()
	select {
	case <-planned:
	case <-time.After(30 * time.Second):
		t.Fatal("no plan printed")
	}
	waitFor(t, "some events requeued", 30*time.Second, func() bool { return status(t, db)["pending"] > 0 })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-readDone
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("interrupted replay: %v, want exit status 1\n%s", err, errOut.String())
	}
	msg := strings.TrimSpace(errOut.String())
	m := regexp.MustCompile(`^postbox: interrupted: replayed (\d+) events \(.*\), each batch whole; to replay the rest, run the same command again with --after (\S+) --until (\S+) --name (replay-\S+)$`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("interrupted replay said %q", msg)
	}
	var done int
	fmt.Sscan(m[1], &done)
	if st := status(t, db); done < 1 || done >= n || st["pending"] != float64(done) {
		t.Fatalf("interrupted after %d of %d: %v", done, n, st)
	}

	out := runOK(t, append([]string{"replay", "--yes", "--after", m[2], "--until", m[3], "--name", m[4]}, db...)...)
	if !strings.Contains(out, fmt.Sprintf("replayed %d events: read %d,", n-done, n-done)) {
		t.Fatalf("resumed replay printed:\n%s\nwant the %d left", out, n-done)
	}
	if st := status(t, db); st["pending"] != n || st["done"] != 0 {
		t.Fatalf("after the resumed replay: %v, want all %d pending once", st, n)
	}
}

// --archive URL reads the archive too (both, by default): events that
// retention archived and removed are written again; --from archive reads
// it alone, and an archive URL whose scheme no driver has is refused.
func TestReplayCommandFromArchive(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keptDone(t, s.Driver(), 12, "order.created")
	bucket := "file://" + filepath.ToSlash(t.TempDir()) + "?no_tmp_dir=true"
	a, err := archive.Open(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if res, err := s.Driver().Expire(ctx, store.ExpireParams{Before: time.Now().Add(time.Hour), Limit: 8, Keep: a.Keep}); err != nil || res.Events != 8 {
		t.Fatalf("expire: %+v, %v", res, err)
	}

	// $POSTBOX_ARCHIVE (the relay's, left set) is not read: the
	// replay reads the table alone.
	var envOut bytes.Buffer
	envCmd := command(append([]string{"replay", "--dry-run"}, db...)...)
	envCmd.Env, envCmd.Stdout = append(envCmd.Env, "POSTBOX_ARCHIVE="+bucket), &envOut
	if err := envCmd.Run(); err != nil || !strings.Contains(envOut.String(), "  read from  the outbox's table") ||
		strings.Contains(envOut.String(), "archive file:") || !strings.Contains(envOut.String(), "would replay 4 events") {
		t.Fatalf("replay --dry-run with $POSTBOX_ARCHIVE set: %v\n%s\nwant the table alone read (4 events)", err, envOut.String())
	}
	dry := runOK(t, append([]string{"replay", "--archive", bucket, "--from", "archive", "--dry-run"}, db...)...)
	if !strings.Contains(dry, "  read from  archive file:///") || !strings.Contains(dry, "would replay 8 events: read 8 (8 only in the archive, 0 in the table and the archive: sent once)") {
		t.Fatalf("replay --from archive --dry-run printed:\n%s", dry)
	}
	out := runOK(t, append([]string{"replay", "--archive", bucket, "--yes"}, db...)...)
	for _, want := range []string{"  read from  the outbox's table (the delivered events that relays' --retention keeps) and archive file:///",
		"replayed 12 events: read 12 (8 only in the archive, 0 in the table and the archive: sent once), matched 12, requeued 4, inserted 8, skipped 0"} {
		if !strings.Contains(out, want) {
			t.Fatalf("replay --archive lacks %q:\n%s", want, out)
		}
	}
	if st := status(t, db); st["pending"] != 12 || st["done"] != 0 {
		t.Fatalf("after replaying the table and the archive: %v", st)
	}
	last := runFails(t, command(append([]string{"replay", "--archive", "nosuch://bucket?secret=hunter2", "--dry-run"}, db...)...))
	if !strings.Contains(last, "--archive") || strings.Contains(last, "hunter2") {
		t.Fatalf("an archive URL no driver opens: %q", last)
	}
}

// A read-only console replays nothing, so it does not open its --archive:
// one that no driver opens (a variable left set, say) stops nothing, and
// the start line says replay is off.
func TestConsoleReadOnlyOpensNoArchive(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "console.db")
	runOK(t, "migrate", "--db", db)
	logs, _ := startConsole(t, "--db", db, "--addr", "127.0.0.1:0", "--read-only", "--archive", "nosuch://bucket?secret=hunter2")
	if line := logs.String(); !strings.Contains(line, `replay="off (read-only)"`) || strings.Contains(line, "hunter2") {
		t.Fatalf("read-only console with an --archive no driver opens:\n%s", line)
	}
	// Not read-only, the same --archive is refused, without its secret.
	last := runFails(t, command("console", "--db", db, "--addr", "127.0.0.1:0", "--archive", "nosuch://bucket?secret=hunter2"))
	if !strings.Contains(last, "--archive") || strings.Contains(last, "hunter2") {
		t.Fatalf("console with an --archive no driver opens: %q", last)
	}
}
