package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// writeRatioGoal is the goal of write-overhead: business transactions/s
// with one event, as a share of those without.
const writeRatioGoal = 0.85

// runWrite runs Config.Clients concurrent clients for Config.Duration each
// time, committing business transactions (one order row): without an event,
// then with one event each (EnqueueTx in the same transaction), both
// without a relay; then with one event each while a relay with default
// settings drains the outbox to a no-op sink.
func runWrite(ctx context.Context, e *env, p *progress) error {
	sc, err := e.b.newScratch(ctx, "write")
	if err != nil {
		return err
	}
	if err := sc.createOrders(ctx); err != nil {
		return fmt.Errorf("create the business table: %w", err)
	}
	clients, d := e.cfg.Clients, e.cfg.Duration
	warm := min(d/4, time.Second)
	p.printf("warming up for %s", warm)
	if _, err := writeRun(ctx, sc, clients, warm, false); err != nil {
		return err
	}
	p.printf("%d clients for %s: business transactions without an event", clients, d)
	without, err := writeRun(ctx, sc, clients, d, false)
	if err != nil {
		return err
	}
	p.printf("  %.0f tx/s", without)
	p.printf("%d clients for %s: business transactions with one event each, no relay", clients, d)
	with, err := writeRun(ctx, sc, clients, d, true)
	if err != nil {
		return err
	}
	p.printf("  %.0f tx/s", with)

	p.printf("starting a relay (no-op sink) and letting it drain the events written so far")
	sk := &noopSink{}
	rl, err := startRelay(ctx, p, sc.outbox(), sk)
	if err != nil {
		return err
	}
	defer rl.close()
	if _, err := waitDrained(ctx, p, "relay", sc.outbox(), sk.n.Load, 0, time.Now()); err != nil {
		return err
	}
	before := sk.n.Load()
	p.printf("%d clients for %s: business transactions with one event each, relay draining", clients, d)
	withRelay, err := writeRun(ctx, sc, clients, d, true)
	if err != nil {
		return err
	}
	p.printf("  %.0f tx/s; the relay published %d events meanwhile", withRelay, sk.n.Load()-before)
	if err := rl.close(); err != nil {
		return err
	}
	if err := e.release(ctx, sc); err != nil {
		return err
	}

	c := strconv.Itoa(clients)
	r := e.rep
	r.add(ScenarioWrite, "write.tx_without", "business tx/s, no event ("+c+" clients)", without, UnitTxPerSec, nil)
	r.add(ScenarioWrite, "write.tx_with", "business tx/s, one event each", with, UnitTxPerSec, nil)
	r.add(ScenarioWrite, "write.ratio", "with one event / without", with/without, UnitRatio, atLeast(writeRatioGoal))
	r.add(ScenarioWrite, "write.tx_with_relay", "business tx/s, one event each, relay draining", withRelay, UnitTxPerSec, nil)
	r.add(ScenarioWrite, "write.ratio_relay", "with one event, relay draining / without", withRelay/without, UnitRatio, nil)
	return nil
}

// writeRun runs clients goroutines that commit business transactions for
// d, and returns the transactions/s they committed together.
func writeRun(ctx context.Context, sc scratch, clients int, d time.Duration, withEvent bool) (float64, error) {
	var (
		n        atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		once     sync.Once
	)
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				i := n.Add(1)
				if err := sc.order(ctx, 100+i%100_000, withEvent); err != nil {
					n.Add(-1)
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, fmt.Errorf("business transaction: %w", firstErr)
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}
