package storetest

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/postbox-go/postbox/store"
)

// runPresence runs the suite of store.Presence.
func runPresence(t *testing.T, newStore func(t *testing.T) store.Presence) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Presence)
	}{
		{"BeatInsertsThenUpdatesKeepingTheStart", testPresenceBeat},
		{"SinkErrorIsCleanedAndCut", testPresenceErrorText},
		{"LeaveDeletesOnlyItsRow", testPresenceLeave},
		{"PruneDeletesOnlyOldHeartbeats", testPresencePrune},
		{"StaleAfterMissedHeartbeats", testPresenceStale},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
}

func relayPresence(id string) store.RelayPresence {
	return store.RelayPresence{ID: id, Host: "host-1", PID: 4242, Mode: "listening",
		Sink: "webhook https://example.com", Version: "v1.2.3", HeartbeatEvery: 5 * time.Second}
}

// presences reads every row, by relay id.
func presences(t *testing.T, s store.Presence) map[string]store.RelayPresence {
	t.Helper()
	all, err := s.RelayPresences(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.RelayPresence{}
	for _, p := range all {
		out[p.ID] = p
	}
	return out
}

func beat(t *testing.T, s store.Presence, p store.RelayPresence) {
	t.Helper()
	if err := s.PresenceBeat(ctxFor(t), p); err != nil {
		t.Fatal(err)
	}
}

func testPresenceBeat(t *testing.T, s store.Presence) {
	before := time.Now()
	beat(t, s, relayPresence("relay-a"))
	first, ok := presences(t, s)["relay-a"]
	if !ok {
		t.Fatal("no row after the first beat")
	}
	want := relayPresence("relay-a")
	if first.Host != want.Host || first.PID != want.PID || first.Mode != want.Mode || first.Sink != want.Sink ||
		first.Version != want.Version || first.HeartbeatEvery != want.HeartbeatEvery {
		t.Fatalf("row %+v, want the fields of %+v", first, want)
	}
	if first.SinkDown() || first.SinkError != "" {
		t.Fatalf("row %+v says the sink is down", first)
	}
	if d := first.StartedAt.Sub(before); d < -time.Minute || d > time.Minute || !first.HeartbeatAt.Equal(first.StartedAt) {
		t.Fatalf("started_at %v, heartbeat_at %v: want both now (%v)", first.StartedAt, first.HeartbeatAt, before)
	}
	if first.HeartbeatAge < 0 || first.HeartbeatAge > time.Minute || first.Stale() {
		t.Fatalf("heartbeat age %v (stale %v) of a row just written", first.HeartbeatAge, first.Stale())
	}

	time.Sleep(20 * time.Millisecond)
	down := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	next := relayPresence("relay-a")
	next.Mode, next.SinkDownSince, next.SinkError = "polling", down, "connection refused"
	next.StartedAt = time.Now().Add(time.Hour) // ignored
	beat(t, s, next)
	beat(t, s, relayPresence("relay-b"))
	rows := presences(t, s)
	got := rows["relay-a"]
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2: %v", len(rows), rows)
	}
	if !got.StartedAt.Equal(first.StartedAt) || !got.HeartbeatAt.After(first.HeartbeatAt) {
		t.Fatalf("second beat: started_at %v (was %v), heartbeat_at %v (was %v): want the start kept, the heartbeat later",
			got.StartedAt, first.StartedAt, got.HeartbeatAt, first.HeartbeatAt)
	}
	if got.Mode != "polling" || !got.SinkDown() || !got.SinkDownSince.Equal(down) || got.SinkError != "connection refused" {
		t.Fatalf("second beat: %+v, want polling, down since %v with its error", got, down)
	}

	up := relayPresence("relay-a")
	up.SinkError = "connection refused" // the last outage's, kept
	beat(t, s, up)
	if got := presences(t, s)["relay-a"]; got.SinkDown() || got.SinkError != "connection refused" {
		t.Fatalf("after the sink came back: %+v, want up with the last error kept", got)
	}
}

func testPresenceErrorText(t *testing.T, s store.Presence) {
	p := relayPresence("relay-a")
	p.SinkDownSince = time.Now()
	p.SinkError = "bad \x00 bytes \xff " + strings.Repeat("é", 1000)
	beat(t, s, p)
	got := presences(t, s)["relay-a"].SinkError
	if len(got) > store.PresenceErrorMax || !utf8.ValidString(got) || strings.ContainsRune(got, 0) ||
		!strings.HasPrefix(got, "bad \uFFFD bytes \uFFFD é") {
		t.Fatalf("stored error %q (%d bytes): want it cleaned and cut to %d bytes", got, len(got), store.PresenceErrorMax)
	}
}

func testPresenceLeave(t *testing.T, s store.Presence) {
	beat(t, s, relayPresence("relay-a"))
	beat(t, s, relayPresence("relay-b"))
	if err := s.PresenceLeave(ctxFor(t), "relay-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.PresenceLeave(ctxFor(t), "relay-unknown"); err != nil {
		t.Fatalf("leaving without a row: %v", err)
	}
	rows := presences(t, s)
	if _, ok := rows["relay-a"]; ok || len(rows) != 1 {
		t.Fatalf("rows after relay-a left: %v, want relay-b alone", rows)
	}
}

func testPresencePrune(t *testing.T, s store.Presence) {
	beat(t, s, relayPresence("relay-old"))
	time.Sleep(time.Second)
	beat(t, s, relayPresence("relay-new"))
	n, err := s.PresencePrune(ctxFor(t), 500*time.Millisecond)
	if err != nil || n != 1 {
		t.Fatalf("prune: %d, %v; want 1 row deleted", n, err)
	}
	rows := presences(t, s)
	if _, ok := rows["relay-new"]; !ok || len(rows) != 1 {
		t.Fatalf("rows after the prune: %v, want relay-new alone", rows)
	}
}

func testPresenceStale(t *testing.T, s store.Presence) {
	fast, slow := relayPresence("relay-fast"), relayPresence("relay-slow")
	fast.HeartbeatEvery, slow.HeartbeatEvery = time.Millisecond, time.Hour
	beat(t, s, fast)
	beat(t, s, slow)
	time.Sleep(50 * time.Millisecond)
	rows := presences(t, s)
	if f := rows["relay-fast"]; !f.Stale() || f.HeartbeatAge < 50*time.Millisecond {
		t.Errorf("relay-fast (every 1ms, age %v) is not stale", f.HeartbeatAge)
	}
	if sl := rows["relay-slow"]; sl.Stale() {
		t.Errorf("relay-slow (every 1h, age %v) is stale", sl.HeartbeatAge)
	}
}
