package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/relay"
)

// Goals of the webhook scenario.
const (
	webhookGoal = 10_000 // events/s
	// webhookRatioGoal is the relay's drain as a share of the raw
	// signed-HTTP limit.
	webhookRatioGoal = 0.7
)

// runWebhook drains a backlog with a `postbox relay` child process with
// its defaults, delivering signed webhooks (the webhook sink with its
// defaults, Standard Webhooks, a whsec_ secret) to a local receiver that
// answers 200 with no body (after Config.ReceiverLatency), and its limit,
// just before and just after: a bare net/http client posting as many
// requests, signed with a secret of the same form, with the same headers
// and bodies, to the same receiver at the relay's default concurrency, with
// no database (see signedHTTP).
func runWebhook(ctx context.Context, e *env, p *progress) error {
	n := e.cfg.WebhookEvents
	rec, err := startReceiver(e.cfg.ReceiverLatency)
	if err != nil {
		return err
	}
	defer rec.close()
	secret := newSecret()
	sc, err := e.filled(ctx, p, "webhook", n)
	if err != nil {
		return err
	}
	// The limit runs just before the drain and again just after it, and
	// the ratio takes their mean, so that a change in the machine's load
	// falls on both sides alike.
	limitRun := func(when string) (float64, error) {
		p.printf("the signed-HTTP limit, %s the drain: %d signed requests from a bare net/http client, %d at once, no database", when, n, relay.ConcurrencyDefault)
		limit, err := signedHTTP(ctx, rec.url, secret, n, relay.ConcurrencyDefault)
		if err != nil {
			return 0, err
		}
		p.printf("  %.0f requests/s", limit)
		return limit, nil
	}
	self0 := selfCPU()
	before, err := limitRun("before")
	if err != nil {
		return err
	}
	self1 := selfCPU()
	d, err := e.processDrain(ctx, p, "`postbox relay`", sc, rec, 0, 1, n)
	if err != nil {
		return err
	}
	self2 := selfCPU()
	if err := e.release(ctx, sc); err != nil {
		return err
	}
	v := rate(n, d.elapsed)
	p.printf("`postbox relay` delivered %d signed webhooks in %s: %.0f events/s", n, d.elapsed.Round(time.Millisecond), v)
	name, goal := "signed webhooks to a local receiver, defaults", atLeast(webhookGoal)
	if d := e.cfg.ReceiverLatency; d > 0 {
		// The goal is set for a receiver that answers at once.
		name, goal = fmt.Sprintf("signed webhooks, receiver answering after %s, defaults", d), nil
	}
	e.rep.add(ScenarioWebhook, "webhook.events", name, v, UnitEventsPerSec, goal)

	after, err := limitRun("after")
	if err != nil {
		return err
	}
	self3 := selfCPU()
	limit := (before + after) / 2
	e.rep.addNoRelay(ScenarioWebhook, "webhook.signed_http", fmt.Sprintf("signed-HTTP limit: bare net/http client, same requests, %d at once, no database (mean of a run before and after the drain)", relay.ConcurrencyDefault), limit, UnitEventsPerSec, nil)
	e.rep.add(ScenarioWebhook, "webhook.ratio_signed_http", "relay / signed-HTTP limit", v/limit, UnitRatio, atLeast(webhookRatioGoal))
	// What each costs, which a noisy machine blurs less than rates: the
	// relay process in the drain; the bench process holds the receiver
	// in the drain, the client and the receiver in the limit.
	perEvent := func(d time.Duration, count int) float64 {
		return float64(d) / float64(time.Microsecond) / float64(count)
	}
	if d.relayCPU > 0 && self1 > self0 && self3 > self2 {
		e.rep.add(ScenarioWebhook, "webhook.cpu_relay", "CPU per event, `postbox relay` process", perEvent(d.relayCPU, n), UnitMicros, nil)
		e.rep.add(ScenarioWebhook, "webhook.cpu_receiver", "CPU per event, bench process (receiver), drain", perEvent(self2-self1, n), UnitMicros, nil)
		if d.serverCPU > 0 {
			e.rep.add(ScenarioWebhook, "webhook.server_cpu_drain", "CPU per event, the relay's server processes", perEvent(d.serverCPU, n), UnitMicros, nil)
		}
		e.rep.addNoRelay(ScenarioWebhook, "webhook.cpu_signed_http", "CPU per request, bench process (client, receiver), signed-HTTP limit", perEvent(self1-self0+self3-self2, 2*n), UnitMicros, nil)
	}
	return nil
}
