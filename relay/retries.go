package relay

import (
	"container/heap"
	"sync"
	"time"
)

// retryTimes holds when the retries this relay scheduled fall due, so that
// the claim loop wakes for each of them, not only for the earliest, rather
// than wait for the poll.
type retryTimes struct {
	mu  sync.Mutex
	due dueHeap
}

// add records a retry due at t and reports whether it is now the earliest.
func (q *retryTimes) add(t time.Time) (earliest bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	at := t.UnixNano()
	earliest = len(q.due) == 0 || at < q.due[0]
	heap.Push(&q.due, at)
	return earliest
}

// next returns how long until the earliest retry not yet due at now falls
// due, 0 if one fell due since the last call (it is then forgotten: the
// claim that follows takes it), and false when none is scheduled.
func (q *retryTimes) next(now time.Time) (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	fell := false
	for len(q.due) > 0 && q.due[0] <= now.UnixNano() {
		heap.Pop(&q.due)
		fell = true
	}
	switch {
	case fell:
		return 0, true
	case len(q.due) == 0:
		return 0, false
	}
	return time.Duration(q.due[0] - now.UnixNano()), true
}

// dueHeap is a min-heap of unix nanoseconds (container/heap).
type dueHeap []int64

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// scheduleRetry records that an event falls due again at t, and wakes the
// claim loop to shorten its sleep when t is the earliest.
func (r *Relay) scheduleRetry(t time.Time) {
	if r.retries.add(t) {
		r.notify()
	}
}
