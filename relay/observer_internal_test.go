package relay

import (
	"testing"
	"time"
)

// countingObserver counts attempts, and keeps nothing of them.
type countingObserver struct{ attempts int }

func (o *countingObserver) Claimed(int, time.Duration, error) {}
func (o *countingObserver) Attempted(Attempt)                 { o.attempts++ }
func (o *countingObserver) LeasesRenewed(int, int, error)     {}
func (o *countingObserver) Reclaimed(int)                     {}
func (o *countingObserver) SinkState(bool)                    {}
func (o *countingObserver) SinkProbed()                       {}

// Reporting an attempt to an observer allocates nothing: the Attempt goes
// by value.
func TestObserveAttemptDoesNotAllocate(t *testing.T) {
	obs := &countingObserver{}
	o := outcome{action: actionRetry, sent: true, took: time.Millisecond, statusCode: 503}
	o.delivery.EventType = "order.created"
	if n := testing.AllocsPerRun(1000, func() { observeAttempt(obs, &o) }); n != 0 {
		t.Fatalf("observeAttempt allocates %v times per call, want 0", n)
	}
	if obs.attempts == 0 {
		t.Fatal("the observer was not called")
	}
}
