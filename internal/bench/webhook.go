package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink/webhook"
)

// Goals of the webhook scenario.
const (
	webhookGoal = 10_000 // events/s
	// webhookRatioGoal is the relay's drain as a share of the raw
	// signed-HTTP limit.
	webhookRatioGoal = 0.7
)

// runWebhook drains a backlog with a relay of the relay package in this
// process, with default settings, as signed webhooks (the webhook sink with
// its defaults, Standard Webhooks, a whsec_ secret) to a local receiver
// that answers 200 with no body (after Config.ReceiverLatency), and its
// limit, just before and just after: a bare net/http client posting as many
// requests, signed with the same secret, with the same headers and bodies,
// to the same receiver at the sink's default concurrency, with no database
// (see signedHTTP).
func runWebhook(ctx context.Context, e *env, p *progress) error {
	n := e.cfg.WebhookEvents
	rec, err := startReceiver(e.cfg.ReceiverLatency)
	if err != nil {
		return err
	}
	defer rec.close()
	secret := newSecret()
	sk, err := webhook.New(webhook.Config{URL: rec.url, Secrets: []string{secret}})
	if err != nil {
		return err
	}
	sc, err := e.filled(ctx, p, "webhook", n)
	if err != nil {
		return err
	}
	// The limit runs just before the drain and again just after it, and
	// the ratio takes their mean, so that a change in the machine's load
	// falls on both sides alike.
	limitRun := func(when string) (float64, error) {
		p.printf("the signed-HTTP limit, %s the drain: %d signed requests from a bare net/http client, %d at once, no database", when, n, webhook.MaxConcurrencyDefault)
		limit, err := signedHTTP(ctx, rec.url, secret, n, webhook.MaxConcurrencyDefault)
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
	server := e.relayServerCPU(ctx)
	// The receiver counts the limit's requests too: the drain's are those
	// beyond.
	sent := rec.distinct()
	published := func() int64 { return rec.distinct() - sent }
	d, err := libraryDrain(ctx, p, "webhooks", relay.Config{Store: sc.outbox(), Sink: sk}, published, n)
	if err != nil {
		return err
	}
	self2 := selfCPU()
	drainServer := server()
	if err := e.release(ctx, sc); err != nil {
		return err
	}
	v := rate(n, d)
	p.printf("delivered %d signed webhooks in %s: %.0f events/s", n, d.Round(time.Millisecond), v)
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
	e.rep.addNoRelay(ScenarioWebhook, "webhook.signed_http", fmt.Sprintf("signed-HTTP limit: bare net/http client, same requests, %d at once, no database (mean of a run before and after the drain)", webhook.MaxConcurrencyDefault), limit, UnitEventsPerSec, nil)
	e.rep.add(ScenarioWebhook, "webhook.ratio_signed_http", "relay / signed-HTTP limit", v/limit, UnitRatio, atLeast(webhookRatioGoal))
	// What each costs, which a noisy machine blurs less than rates: the
	// bench process holds the relay and the receiver in the drain, the
	// client and the receiver in the limit.
	perEvent := func(d time.Duration, count int) float64 {
		return float64(d) / float64(time.Microsecond) / float64(count)
	}
	if self1 > self0 && self3 > self2 {
		e.rep.add(ScenarioWebhook, "webhook.cpu_drain", "CPU per event, bench process (relay, sink, receiver)", perEvent(self2-self1, n), UnitMicros, nil)
		if drainServer > 0 {
			e.rep.add(ScenarioWebhook, "webhook.server_cpu_drain", "CPU per event, the relay's server processes", perEvent(drainServer, n), UnitMicros, nil)
		}
		e.rep.addNoRelay(ScenarioWebhook, "webhook.cpu_signed_http", "CPU per request, bench process (client, receiver), signed-HTTP limit", perEvent(self1-self0+self3-self2, 2*n), UnitMicros, nil)
	}
	return nil
}
