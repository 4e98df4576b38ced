package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/store"
)

// runRelayUntil runs postbox relay with args (and env added to its
// environment) until done reports true, then stops it with SIGTERM and
// checks that it exited cleanly; it returns the relay's log.
func runRelayUntil(t *testing.T, args, env []string, what string, done func() bool) string {
	t.Helper()
	logs := &logbuf.Buffer{}
	cmd := command(append([]string{"relay"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, what, 30*time.Second, done)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("relay: %v after SIGTERM, want a clean exit\n%s", err, logs)
	}
	return logs.String()
}

// readArchive is every event the archive at url holds, in id order.
func readArchive(t *testing.T, url string) []store.HistoryEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := archive.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var out []store.HistoryEvent
	if err := a.Read(ctx, archive.ReadParams{BatchSize: 10}, func(batch []store.HistoryEvent) error {
		out = append(out, batch...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameJSON reports whether a and b are the same JSON value (PostgreSQL's
// jsonb keeps no spaces).
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// postbox relay --archive: delivered events that retention removes are
// written to the archive first. Retention runs at the relay's start, then
// every minute; so a first relay delivers the events and keeps them (its
// --retention of an hour), and a second one, started with a --retention
// they are already older than (its --archive from $POSTBOX_ARCHIVE),
// archives them at its start and removes them from the table. The
// archive then holds each delivered event once, as its producer wrote it;
// the second relay said at start what it would do.
func TestRelayArchivesDeliveredEvents(t *testing.T) {
	s, db := schemaStore(t)
	rcv := receiver.New(t, secret, nil)
	url := "file://" + t.TempDir()
	sink := []string{"--sink", rcv.URL, "--webhook-secret", secret}
	events := enqueueN(t, s, 25)

	runRelayUntil(t, slices.Concat(sink, db, []string{"--retention", "1h", "--archive", url}), nil, "the events delivered and kept",
		func() bool { return status(t, db)["done"] == 25 })
	if len(rcv.Accepted()) != 25 {
		t.Fatalf("the receiver accepted %d events, want 25", len(rcv.Accepted()))
	}
	if got := readArchive(t, url); len(got) != 0 {
		t.Fatalf("the archive holds %d events before their retention ended, want none", len(got))
	}

	log := runRelayUntil(t, slices.Concat(sink, db, []string{"--retention", "1ms"}), []string{"POSTBOX_ARCHIVE=" + url}, "the delivered events archived and removed",
		func() bool { return status(t, db)["done"] == 0 })
	if !strings.Contains(log, "retention 1ms, archive ") || !strings.Contains(log, "archived and deleted") {
		t.Errorf("the relay's start does not say that it archives what retention removes:\n%s", log)
	}
	if strings.Contains(log, "retention failed") {
		t.Errorf("retention failed:\n%s", log)
	}

	got := readArchive(t, url)
	if len(got) != len(events) {
		t.Fatalf("the archive holds %d events, want the %d delivered", len(got), len(events))
	}
	want := slices.Clone(events)
	slices.SortFunc(want, func(a, b postbox.Event) int { return strings.Compare(a.ID.String(), b.ID.String()) })
	for i, e := range got {
		w := want[i]
		if e.ID != w.ID || e.EventType != w.EventType || e.AggregateID != w.AggregateID || !sameJSON(e.Payload, w.Payload) || e.ProcessedAt.IsZero() {
			t.Fatalf("archived event %d: %+v, want %+v, delivered", i, e, w)
		}
	}
	for _, id := range []uuid.UUID{events[0].ID, events[24].ID} {
		if _, err := s.Get(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("archived event %s is still in the table: %v", id, err)
		}
	}
}

// --archive without a positive --retention is refused before anything
// runs (exit status 2, one line naming both flags): delivered events would
// be deleted when delivered (0), or never (negative), and never archived;
// so is $POSTBOX_ARCHIVE.
func TestRelayArchiveNeedsRetention(t *testing.T) {
	url := "file://" + t.TempDir()
	sink := []string{"--sink", "https://example.com/hook", "--webhook-secret", secret, "--db", "sqlite:" + t.TempDir() + "/outbox.db"}
	for _, retention := range []string{"0s", "-1s"} {
		line := usageError(t, slices.Concat([]string{"relay"}, sink, []string{"--archive", url, "--retention", retention})...)
		if !strings.Contains(line, "--archive needs a positive --retention") {
			t.Errorf("--retention %s: %q, want a refusal naming --archive and --retention", retention, line)
		}
	}
	cmd := command(append([]string{"relay"}, sink...)...)
	cmd.Env = append(cmd.Env, "POSTBOX_ARCHIVE="+url)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "--archive needs a positive --retention") {
		t.Fatalf("$POSTBOX_ARCHIVE without --retention: %v, %q; want exit status 2 and the refusal", err, out)
	}
}
