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

// runScale drains a small and a large backlog with a relay of default
// settings in a child process, and reports both rates, their ratio and the
// child's peak resident memory.
func runScale(ctx context.Context, e *env, p *progress) error {
	sizes := []int{e.cfg.ScaleSmall, e.cfg.ScaleLarge}
	rates := make([]float64, len(sizes))
	steady := make([]float64, len(sizes))
	rss := make([]float64, len(sizes))
	for i, n := range sizes {
		sc, err := e.filled(ctx, p, "scale_"+strconv.Itoa(n), n)
		if err != nil {
			return err
		}
		d, kib, err := e.childDrain(ctx, p, "relay process", sc, sc.child(0), 1, n)
		if err != nil {
			return err
		}
		if err := e.release(ctx, sc); err != nil {
			return err
		}
		rates[i], steady[i], rss[i] = rate(n, d.elapsed), d.steady, mib(kib[0])
		p.printf("a relay process drained %d events in %s: %.0f events/s (%.0f/s from 10%% to 90%% published), peak resident memory %.1f MiB",
			n, d.elapsed.Round(time.Millisecond), rates[i], steady[i], rss[i])
	}
	small, large := strconv.Itoa(sizes[0]), strconv.Itoa(sizes[1])
	r := e.rep
	r.add(ScenarioScale, "scale.small", "drain, backlog "+small+", relay process", rates[0], UnitEventsPerSec, nil)
	r.add(ScenarioScale, "scale.large", "drain, backlog "+large+", relay process", rates[1], UnitEventsPerSec, nil)
	r.add(ScenarioScale, "scale.ratio", "drain rate "+large+" / "+small, rates[1]/rates[0], UnitRatio, atLeast(scaleRatioGoal))
	if steady[0] > 0 && steady[1] > 0 {
		// Without the relay's start, which weighs on a short drain.
		r.add(ScenarioScale, "scale.ratio_steady", "same, 10% to 90% published", steady[1]/steady[0], UnitRatio, nil)
	}
	r.add(ScenarioScale, "scale.rss_small", "relay peak resident memory, backlog "+small, rss[0], UnitMiB, nil)
	r.add(ScenarioScale, "scale.rss_large", "relay peak resident memory, backlog "+large, rss[1], UnitMiB, atMost(scaleRSSGoal))
	return nil
}

// runScaling drains a fresh backlog for every combination of sink
// (Config.ScalingSinks), relay processes (Config.Instances) and relay
// concurrency (Config.Concurrency), the other settings at their defaults.
func runScaling(ctx context.Context, e *env, p *progress) error {
	for _, sk := range e.cfg.ScalingSinks {
		var webhookURL string
		if sk == SinkWebhook {
			rec, err := startReceiver(false, e.cfg.ReceiverLatency)
			if err != nil {
				return err
			}
			defer rec.close()
			webhookURL = rec.url
		}
		for _, inst := range e.cfg.Instances {
			for _, conc := range e.cfg.Concurrency {
				if err := scalingPoint(ctx, e, p, sk, webhookURL, inst, conc); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// scalingPoint drains one backlog with inst relay processes of concurrency
// conc to the sink sk.
func scalingPoint(ctx context.Context, e *env, p *progress, sk, webhookURL string, inst, conc int) error {
	n := e.cfg.ScalingEvents
	sc, err := e.filled(ctx, p, fmt.Sprintf("scaling_%s_%dx%d", sk, inst, conc), n)
	if err != nil {
		return err
	}
	cfg := sc.child(conc)
	cfg.WebhookURL = webhookURL
	what := fmt.Sprintf("%d relay process(es) of concurrency %d, %s sink", inst, conc, sk)
	d, kib, err := e.childDrain(ctx, p, what, sc, cfg, inst, n)
	if err != nil {
		return err
	}
	if err := e.release(ctx, sc); err != nil {
		return err
	}
	v := rate(n, d.elapsed)
	p.printf("%s drained %d events in %s: %.0f events/s, peak resident memory %.1f MiB",
		what, n, d.elapsed.Round(time.Millisecond), v, mib(slices.Max(kib)))
	e.rep.Scaling = append(e.rep.Scaling, ScalingPoint{
		Sink: sk, Instances: inst, Concurrency: conc, EventsPerSec: v, PeakRSSMiB: mib(slices.Max(kib)),
	})
	key := fmt.Sprintf("scaling.%s.relays_%d_concurrency_%d", sk, inst, conc)
	name := fmt.Sprintf("%s sink, %d relay process(es) × concurrency %d", sk, inst, conc)
	e.rep.add(ScenarioScaling, key, name, v, UnitEventsPerSec, nil)
	return nil
}

func mib(kib int64) float64 { return float64(kib) / 1024 }
