package relay

import (
	"context"
	"errors"
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
		callCtx, cancel := context.WithTimeout(ctx, min(r.cfg.Lease, storeCallTimeout))
		kept, err := r.cfg.Store.ExtendLease(callCtx, r.cfg.Owner, ids, r.cfg.Lease)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				r.log.Error("lease renewal failed", "events", len(ids), "error", logError(err))
				if obs := r.cfg.Observer; obs != nil {
					obs.LeasesRenewed(len(ids), 0, err)
				}
			}
			continue
		}
		lost := r.inflight.renewed(ids, kept, started, r.cfg.Lease)
		if obs := r.cfg.Observer; obs != nil {
			obs.LeasesRenewed(len(ids), lost, nil)
		}
		if lost > 0 {
			r.counts.lostLeases.Add(int64(lost))
			r.log.Warn("leases lost to another relay (this relay was stalled past their expiry); their events are not sent again by this relay",
				"events", lost)
		}
	}
}

// sendMargin is how much of its lease an event must have left for a
// delivery to start; watchLeases looks at the deliveries under way as often.
func (r *Relay) sendMargin() time.Duration { return r.cfg.Lease / 10 }

// Causes of a delivery cut short by its lease.
var (
	errLeaseLost    = errors.New("relay: another relay took the lease over")
	errLeaseExpired = errors.New("relay: the lease expired before it could be renewed")
)

// watchLeases cuts short the deliveries whose lease expired (renewals
// failed, or the relay was stalled), every sendMargin: a delivery waiting
// for the sink (a free request slot, a slow endpoint) must not be sent once
// another relay may hold the event.
func (r *Relay) watchLeases(ctx context.Context) {
	tick := time.NewTicker(r.sendMargin())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			r.inflight.expire(now)
		}
	}
}

// reclaimExpired returns the events of crashed relays to the queue, at start
// and twice per lease period.
func (r *Relay) reclaimExpired(ctx context.Context) {
	every := min(max(r.cfg.Lease/2, 100*time.Millisecond), 30*time.Second)
	for {
		callCtx, cancel := context.WithTimeout(ctx, leasedCallTimeout(r.cfg.Lease))
		reclaimed, err := r.cfg.Store.ReclaimExpired(callCtx, store.ReclaimParams{MaxAttempts: r.cfg.MaxAttempts})
		cancel()
		if err != nil && ctx.Err() == nil {
			r.log.Error("reclaiming expired leases failed", "error", logError(err))
		}
		for _, x := range reclaimed {
			r.counts.reclaimed.Add(int64(x.Events))
			if obs := r.cfg.Observer; obs != nil {
				obs.Reclaimed(x.Events)
			}
			r.log.Warn("reclaimed the events of a relay whose lease expired", "expired_relay", logText(x.Owner), "events", x.Events)
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
	// open counts, for each claim (store.ClaimedEvent.Lease) of a store that
	// keeps one lease per claim, its events whose outcome is not recorded
	// yet: the settle that records the last ones ends the claim.
	open map[int64]int
	// bytes is the payload bytes of the events held (Config.ClaimBytes).
	bytes int
	freed chan struct{}
}

// lease is what the relay knows of one event it holds.
type lease struct {
	// claimed is when the claim that took the event began.
	claimed  time.Time
	deadline time.Time
	// delivery, once the delivery started, is cut short when the lease
	// is lost or expires.
	delivery cutOf
	// bytes is the event's payload size.
	bytes int
}

func newInflight() *inflight {
	return &inflight{leases: map[uuid.UUID]lease{}, open: map[int64]int{}, freed: make(chan struct{}, 1)}
}

// add records a batch whose claim began at claimed, leased for lease.
func (f *inflight) add(ds []store.ClaimedEvent, claimed time.Time, lease time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range ds {
		l := leaseOf(claimed, lease)
		l.bytes = len(d.Payload)
		f.bytes += l.bytes - f.leases[d.ID].bytes // an event held again replaces its lease
		f.leases[d.ID] = l
		if d.Lease != 0 {
			f.open[d.Lease]++
		}
	}
}

func leaseOf(claimed time.Time, d time.Duration) lease {
	return lease{claimed: claimed, deadline: claimed.Add(d)}
}

// start reports whether the lease of id lasts beyond t, and if so records
// that its delivery starts, to be cut short through delivery if the lease
// is lost or expires. It returns when the claim that holds id began (zero
// when none does), which names the lease when its outcome is recorded.
func (f *inflight) start(id uuid.UUID, t time.Time, delivery cutOf) (claimed time.Time, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, held := f.leases[id]
	if !held || !l.deadline.After(t) {
		return l.claimed, false
	}
	l.delivery = delivery
	f.leases[id] = l
	return l.claimed, true
}

// renewed records a renewal, begun at started, of the asked ids, of which
// the store kept those in kept: it moves their deadline, and ends the lease
// of the others (cutting short their deliveries under way). It reports how
// many were lost before their delivery started. An id claimed again after
// the renewal began is left alone.
func (f *inflight) renewed(asked, kept []uuid.UUID, started time.Time, lease time.Duration) (lost int) {
	keep := make(map[uuid.UUID]bool, len(kept))
	for _, id := range kept {
		keep[id] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range asked {
		l, ok := f.leases[id]
		switch {
		case !ok, !l.claimed.Before(started):
			continue // settled, or claimed again, meanwhile
		case l.deadline.IsZero():
			continue // lost at an earlier renewal, and counted then
		case keep[id]:
			l.deadline = started.Add(lease)
		case l.delivery.c != nil:
			l.deadline = time.Time{}
			l.delivery.cut(errLeaseLost)
		default:
			l.deadline = time.Time{}
			lost++
		}
		f.leases[id] = l
	}
	return lost
}

// expire cuts short the deliveries under way whose lease ended before now.
func (f *inflight) expire(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.leases {
		if l.deadline.Before(now) {
			l.delivery.cut(errLeaseExpired)
		}
	}
}

// heldLease names one lease of the in-flight set: an event, when the claim
// that took it began, and that claim's store.ClaimedEvent.Lease.
type heldLease struct {
	id      uuid.UUID
	claimed time.Time
	claim   int64
}

// ending is the claims that recording the outcomes of held ends: those
// whose every event still open is among held.
func (f *inflight) ending(held []heldLease) []int64 {
	here := map[int64]int{}
	for _, h := range held {
		if h.claim != 0 {
			here[h.claim]++
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var ended []int64
	for claim, n := range here {
		if f.open[claim] <= n {
			ended = append(ended, claim)
		}
	}
	return ended
}

// claimedAt is when the claim that holds id began (zero when none does).
func (f *inflight) claimedAt(id uuid.UUID) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leases[id].claimed
}

// remove ends the leases whose outcome is recorded. A lease of the same
// event claimed again since (a retry that fell due, a release taken again)
// stays.
func (f *inflight) remove(held []heldLease) {
	f.mu.Lock()
	for _, h := range held {
		if l, ok := f.leases[h.id]; ok && l.claimed.Equal(h.claimed) {
			delete(f.leases, h.id)
			f.bytes -= l.bytes
		}
		if h.claim != 0 {
			if f.open[h.claim]--; f.open[h.claim] <= 0 {
				delete(f.open, h.claim)
			}
		}
	}
	f.mu.Unlock()
	select {
	case f.freed <- struct{}{}:
	default:
	}
}

// load is the number of events held, and their payload bytes.
func (f *inflight) load() (events, bytes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.leases), f.bytes
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
