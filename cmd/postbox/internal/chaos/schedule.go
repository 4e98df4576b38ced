package chaos

import (
	"context"
	"time"
)

// schedule injects the faults in turn until ctx ends: the duration is cut
// into slots, going round the kinds as many times as slots of about
// targetSlot allow; each fault lasts half its slot (a pause at least the
// lease and a half), and the rest of the slot is left to recovery (after a
// source-outage, at least OutageBound). A fault that overruns its slot
// delays the next one.
func (r *run) schedule(ctx context.Context) {
	n := len(r.cfg.Faults)
	if n == 0 {
		<-ctx.Done()
		return
	}
	rounds := max(1, int(r.cfg.Duration/(targetSlot*time.Duration(n))))
	slot := r.cfg.Duration / time.Duration(n*rounds)
	for i := 0; i < n*rounds && ctx.Err() == nil; i++ {
		kind := kindNamed(r.cfg.Faults[i%n])
		w := window{kind: kind.name, slotStart: time.Now()}
		if settle := settles[kind.name]; settle != nil {
			w.settled = settle(ctx, r)
			r.say("fault %-17s before it: %s", kind.name, w.settled)
			if ctx.Err() != nil {
				// Production ended while it waited: the fault was not
				// injected, which the report says.
				w.start, w.end, w.slotEnd = time.Now(), time.Now(), time.Now()
				w.err = "not injected: production ended first (" + w.settled + ")"
				r.mu.Lock()
				r.windows = append(r.windows, w)
				r.mu.Unlock()
				break
			}
		}
		active := slot / 2
		if kind.name == FaultPause {
			active = max(active, r.cfg.Lease+r.cfg.Lease/2)
		}
		w.start = time.Now()
		end, err := kind.inject(context.WithoutCancel(ctx), r, i/n)
		if err == nil {
			r.say("fault %-17s %s, for %v", kind.name, kind.about, active.Round(100*time.Millisecond))
			sleepCtx(context.WithoutCancel(ctx), time.Until(w.start.Add(active)))
			err = end()
		}
		w.end = time.Now()
		if err != nil {
			w.err = err.Error()
			r.say("fault %-17s failed: %v", kind.name, err)
		}
		r.mu.Lock()
		r.windows = append(r.windows, w)
		r.mu.Unlock()
		rest := w.slotStart.Add(slot)
		if kind.name == FaultSourceOutage {
			// The outage's check follows the other sources' events
			// produced during it for OutageBound: no other fault
			// begins meanwhile, so that the check measures the outage
			// alone.
			rest = later(rest, w.end.Add(OutageBound))
		}
		sleepCtx(ctx, time.Until(rest))
		r.mu.Lock()
		r.windows[len(r.windows)-1].slotEnd = time.Now()
		r.mu.Unlock()
	}
	<-ctx.Done()
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
