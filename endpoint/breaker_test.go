package endpoint

import (
	"context"
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

// answering is a sink that fails every publish with err.
type answering struct{ err error }

func (a answering) Publish(context.Context, *sink.Message) error { return a.err }
func (answering) String() string                                 { return "answering" }
func (answering) Destination() sink.Destination                  { return sink.Destination{} }

// TestBreakerLetsEventFailuresThrough: errors about the event (a 4xx, a
// 410, a refusal of the SSRF guard) never open the breaker nor come back
// as sink.Unavailable: the relay must fail or reject the event, not probe
// an outage for days.
func TestBreakerLetsEventFailuresThrough(t *testing.T) {
	for _, err := range []error{
		&sink.Error{Kind: sink.Rejected, StatusCode: 400, Err: errors.New("bad request")},
		&sink.Error{Kind: sink.Permanent, StatusCode: 410, Err: errors.New("gone")},
		&sink.Error{Kind: sink.Permanent, Err: errors.New("the SSRF guard refused to connect")},
	} {
		s := &breakerSink{next: answering{err}, b: &breaker{threshold: 2, pauseMin: time.Minute, pauseMax: time.Minute},
			opened: func(time.Duration, error) { t.Errorf("%v opened the breaker", err) }, closed: func() {}}
		for range 5 {
			got := s.Publish(context.Background(), &sink.Message{})
			if kind, _, _ := sink.Classify(got); kind == sink.Unavailable {
				t.Fatalf("%v came back as %v: an outage", err, got)
			}
		}
	}
}
