package bench

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postbox-go/postbox/observe"
	"github.com/postbox-go/postbox/relay"
)

// Goals of drain-noop.
const (
	drainGoal        = 50_000 // events/s
	drainRatioGoal   = 0.8    // of the raw-SQL DELETE drain, in both modes
	metricsRatioGoal = 0.95   // metrics on / off
)

// runDrain drains a backlog to a no-op sink with a relay of the relay
// package in this process, with default settings (`postbox relay` has no
// no-op sink), then an identical fresh backlog with the Prometheus
// observer of package observe on (metrics on / off), then identical fresh
// backlogs with raw SQL, one statement per batch: DELETE, and UPDATE to
// done.
func runDrain(ctx context.Context, e *env, p *progress) error {
	n := e.cfg.DrainEvents
	drain := func(label, what string, obs relay.Observer) (float64, error) {
		sc, err := e.filled(ctx, p, label, n)
		if err != nil {
			return 0, err
		}
		sk := &noopSink{}
		d, err := libraryDrain(ctx, p, what, sc.outbox(), relay.Config{Sink: sk, Observer: obs}, sk.n.Load, n)
		if err != nil {
			return 0, err
		}
		if err := e.release(ctx, sc); err != nil {
			return 0, err
		}
		p.printf("%s drained %d events in %s: %.0f events/s", what, n, d.Round(time.Millisecond), rate(n, d))
		return rate(n, d), nil
	}
	postbox, err := drain("drain", "the relay library", nil)
	if err != nil {
		return err
	}
	metrics, err := observe.NewPrometheus(prometheus.NewRegistry(), observe.Options{})
	if err != nil {
		return err
	}
	withMetrics, err := drain("drain_metrics", "the relay library with metrics on", metrics.Relay())
	if err != nil {
		return err
	}

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
	r.add(ScenarioDrain, "drain.postbox_metrics", "relay library, no-op sink, Prometheus observer on", withMetrics, UnitEventsPerSec, nil)
	r.add(ScenarioDrain, "drain.metrics_ratio", "metrics on / off", withMetrics/postbox, UnitRatio, atLeast(metricsRatioGoal))
	r.addNoRelay(ScenarioDrain, "drain.raw_delete", "raw SQL: DELETE 256 per statement", raw[rawDelete], UnitEventsPerSec, nil)
	r.addNoRelay(ScenarioDrain, "drain.raw_update", "raw SQL: UPDATE 256 to done per statement", raw[rawUpdate], UnitEventsPerSec, nil)
	r.add(ScenarioDrain, "drain.ratio_delete", "postbox / raw DELETE", postbox/raw[rawDelete], UnitRatio, atLeast(drainRatioGoal))
	r.add(ScenarioDrain, "drain.ratio_update", "postbox / raw UPDATE", postbox/raw[rawUpdate], UnitRatio, nil)
	return nil
}
