package bench

import (
	"context"
	"time"
)

// Goals of drain-noop.
const (
	drainGoal      = 50_000 // events/s
	drainRatioGoal = 0.55   // of the raw-SQL DELETE drain
)

// runDrain drains a backlog to a no-op sink with a relay of the relay
// package in this process, with default settings (`postbox relay` has no
// no-op sink), then identical fresh backlogs with raw SQL, one statement
// per batch: DELETE, and UPDATE to done.
func runDrain(ctx context.Context, e *env, p *progress) error {
	n := e.cfg.DrainEvents
	sc, err := e.filled(ctx, p, "drain", n)
	if err != nil {
		return err
	}
	sk := &noopSink{}
	d, err := libraryDrain(ctx, p, "relay library", sc.outbox(), sk, sk.n.Load, n)
	if err != nil {
		return err
	}
	if err := e.release(ctx, sc); err != nil {
		return err
	}
	postbox := rate(n, d)
	p.printf("the relay library drained %d events in %s: %.0f events/s", n, d.Round(time.Millisecond), postbox)

	raw := map[rawQuery]float64{}
	for _, q := range []rawQuery{rawDelete, rawUpdate} {
		label := map[rawQuery]string{rawDelete: "raw_delete", rawUpdate: "raw_update"}[q]
		sc, err := e.filled(ctx, p, label, n)
		if err != nil {
			return err
		}
		d, err := rawDrain(ctx, p, sc, q, n)
		if err != nil {
			return err
		}
		if err := e.release(ctx, sc); err != nil {
			return err
		}
		raw[q] = rate(n, d)
		p.printf("%v drained %d events in %s: %.0f events/s", q, n, d.Round(time.Millisecond), raw[q])
	}

	r := e.rep
	r.add(ScenarioDrain, "drain.postbox", "relay library, no-op sink, defaults", postbox, UnitEventsPerSec, atLeast(drainGoal))
	r.addNoRelay(ScenarioDrain, "drain.raw_delete", "raw SQL: DELETE 256 per statement", raw[rawDelete], UnitEventsPerSec, nil)
	r.addNoRelay(ScenarioDrain, "drain.raw_update", "raw SQL: UPDATE 256 to done per statement", raw[rawUpdate], UnitEventsPerSec, nil)
	r.add(ScenarioDrain, "drain.ratio_delete", "postbox / raw DELETE", postbox/raw[rawDelete], UnitRatio, atLeast(drainRatioGoal))
	r.add(ScenarioDrain, "drain.ratio_update", "postbox / raw UPDATE", postbox/raw[rawUpdate], UnitRatio, nil)
	return nil
}
