package presence_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/relay/presence"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

func openStore(t *testing.T, migrate bool) *sqlite.Driver {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "postbox.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if migrate {
		if _, err := s.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return s.Driver()
}

// state is a relay, relay-1, whose Stats the test sets.
type state struct {
	mu sync.Mutex
	st relay.Stats
}

func (s *state) Owner() string { return "relay-1" }

func (s *state) set(st relay.Stats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st = st
}

func (s *state) Stats() relay.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// run runs h until the returned function is called, which waits for Run
// to return.
func run(t *testing.T, h *presence.Heartbeat, st *state) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx, st)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func rows(t *testing.T, s store.PresenceReader) []store.RelayPresence {
	t.Helper()
	all, err := s.RelayPresences(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The row is written at start, says at once (not at the next beat, an
// hour away) that the sink went down with its error, secrets replaced, and
// that it came back (keeping the error), and is deleted at the stop.
func TestRowFollowsTheRelay(t *testing.T) {
	s := openStore(t, true)
	st := &state{}
	st.set(relay.Stats{Listening: true})
	h, err := presence.New(presence.Config{Store: s, Sink: "webhook https://example.com",
		Version: "v9", Secrets: []string{"hunter2"}, Every: time.Hour, PruneAfter: 24 * time.Hour, Logger: testlog.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, h, st)
	waitFor(t, "the row", func() bool { return len(rows(t, s)) == 1 })
	got := rows(t, s)[0]
	host, _ := os.Hostname()
	if got.ID != "relay-1" || got.Host != host || got.PID != os.Getpid() || got.Mode != presence.ModeListening ||
		got.Sink != "webhook https://example.com" || got.Version != "v9" || got.HeartbeatEvery != time.Hour || got.SinkDown() {
		t.Fatalf("row at start: %+v", got)
	}

	since := time.Now().Add(-time.Second).Truncate(time.Microsecond)
	st.set(relay.Stats{SinkDown: true, SinkDownSince: since, SinkError: "dial tcp: connection refused (password hunter2)"})
	h.SinkState(false)
	waitFor(t, "the row to say the sink is down", func() bool { return rows(t, s)[0].SinkDown() })
	got = rows(t, s)[0]
	if !got.SinkDownSince.Equal(since) || got.SinkError != "dial tcp: connection refused (password …)" || got.Mode != presence.ModePolling {
		t.Fatalf("row while down: %+v", got)
	}

	st.set(relay.Stats{Listening: true})
	h.SinkState(true)
	waitFor(t, "the row to say the sink is back", func() bool { return !rows(t, s)[0].SinkDown() })
	if got := rows(t, s)[0]; got.SinkError != "dial tcp: connection refused (password …)" {
		t.Fatalf("row once back: %+v, want the last error kept", got)
	}

	stop()
	if got := rows(t, s); len(got) != 0 {
		t.Fatalf("rows after the stop: %+v", got)
	}
}

// A crashed relay's row, silent for longer than PruneAfter, is pruned by
// the next heartbeat that starts.
func TestStartPrunesRelaysLongGone(t *testing.T) {
	s := openStore(t, true)
	old := store.RelayPresence{ID: "crashed", HeartbeatEvery: time.Second}
	if err := s.PresenceBeat(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec("update relay_presence set heartbeat_at = ?", time.Now().Add(-25*time.Hour).UnixMicro()); err != nil {
		t.Fatal(err)
	}
	h, err := presence.New(presence.Config{Store: s, Logger: testlog.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	run(t, h, &state{})
	waitFor(t, "the crashed relay's row pruned", func() bool {
		all := rows(t, s)
		return len(all) == 1 && all[0].ID == "relay-1"
	})
}

// Writes that fail (here: the table is missing) are logged once, not at
// every beat, and Run goes on until it is stopped.
func TestFailedWritesAreLoggedOnce(t *testing.T) {
	s := openStore(t, false)
	logs := &logbuf.Buffer{}
	h, err := presence.New(presence.Config{Store: s, Every: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	st := &state{}
	stop := run(t, h, st)
	for range 20 {
		h.SinkState(false) // a write at once, every time
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if n := strings.Count(logs.String(), "cannot "); n != 1 {
		t.Fatalf("%d failures logged, want 1:\n%s", n, logs)
	}
}

// A relay that stops before its row was ever written (it could not start:
// here the store is not migrated, which the relay reports itself) leaves
// nothing to delete, and its heartbeat logs no failure of its own.
func TestRelayThatCannotStartLogsNothing(t *testing.T) {
	s := openStore(t, false)
	logs := &logbuf.Buffer{}
	h, err := presence.New(presence.Config{Store: s, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the relay has stopped already
	h.Run(ctx, &state{})
	if logs.String() != "" {
		t.Fatalf("logged:\n%s", logs)
	}
}

func TestConfigIsValidated(t *testing.T) {
	s := openStore(t, false)
	for name, cfg := range map[string]presence.Config{
		"no store":       {},
		"negative every": {Store: s, Every: -time.Second},
		// A row beating every minute would look prunable to the others
		// between two of its own beats.
		"every past prune": {Store: s, Every: time.Minute},
	} {
		if _, err := presence.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A running relay prunes, every PruneEvery, the rows of relays silent for
// longer than PruneAfter, not only when it starts; a row younger than that
// stays.
func TestRunningRelayPrunesRowsGoneStale(t *testing.T) {
	s := openStore(t, true)
	h, err := presence.New(presence.Config{Store: s, Every: 10 * time.Millisecond, PruneAfter: time.Minute,
		PruneEvery: 20 * time.Millisecond, Logger: testlog.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	run(t, h, &state{})
	waitFor(t, "the relay's row", func() bool { return len(rows(t, s)) == 1 })
	for id, age := range map[string]time.Duration{"crashed": 2 * time.Minute, "stale": 30 * time.Second} {
		if err := s.PresenceBeat(context.Background(), store.RelayPresence{ID: id, HeartbeatEvery: time.Second}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DB().Exec("update relay_presence set heartbeat_at = ? where relay_id = ?", time.Now().Add(-age).UnixMicro(), id); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the crashed relay's row pruned", func() bool { return len(rows(t, s)) == 2 })
	if ids := []string{rows(t, s)[0].ID, rows(t, s)[1].ID}; !slices.Contains(ids, "stale") || !slices.Contains(ids, "relay-1") {
		t.Fatalf("rows %v, want relay-1 and stale", ids)
	}
}

// Leave deletes the row while Run still runs (a process exiting at once on
// a second signal), and no later beat writes it again.
func TestLeaveIsFinal(t *testing.T) {
	s := openStore(t, true)
	h, err := presence.New(presence.Config{Store: s, Every: 5 * time.Millisecond, Logger: testlog.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	run(t, h, &state{})
	waitFor(t, "the relay's row", func() bool { return len(rows(t, s)) == 1 })
	h.Leave(context.Background())
	for range 10 {
		h.SinkState(true) // a write at once
		time.Sleep(10 * time.Millisecond)
		if all := rows(t, s); len(all) != 0 {
			t.Fatalf("rows %+v after Leave", all)
		}
	}
}

// PrunedIn counts down from PruneAfterDefault and PruneEveryDefault past
// the last heartbeat, to zero.
func TestPrunedIn(t *testing.T) {
	for age, want := range map[time.Duration]time.Duration{
		0:           presence.PruneAfterDefault + presence.PruneEveryDefault,
		time.Minute: presence.PruneAfterDefault + presence.PruneEveryDefault - time.Minute,
		time.Hour:   0,
		presence.PruneAfterDefault + presence.PruneEveryDefault: 0,
	} {
		if got := presence.PrunedIn(store.RelayPresence{HeartbeatAge: age}); got != want {
			t.Errorf("PrunedIn(age %s) = %s, want %s", age, got, want)
		}
	}
}
