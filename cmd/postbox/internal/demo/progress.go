package demo

import (
	"context"
	"fmt"
	"time"
)

// showProgress prints the live figures until done is closed: one redrawn
// line on a terminal, a line per second otherwise.
func showProgress(ctx context.Context, cfg Config, b *backend, c *counters, done <-chan struct{}) {
	every := time.Second
	if cfg.Live {
		every = 200 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	start := time.Now()
	print := func(final bool) {
		failed := int64(0)
		if st, err := b.outbox.Stats(context.WithoutCancel(ctx)); err == nil {
			failed = st.Failed
		}
		line := fmt.Sprintf("%5.1fs  created %d/%d  delivered %d  retried %d  duplicates absorbed %d  failed %d",
			time.Since(start).Seconds(), c.created.Load(), cfg.Events, c.delivered.Load(), c.retried.Load(),
			c.duplicates.Load(), failed)
		switch {
		case cfg.Live && final:
			fmt.Fprintf(cfg.Out, "\r\033[K%s\n", line)
		case cfg.Live:
			fmt.Fprintf(cfg.Out, "\r\033[K%s", line)
		default:
			fmt.Fprintln(cfg.Out, line)
		}
	}
	for {
		select {
		case <-done:
			print(true)
			return
		case <-tick.C:
			print(false)
		}
	}
}

// Print writes the reconciliation.
func (r Report) Print(out interface{ Write([]byte) (int, error) }) {
	verdict := "OK: every order applied exactly once"
	if !r.OK() {
		verdict = "FAILED: events were lost or applied twice"
	}
	fmt.Fprintf(out, `
reconciliation (from the database)
  orders created          %d
  applied exactly once    %d
  duplicates absorbed     %d
  dead-lettered (failed)  %d
  lost                    %d
  applied twice           %d
%s (%.1fs)
`, r.Created, r.AppliedOnce, r.Duplicates, r.DeadLettered, r.Lost, r.AppliedTwice, verdict, r.Elapsed.Seconds())
}

// say prints a message between progress lines.
func say(cfg Config, msg string) {
	if cfg.Live {
		fmt.Fprintf(cfg.Out, "\r\033[K  %s\n", msg)
		return
	}
	fmt.Fprintf(cfg.Out, "  %s\n", msg)
}
