package bench

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progressEvery is how often a long step reports its progress.
const progressEvery = time.Second

// progress prints what a scenario is doing, one line at a time, prefixed
// with the scenario's name.
type progress struct {
	mu       *sync.Mutex
	w        io.Writer
	scenario string
}

func newProgress(w io.Writer) *progress {
	if w == nil {
		w = io.Discard
	}
	return &progress{mu: &sync.Mutex{}, w: w}
}

// in returns the progress of one scenario.
func (p *progress) in(scenario string) *progress {
	return &progress{mu: p.mu, w: p.w, scenario: scenario}
}

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.scenario != "" {
		fmt.Fprintf(p.w, "[%s] ", p.scenario)
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

// throttle says when a periodic progress line is due.
type throttle struct{ next time.Time }

func (t *throttle) due() bool {
	now := time.Now()
	if t.next.IsZero() {
		t.next = now.Add(progressEvery)
		return false
	}
	if now.Before(t.next) {
		return false
	}
	t.next = now.Add(progressEvery)
	return true
}

// Write lets the relay's logger print between progress lines.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Write(b)
}
