package bench

import (
	"context"
	"fmt"
	"time"
)

// webhookGoal is the goal of the webhook scenario, events/s.
const webhookGoal = 10_000

// runWebhook drains a backlog with a relay of the relay package in this
// process, with default settings, as signed webhooks (the webhook sink with
// its defaults, Standard Webhooks, a whsec_ secret) to a local receiver
// that answers 200 with no body (after Config.ReceiverLatency).
func runWebhook(ctx context.Context, e *env, p *progress) error {
	n := e.cfg.WebhookEvents
	rec, err := startReceiver(e.cfg.ReceiverLatency)
	if err != nil {
		return err
	}
	defer rec.close()
	sk, err := newWebhookSink(rec.url)
	if err != nil {
		return err
	}
	sc, err := e.filled(ctx, p, "webhook", n)
	if err != nil {
		return err
	}
	d, err := libraryDrain(ctx, p, "webhooks", sc.outbox(), sk, nil, rec.distinct, n)
	if err != nil {
		return err
	}
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
	return nil
}
