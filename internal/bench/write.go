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
// with one event (Transact), as a share of those without.
const writeRatioGoal = 0.85

// runWrite runs Config.Clients concurrent clients for Config.Duration each
// time, committing business transactions (one order row): without an event;
// with one event each written by EnqueueTx in the same transaction (a
// round trip of its own); with one event each written by Transact (sent
// with the COMMIT), these without a relay; then with one event each by
// Transact while a relay with default settings drains the outbox to a
// no-op sink. On SQLite, which has no round trips to save, both event runs
// use EnqueueTx.
func runWrite(ctx context.Context, e *env, p *progress) error {
	sc, err := e.b.newScratch(ctx, "write")
	if err != nil {
		return err
	}
	if err := sc.createOrders(ctx); err != nil {
		return fmt.Errorf("create the business table: %w", err)
	}
	clients, d := e.cfg.Clients, e.cfg.Duration
	transact := "Transact, event sent with the COMMIT"
	if e.b.kind() != "postgres" {
		transact = "EnqueueTx: SQLite has no Transact"
	}
	warm := min(d/4, time.Second)
	p.printf("warming up for %s", warm)
	if _, err := writeRun(ctx, sc, clients, warm, orderPlain); err != nil {
		return err
	}
	p.printf("%d clients for %s: business transactions without an event", clients, d)
	without, err := writeRun(ctx, sc, clients, d, orderPlain)
	if err != nil {
		return err
	}
	p.printf("  %.0f tx/s", without)
	p.printf("%d clients for %s: business transactions with one event each (EnqueueTx), no relay", clients, d)
	withEnqueueTx, err := writeRun(ctx, sc, clients, d, orderEnqueueTx)
	if err != nil {
		return err
	}
	p.printf("  %.0f tx/s", withEnqueueTx)
	p.printf("%d clients for %s: business transactions with one event each (%s), no relay", clients, d, transact)
	with, err := writeRun(ctx, sc, clients, d, orderTransact)
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
	p.printf("%d clients for %s: business transactions with one event each (%s), relay draining", clients, d, transact)
	withRelay, err := writeRun(ctx, sc, clients, d, orderTransact)
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
	r.add(ScenarioWrite, "write.tx_with_enqueue_tx", "business tx/s, one event each (EnqueueTx, own round trip)", withEnqueueTx, UnitTxPerSec, nil)
	r.add(ScenarioWrite, "write.ratio_enqueue_tx", "with one event (EnqueueTx, own round trip) / without", withEnqueueTx/without, UnitRatio, nil)
	r.add(ScenarioWrite, "write.tx_with", "business tx/s, one event each ("+transact+")", with, UnitTxPerSec, nil)
	r.add(ScenarioWrite, "write.ratio", "with one event ("+transact+") / without", with/without, UnitRatio, atLeast(writeRatioGoal))
	r.add(ScenarioWrite, "write.tx_with_relay", "business tx/s, one event each ("+transact+"), relay draining", withRelay, UnitTxPerSec, nil)
	r.add(ScenarioWrite, "write.ratio_relay", "with one event ("+transact+"), relay draining / without", withRelay/without, UnitRatio, nil)
	return nil
}

// writeRun runs clients goroutines that commit business transactions for
// d, and returns the transactions/s they committed together.
func writeRun(ctx context.Context, sc scratch, clients int, d time.Duration, mode orderMode) (float64, error) {
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
				if err := sc.order(ctx, 100+i%100_000, mode); err != nil {
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
