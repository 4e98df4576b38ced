package relay

import (
	"sync/atomic"
	"time"
)

// pace follows how long a delivery takes (a moving average of the attempts
// sent), so that the relay claims no more events ahead of its publishers
// than they can start well within a lease: a relay whose sink answers in a
// second does not hold 2,000 events that other relays could deliver, nor
// release them all when the sink goes down.
type pace struct {
	// avg is the moving average, in nanoseconds; 0 until an attempt is
	// known.
	avg atomic.Int64
}

// paceShift sets the weight of the newest attempt in the average: 1/16.
const paceShift = 4

// record adds an attempt that took took. Only the settler calls it.
func (p *pace) record(took time.Duration) {
	old := p.avg.Load()
	if old == 0 {
		p.avg.Store(int64(took))
		return
	}
	p.avg.Store(old + (int64(took)-old)>>paceShift)
}

// ahead is how many events may wait for a publisher: batch at most, and no
// more than concurrency publishers starting one after the other at this
// pace get through within half of lease (at least concurrency of them).
func (p *pace) ahead(batch, concurrency int, lease time.Duration) int {
	avg := p.avg.Load()
	if avg <= 0 {
		return batch
	}
	startable := int64(concurrency) * int64(lease/2) / avg
	return int(min(int64(batch), max(int64(concurrency), startable)))
}
