package relay

import (
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// culpritProbes is how many probes in a row must fail on one event, the
// sink unreachable (sink.Unavailable, no gateway's answer), before the
// relay probes with another event instead: an event that breaks the
// sink's connection itself (a RabbitMQ header over the broker's limits)
// is otherwise probed forever, an outage that never ends while the sink
// would take every other event. Three probes take a few hundred
// milliseconds to a few seconds (see probeFirst), and a sink truly down
// fails the other event's probe too.
const culpritProbes = 3

// culpritsMax bounds the events a relay remembers as culprits.
const culpritsMax = 1024

// culprits are the events found to make the sink unreachable when they
// alone are sent: the probe after culpritProbes failed probes of one was
// another event, and got through. Their failures for the sink being
// unreachable count as rejections (Config.RejectedAttempts), with the
// backoff of any rejection, and start no outage: they end failed, as an
// event the sink refuses does, instead of stopping every delivery at each
// of their attempts. A culprit is forgotten once it is delivered or failed.
type culprits struct {
	n   atomic.Int32 // len(ids), read without the lock on the hot path
	mu  sync.Mutex
	ids map[uuid.UUID]struct{}
}

// add remembers id as a culprit; with culpritsMax remembered, one of them
// is forgotten first (a culprit another relay took, or whose lease
// expired, is never settled here: the newest must not be the one dropped).
func (c *culprits) add(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[uuid.UUID]struct{}{}
	}
	if _, known := c.ids[id]; !known && len(c.ids) >= culpritsMax {
		for old := range c.ids {
			delete(c.ids, old)
			break
		}
	}
	c.ids[id] = struct{}{}
	c.n.Store(int32(len(c.ids)))
}

// has reports whether id is a culprit.
func (c *culprits) has(id uuid.UUID) bool {
	if c.n.Load() == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.ids[id]
	return ok
}

// forget forgets id, delivered or failed.
func (c *culprits) forget(id uuid.UUID) {
	if c.n.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ids, id)
	c.n.Store(int32(len(c.ids)))
}

// probeRun counts the probes in a row that failed on one event, the sink
// unreachable. Only the claim loop uses it.
type probeRun struct {
	id       uuid.UUID
	failures int
}

// ended records the outcome o of a probe of d.
func (p *probeRun) ended(d store.ClaimedEvent, o outcome) {
	switch {
	case !o.unreachable:
		*p = probeRun{}
	case p.id == d.ID:
		p.failures++
	default:
		*p = probeRun{id: d.ID, failures: 1}
	}
}

// stuck reports whether the probes of d failed culpritProbes times in a row.
func (p *probeRun) stuck(d store.ClaimedEvent) bool {
	return p.id == d.ID && p.failures >= culpritProbes
}
