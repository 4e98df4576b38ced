package endpoint

import (
	"errors"
	"testing"
	"time"

	"github.com/postbox-go/postbox/sink"
)

func TestBreakerPausesGrowAndOneProbeGoes(t *testing.T) {
	b := &breaker{threshold: 2, pauseMin: time.Second, pauseMax: 3 * time.Second}
	failed := errors.New("status 500")
	t0 := time.Now()
	if change, _ := b.record(failed, false, t0); change != breakerKept {
		t.Fatal("opened after one failure, threshold 2")
	}
	if change, pause := b.record(failed, false, t0); change != breakerOpened || pause != time.Second {
		t.Fatalf("second failure: change %v, pause %v; want opened for 1s", change, pause)
	}
	if _, refusal := b.admit(t0.Add(500 * time.Millisecond)); !unavailable(refusal) {
		t.Fatalf("while open: %v, want a sink.Unavailable refusal", refusal)
	}
	at := t0.Add(time.Second)
	if probe, refusal := b.admit(at); !probe || refusal != nil {
		t.Fatalf("after the pause: probe %v, refusal %v; want one probe", probe, refusal)
	}
	if _, refusal := b.admit(at); !unavailable(refusal) {
		t.Fatalf("while probing: %v, want a refusal until the probe ends", refusal)
	}
	for i, want := range []time.Duration{2 * time.Second, 3 * time.Second, 3 * time.Second} {
		if change, pause := b.record(failed, true, at); change != breakerReopened || pause != want {
			t.Fatalf("failed probe %d: change %v, pause %v; want reopened for %v", i+1, change, pause, want)
		}
		at = at.Add(want)
		if probe, _ := b.admit(at); !probe {
			t.Fatalf("after pause %d: no probe", i+1)
		}
	}
	if change, _ := b.record(nil, true, at); change != breakerClosed {
		t.Fatal("a successful probe did not close the breaker")
	}
	if probe, refusal := b.admit(at); probe || refusal != nil {
		t.Fatalf("closed: probe %v, refusal %v; want every publish through", probe, refusal)
	}
}

func unavailable(err error) bool {
	kind, _, _ := sink.Classify(err)
	return err != nil && kind == sink.Unavailable
}
