package relay

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// renewLeases extends the lease of every event in flight, three times per
// lease period, so long deliveries are not taken over by another relay. Each
// renewal moves the local deadline of the events it kept; an event it lost
// (another relay reclaimed it) is not sent if it has not been yet.
func (r *Relay) renewLeases(ctx context.Context) {
	tick := time.NewTicker(r.cfg.Lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ids := r.inflight.ids()
		if len(ids) == 0 {
			continue
		}
		started := time.Now()
		kept, err := r.cfg.Store.ExtendLease(ctx, r.cfg.Owner, ids, r.cfg.Lease)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Error("lease renewal failed", "events", len(ids), "error", err)
			}
			continue
		}
		if lost := r.inflight.renewed(ids, kept, started.Add(r.cfg.Lease)); lost > 0 {
			r.counts.lostLeases.Add(int64(lost))
			r.log.Warn("leases lost to another relay (this relay was stalled past their expiry); their events are not sent again by this relay",
				"events", lost)
		}
	}
}

// sendMargin is how much of its lease an event must have left for a
// delivery to start.
func (r *Relay) sendMargin() time.Duration { return r.cfg.Lease / 10 }

// reclaimExpired returns the events of crashed relays to the queue, at start
// and twice per lease period.
func (r *Relay) reclaimExpired(ctx context.Context) {
	every := min(max(r.cfg.Lease/2, 100*time.Millisecond), 30*time.Second)
	for {
		reclaimed, err := r.cfg.Store.ReclaimExpired(ctx, store.ReclaimParams{MaxAttempts: r.cfg.MaxAttempts})
		if err != nil && ctx.Err() == nil {
			r.log.Error("reclaiming expired leases failed", "error", err)
		}
		for _, x := range reclaimed {
			r.counts.reclaimed.Add(int64(x.Events))
			r.log.Warn("reclaimed the events of a relay whose lease expired", "expired_relay", x.Owner, "events", x.Events)
		}
		if len(reclaimed) > 0 {
			r.notify()
		}
		if !sleep(ctx, every) {
			return
		}
	}
}

// inflight tracks the events this relay holds a lease on, with the local
// deadline of each lease: when it was taken or last renewed, plus the lease.
// The deadline is known without asking the database, and errs early: it
// counts from before the statement that set it.
type inflight struct {
	mu     sync.Mutex
	leases map[uuid.UUID]lease
	freed  chan struct{}
}

// lease is what the relay knows of one event it holds.
type lease struct {
	deadline time.Time
	// started: the delivery began (its deadline no longer matters).
	started bool
}

func newInflight() *inflight {
	return &inflight{leases: map[uuid.UUID]lease{}, freed: make(chan struct{}, 1)}
}

// add records a claimed batch, leased until deadline.
func (f *inflight) add(ds []store.Delivery, deadline time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range ds {
		f.leases[d.ID] = lease{deadline: deadline}
	}
}

// start reports whether the lease of id lasts beyond t, and if so records
// that its delivery starts.
func (f *inflight) start(id uuid.UUID, t time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.leases[id]
	if !ok || !l.deadline.After(t) {
		return false
	}
	l.started = true
	f.leases[id] = l
	return true
}

// renewed moves the deadline of the kept ids (a renewal of asked ids) and
// ends that of the others still in flight; it reports how many of those
// were lost before their delivery started.
func (f *inflight) renewed(asked, kept []uuid.UUID, deadline time.Time) (lost int) {
	keep := make(map[uuid.UUID]bool, len(kept))
	for _, id := range kept {
		keep[id] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range asked {
		l, ok := f.leases[id]
		switch {
		case !ok:
			continue // settled meanwhile
		case keep[id]:
			l.deadline = deadline
		default:
			l.deadline = time.Time{}
			if !l.started {
				lost++
			}
		}
		f.leases[id] = l
	}
	return lost
}

func (f *inflight) remove(ids []uuid.UUID) {
	f.mu.Lock()
	for _, id := range ids {
		delete(f.leases, id)
	}
	f.mu.Unlock()
	select {
	case f.freed <- struct{}{}:
	default:
	}
}

func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.leases)
}

func (f *inflight) ids() []uuid.UUID {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]uuid.UUID, 0, len(f.leases))
	for id := range f.leases {
		out = append(out, id)
	}
	return out
}
