package endpoint

import (
	"testing"
	"time"
)

func TestBreakerPausesGrowAndOneProbeGoes(t *testing.T) {
	b := &breaker{threshold: 2, pauseMin: time.Second, pauseMax: 3 * time.Second}
	t0 := time.Now()
	if opened, _, _ := b.record(false, t0); opened {
		t.Fatal("opened after one failure, threshold 2")
	}
	if opened, _, pause := b.record(false, t0); !opened || pause != time.Second {
		t.Fatalf("second failure: opened %v, pause %v; want open for 1s", opened, pause)
	}
	if limit, wait := b.allow(t0.Add(500*time.Millisecond), 8); limit != 0 || wait != 500*time.Millisecond {
		t.Fatalf("while open: limit %d, wait %v", limit, wait)
	}
	at := t0.Add(time.Second)
	if limit, _ := b.allow(at, 8); limit != 1 {
		t.Fatalf("after the pause: limit %d, want one probe", limit)
	}
	if limit, wait := b.allow(at, 8); limit != 0 || wait <= 0 {
		t.Fatalf("while probing: limit %d, want none until the probe ends", limit)
	}
	for i, want := range []time.Duration{2 * time.Second, 3 * time.Second, 3 * time.Second} {
		if opened, _, pause := b.record(false, at); !opened || pause != want {
			t.Fatalf("failed probe %d: opened %v, pause %v; want %v", i+1, opened, pause, want)
		}
		at = at.Add(want)
		if limit, _ := b.allow(at, 8); limit != 1 {
			t.Fatalf("after pause %d: limit %d, want a probe", i+1, limit)
		}
	}
	if _, closed, _ := b.record(true, at); !closed {
		t.Fatal("a successful probe did not close the breaker")
	}
	if limit, _ := b.allow(at, 8); limit != 8 {
		t.Fatalf("closed: limit %d, want all free slots", limit)
	}
}
