package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/relay"
)

// Goal of the ordered scenario (issue 34).
const (
	// orderedRatioGoal is the ordered drain's rate as a share of the
	// unordered drain's, by each path.
	orderedRatioGoal = 0.7
	// orderedGoalAggregates is the fewest aggregates the goal is set for:
	// with fewer, the ratios are reported without a goal.
	orderedGoalAggregates = 1_000
)

// runOrdered drains a backlog of Config.OrderedEvents events spread
// round-robin over Config.OrderedAggregates aggregates (pgFill), in
// ordered mode and in the default, unordered one, each on an identical
// fresh backlog in a scratch outbox of its own, by two paths:
//
//   - the relay library in this process to a no-op sink (relay.Config
//     with Ordered, then without; see startLibraryRelay);
//   - a `postbox relay` child process with its defaults, with --ordered
//     and without, delivering signed webhooks to a local receiver that
//     answers at once (see processDrain).
//
// The outboxes of the ordered drains are migrated as `postbox migrate
// --ordered` migrates them (migrateOrdered), before the backlog is
// written; those of the unordered drains as `postbox migrate`. Each path's
// unordered drain runs first. A drain fails unless every event reaches the
// sink once (the no-op sink counts them; the receiver counts distinct
// event ids) and the store has nothing pending, processing or failed after
// it. Each path reports both rates and the ordered one over the unordered
// one.
func runOrdered(ctx context.Context, e *env, p *progress) error {
	n, aggregates := e.cfg.OrderedEvents, e.cfg.OrderedAggregates
	sizes := fmt.Sprintf("%d events over %d aggregates", n, aggregates)
	var goal *Goal
	if aggregates >= orderedGoalAggregates {
		goal = atLeast(orderedRatioGoal)
	}
	mode := func(ordered bool) string {
		if ordered {
			return "ordered"
		}
		return "unordered"
	}
	// filled is a fresh outbox, migrated for the mode, with the backlog.
	filled := func(label string, ordered bool) (scratch, error) {
		sc, err := e.b.newScratch(ctx, label)
		if err != nil {
			return nil, err
		}
		if ordered {
			if err := sc.migrateOrdered(ctx); err != nil {
				return nil, err
			}
		}
		what := fmt.Sprintf("events over %d aggregates", aggregates)
		err = fillWith(ctx, p, sc, what, n, fillChunk, func(ctx context.Context, from, to int) error {
			return sc.fill(ctx, from, to, aggregates)
		})
		if err != nil {
			return nil, err
		}
		return sc, nil
	}

	library := func(ordered bool) (float64, error) {
		sc, err := filled("ordered_library_"+mode(ordered), ordered)
		if err != nil {
			return 0, err
		}
		what := "the relay library, " + mode(ordered)
		sk := &noopSink{}
		d, err := libraryDrain(ctx, p, what, sc.outbox(), relay.Config{Sink: sk, Ordered: ordered}, sk.n.Load, n)
		if err != nil {
			return 0, err
		}
		if got := sk.n.Load(); got != int64(n) {
			return 0, fmt.Errorf("%s published %d messages for %d events: want each once", what, got, n)
		}
		if err := e.release(ctx, sc); err != nil {
			return 0, err
		}
		p.printf("%s drained %s in %s: %.0f events/s", what, sizes, d.Round(time.Millisecond), rate(n, d))
		return rate(n, d), nil
	}
	libUnordered, err := library(false)
	if err != nil {
		return err
	}
	libOrdered, err := library(true)
	if err != nil {
		return err
	}
	r := e.rep
	r.addBy(RelayInProcess, ScenarioOrdered, "ordered.library_unordered", "relay library, no-op sink, defaults (unordered), "+sizes, libUnordered, UnitEventsPerSec, nil)
	r.addBy(RelayInProcess, ScenarioOrdered, "ordered.library_ordered", "relay library, no-op sink, Ordered, "+sizes, libOrdered, UnitEventsPerSec, nil)
	r.addBy(RelayInProcess, ScenarioOrdered, "ordered.library_ratio", "relay library: ordered / unordered, "+sizes, libOrdered/libUnordered, UnitRatio, goal)

	rec, err := startReceiver(0)
	if err != nil {
		return err
	}
	defer rec.close()
	process := func(ordered bool) (float64, error) {
		sc, err := filled("ordered_process_"+mode(ordered), ordered)
		if err != nil {
			return 0, err
		}
		what := "`postbox relay`"
		var extra []string
		if ordered {
			what, extra = "`postbox relay --ordered`", []string{"--ordered"}
		}
		before := rec.distinct()
		d, err := e.processDrain(ctx, p, what, sc, rec, 0, 1, n, extra...)
		if err != nil {
			return 0, err
		}
		if got := rec.distinct() - before; got != int64(n) {
			return 0, fmt.Errorf("%s delivered %d distinct events of %d", what, got, n)
		}
		if err := e.release(ctx, sc); err != nil {
			return 0, err
		}
		v := rate(n, d.elapsed)
		p.printf("%s delivered %s as signed webhooks in %s: %.0f events/s", what, sizes, d.elapsed.Round(time.Millisecond), v)
		return v, nil
	}
	procUnordered, err := process(false)
	if err != nil {
		return err
	}
	procOrdered, err := process(true)
	if err != nil {
		return err
	}
	r.addBy(RelayProcess, ScenarioOrdered, "ordered.process_unordered", "signed webhooks to a local receiver, defaults (unordered), "+sizes, procUnordered, UnitEventsPerSec, nil)
	r.addBy(RelayProcess, ScenarioOrdered, "ordered.process_ordered", "signed webhooks to a local receiver, --ordered, "+sizes, procOrdered, UnitEventsPerSec, nil)
	r.addBy(RelayProcess, ScenarioOrdered, "ordered.process_ratio", "`postbox relay`: --ordered / without, "+sizes, procOrdered/procUnordered, UnitRatio, goal)
	return nil
}
