package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Goals of scale.
const (
	scaleRatioGoal = 0.9 // drain rate with the large backlog / the small one
	scaleRSSGoal   = 64  // MiB, the relay's peak resident memory
)

// runScale drains a small and a large backlog with a `postbox relay` child
// process with its defaults, delivering signed webhooks to a local
// receiver that answers at once, and reports both rates, their ratio and
// the process's peak resident memory.
func runScale(ctx context.Context, e *env, p *progress) error {
	rec, err := startReceiver(0)
	if err != nil {
		return err
	}
	defer rec.close()
	sizes := []int{e.cfg.ScaleSmall, e.cfg.ScaleLarge}
	rates := make([]float64, len(sizes))
	steady := make([]float64, len(sizes))
	rss := make([]float64, len(sizes))
	for i, n := range sizes {
		sc, err := e.filled(ctx, p, "scale_"+strconv.Itoa(n), n)
		if err != nil {
			return err
		}
		d, err := e.processDrain(ctx, p, "`postbox relay`", sc, rec, 0, 1, n)
		if err != nil {
			return err
		}
		if err := e.release(ctx, sc); err != nil {
			return err
		}
		rates[i], steady[i], rss[i] = rate(n, d.elapsed), d.steady, mib(d.peakKiB[0])
		p.printf("`postbox relay` delivered %d events in %s: %.0f events/s (%.0f/s from 10%% to 90%% published), peak resident memory %.1f MiB",
			n, d.elapsed.Round(time.Millisecond), rates[i], steady[i], rss[i])
	}
	small, large := strconv.Itoa(sizes[0]), strconv.Itoa(sizes[1])
	r := e.rep
	r.add(ScenarioScale, "scale.small", "drain as signed webhooks, backlog "+small, rates[0], UnitEventsPerSec, nil)
	r.add(ScenarioScale, "scale.large", "drain as signed webhooks, backlog "+large, rates[1], UnitEventsPerSec, nil)
	r.add(ScenarioScale, "scale.ratio", "drain rate "+large+" / "+small, rates[1]/rates[0], UnitRatio, atLeast(scaleRatioGoal))
	if steady[0] > 0 && steady[1] > 0 {
		// Without the relay's start, which weighs on a short drain.
		r.add(ScenarioScale, "scale.ratio_steady", "same, 10% to 90% published", steady[1]/steady[0], UnitRatio, nil)
	}
	r.add(ScenarioScale, "scale.rss_small", "relay peak resident memory, backlog "+small, rss[0], UnitMiB, nil)
	r.add(ScenarioScale, "scale.rss_large", "relay peak resident memory, backlog "+large, rss[1], UnitMiB, atMost(scaleRSSGoal))
	return nil
}

// runScaling drains a fresh backlog for every combination of `postbox
// relay` processes (Config.Instances) and their --concurrency
// (Config.Concurrency), the other flags at their defaults, delivering
// signed webhooks to a local receiver that answers after
// Config.ReceiverLatency.
func runScaling(ctx context.Context, e *env, p *progress) error {
	rec, err := startReceiver(e.cfg.ReceiverLatency)
	if err != nil {
		return err
	}
	defer rec.close()
	for _, inst := range e.cfg.Instances {
		for _, conc := range e.cfg.Concurrency {
			if err := scalingPoint(ctx, e, p, rec, inst, conc); err != nil {
				return err
			}
		}
	}
	return nil
}

// scalingPoint drains one backlog with inst `postbox relay` processes of
// --concurrency conc, delivering to rec.
func scalingPoint(ctx context.Context, e *env, p *progress, rec *receiver, inst, conc int) error {
	n := e.cfg.ScalingEvents
	sc, err := e.filled(ctx, p, fmt.Sprintf("scaling_%dx%d", inst, conc), n)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%d `postbox relay` process(es) of --concurrency %d", inst, conc)
	d, err := e.processDrain(ctx, p, what, sc, rec, conc, inst, n)
	if err != nil {
		return err
	}
	if err := e.release(ctx, sc); err != nil {
		return err
	}
	v := rate(n, d.elapsed)
	p.printf("%s delivered %d events in %s: %.0f events/s, peak resident memory %.1f MiB",
		what, n, d.elapsed.Round(time.Millisecond), v, mib(slices.Max(d.peakKiB)))
	e.rep.Scaling = append(e.rep.Scaling, ScalingPoint{
		Instances: inst, Concurrency: conc, EventsPerSec: v, PeakRSSMiB: mib(slices.Max(d.peakKiB)),
	})
	key := fmt.Sprintf("scaling.webhook.relays_%d_concurrency_%d", inst, conc)
	name := fmt.Sprintf("signed webhooks, %d relay process(es) × --concurrency %d", inst, conc)
	e.rep.add(ScenarioScaling, key, name, v, UnitEventsPerSec, nil)
	return nil
}

func mib(kib int64) float64 { return float64(kib) / 1024 }
