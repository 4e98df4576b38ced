package endpoint

import (
	"sync"
	"time"
)

// breaker is one endpoint's circuit breaker. Closed, every delivery goes;
// after threshold consecutive failures it opens: nothing goes for a pause.
// Then it lets one probe through (half-open): success closes it, failure
// opens it again for twice the pause, up to pauseMax.
type breaker struct {
	threshold          int
	pauseMin, pauseMax time.Duration

	mu        sync.Mutex
	failures  int
	opens     int
	open      bool
	openUntil time.Time
	probing   bool
}

// allow says whether deliveries may start at now: limit is how many (1
// for a probe), or wait how long until asking again.
func (b *breaker) allow(now time.Time, free int) (limit int, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.open:
		return free, 0
	case now.Before(b.openUntil):
		return 0, b.openUntil.Sub(now)
	case b.probing:
		return 0, b.pauseMin / 10
	}
	b.probing = true
	return 1, 0
}

// abandon ends a probe that found nothing to deliver.
func (b *breaker) abandon() {
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// record notes an attempt's result and reports whether it opened or
// closed the breaker, and the pause when it opened.
func (b *breaker) record(ok bool, now time.Time) (opened, closed bool, pause time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		closed = b.open
		b.failures, b.opens, b.open, b.probing = 0, 0, false, false
		return false, closed, 0
	}
	b.failures++
	probeFailed := b.open && b.probing
	if b.open && !probeFailed || !b.open && b.failures < b.threshold {
		return false, false, 0
	}
	b.opens++
	pause = b.pauseMin << min(b.opens-1, 30)
	if pause > b.pauseMax || pause <= 0 {
		pause = b.pauseMax
	}
	b.open, b.probing, b.openUntil = true, false, now.Add(pause)
	return true, false, pause
}
