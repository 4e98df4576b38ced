package chaos

import (
	"context"
	"fmt"
	"time"
)

// drain waits until no event is pending or in flight, within DrainTimeout.
func (r *run) drain(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.DrainTimeout)
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := r.store.Stats(callCtx)
		cancel()
		if err == nil && st.Pending == 0 && st.Processing == 0 {
			r.say("drained in %v", time.Since(r.begin.Add(r.cfg.Duration)).Round(100*time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("the outbox did not drain within %v: %v", r.cfg.DrainTimeout, err)
			}
			return fmt.Errorf("the outbox did not drain within %v: %d events pending, %d in flight", r.cfg.DrainTimeout, st.Pending, st.Processing)
		}
		time.Sleep(200 * time.Millisecond)
	}
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
		if st, err := r.store.StatsUpTo(callCtx, 1_000_000); err == nil {
			outbox = fmt.Sprintf("pending %d  in flight %d  failed %d", st.Pending, st.Processing, st.Failed)
		}
		cancel()
		r.say("produced %d (errors %d)  applied %d  duplicates absorbed %d  %s",
			r.producing.produced.Load(), r.producing.errors.Load(), r.consumer.processed.Load(), r.consumer.duplicates.Load(), outbox)
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

// sampleMemoryAt reads the relays' memory and descriptors at after from
// the start, if the run lasts that long.
func (r *run) sampleMemoryAt(ctx context.Context, after time.Duration) {
	sleepCtx(ctx, time.Until(r.begin.Add(after)))
	if ctx.Err() != nil {
		return
	}
	s := r.sampleMemory()
	r.mu.Lock()
	r.memory = s
	r.mu.Unlock()
	r.say("relays' memory and descriptors at %v: %s", after, samplesText(s))
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
	}
	return string(b)
}
