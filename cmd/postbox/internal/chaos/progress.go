package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/postbox-go/postbox/store"
)

// drain waits until no event is pending or in flight, and in endpoints
// mode no delivery either, within DrainTimeout.
func (r *run) drain(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.DrainTimeout)
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := r.store.Stats(callCtx)
		var open int64
		if err == nil {
			var counts []store.DeliveryCounts
			counts, err = r.endpointCounts(callCtx)
			for _, c := range counts {
				open += c.Pending + c.Processing
			}
		}
		cancel()
		if err == nil && st.Pending == 0 && st.Processing == 0 && open == 0 {
			r.say("drained in %v", time.Since(r.begin.Add(r.cfg.Duration)).Round(100*time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("the outbox did not drain within %v: %v", r.cfg.DrainTimeout, err)
			}
			return fmt.Errorf("the outbox did not drain within %v: %d events pending, %d in flight, %d endpoint deliveries pending or in flight",
				r.cfg.DrainTimeout, st.Pending, st.Processing, open)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deliveriesText sums up the endpoints' deliveries for a progress line
// (empty in single-URL mode).
func (r *run) deliveriesText(ctx context.Context) string {
	if !r.endpointsMode() {
		return ""
	}
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	counts, err := r.endpointCounts(callCtx)
	if err != nil {
		return "  deliveries: unreachable"
	}
	var sum store.DeliveryCounts
	for _, c := range counts {
		sum.Pending, sum.Processing, sum.Failed = sum.Pending+c.Pending, sum.Processing+c.Processing, sum.Failed+c.Failed
	}
	return fmt.Sprintf("  deliveries: pending %d  in flight %d  failed %d", sum.Pending, sum.Processing, sum.Failed)
}

// showProgress prints a line every progressEvery until ctx ends.
func (r *run) showProgress(ctx context.Context) {
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		outbox := "outbox: unreachable"
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if pending, processing, failed, err := r.outboxStats(callCtx, 1_000_000); err == nil {
			outbox = fmt.Sprintf("pending %d  in flight %d  failed %d", pending, processing, failed)
		}
		cancel()
		var applied, duplicates int64
		for _, d := range r.destinations {
			applied += d.consumer.processed.Load()
			duplicates += d.consumer.duplicates.Load()
		}
		r.say("produced %d (errors %d)  applied %d  duplicates absorbed %d  %s%s",
			r.produced(), r.produceErrors(), applied, duplicates, outbox, r.deliveriesText(ctx))
	}
}

// say prints a progress line, stamped with the time since the start.
func (r *run) say(format string, args ...any) {
	at := 0.0
	if !r.begin.IsZero() {
		at = time.Since(r.begin).Seconds()
	}
	fmt.Fprintf(r.cfg.Out, "%6.1fs  %s\n", at, fmt.Sprintf(format, args...))
}

// memoryWindow is how long each window of sampleMemory's comparison lasts:
// the window around minute 2 and the last window of production. Sampled
// every memorySampleEvery, a window keeps the most each relay used, so
// that a moment with many deliveries (and their connections) in flight is
// not compared with a quiet one.
const (
	memoryWindow      = time.Minute
	memorySampleEvery = 5 * time.Second
)

// sampleMemoryWindows samples the relays' memory and descriptors every
// memorySampleEvery while production lasts (ctx), and keeps for each relay
// the most it used within the minute around memoryAt and within the last
// minute of production (runs shorter than memoryAt + memoryWindow keep only
// the latter).
func (r *run) sampleMemoryWindows(ctx context.Context, production time.Duration) {
	early := [2]time.Duration{memoryAt - memoryWindow/2, memoryAt + memoryWindow/2}
	late := [2]time.Duration{production - memoryWindow, production}
	tick := time.NewTicker(memorySampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		at := time.Since(r.begin)
		samples := r.sampleMemory()
		r.mu.Lock()
		if at >= early[0] && at <= early[1] && late[0] > early[1] {
			r.memory = mostOf(r.memory, samples)
		}
		if at >= late[0] {
			r.memoryLate = mostOf(r.memoryLate, samples)
		}
		r.mu.Unlock()
	}
}

// mostOf is the most each relay used in kept and in samples; a relay
// restarted in between (another pid) is marked so.
func mostOf(kept, samples []ProcessSample) []ProcessSample {
	if kept == nil {
		return samples
	}
	out := slices.Clone(kept)
	for _, s := range samples {
		i := slices.IndexFunc(out, func(k ProcessSample) bool { return k.Relay == s.Relay })
		if i < 0 {
			out = append(out, s)
			continue
		}
		if out[i].PID != s.PID {
			out[i].Restarted = true
		}
		out[i].RSSKiB, out[i].FDs = max(out[i].RSSKiB, s.RSSKiB), max(out[i].FDs, s.FDs)
	}
	return out
}

func (r *run) sampleMemory() []ProcessSample {
	out := make([]ProcessSample, 0, len(r.relays))
	for _, p := range r.relays {
		if s, err := sampleProcess(p.index, p.pid()); err == nil {
			out = append(out, s)
		}
	}
	return out
}

func samplesText(ss []ProcessSample) string {
	var b []byte
	for i, s := range ss {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "relay %d: %d KiB, %d fds", s.Relay, s.RSSKiB, s.FDs)
		if s.Restarted {
			b = append(b, " (restarted in the window)"...)
		}
	}
	return string(b)
}
