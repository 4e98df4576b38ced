package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store/postgres"
)

// writeRatioGoal is the goal of write-overhead: business transactions/s
// with one event (Transact), as a share of those without.
const writeRatioGoal = 0.85

// runWrite runs Config.Clients concurrent clients for Config.Duration each
// time (the first three in turns of a second), committing business
// transactions (one order row): without an event;
// with one event each written by EnqueueTx in the same transaction (a
// round trip of its own); with one event each written by Transact (sent
// with the COMMIT), these without a relay; then with one event each by
// Transact while a relay of the relay package, in this process and with
// default settings, drains the outbox to a no-op sink. On SQLite, which has no round trips to save, and on MySQL,
// whose store has no Transact, both event runs use EnqueueTx.
func runWrite(ctx context.Context, e *env, p *progress) error {
	return write(ctx, e, p, false)
}

// runWriteWAL is runWrite in WAL mode: the outbox as `postbox migrate
// --wal` leaves it (producers' commits skip the notify trigger), and the
// relay that drains beside the last run streams the outbox's inserts (the
// relay library with the WAL stream, in process).
func runWriteWAL(ctx context.Context, e *env, p *progress) error {
	return write(ctx, e, p, true)
}

// write is runWrite, in WAL mode when wal is set.
func write(ctx context.Context, e *env, p *progress, wal bool) error {
	scenario, key, label := ScenarioWrite, "write.", "write"
	if wal {
		scenario, key, label = ScenarioWriteWAL, "write_wal.", "write_wal"
	}
	sc, err := e.b.newScratch(ctx, label)
	if err != nil {
		return err
	}
	var stream relay.Stream
	if wal {
		w, err := walMode(ctx, sc)
		if err != nil {
			return err
		}
		stream = w
	}
	if err := sc.createOrders(ctx); err != nil {
		return fmt.Errorf("create the business table: %w", err)
	}
	clients, d := e.cfg.Clients, e.cfg.Duration
	transact := "Transact, event sent with the COMMIT"
	switch e.b.kind() {
	case "sqlite":
		transact = "EnqueueTx: SQLite has no Transact"
	case "mysql":
		transact = "EnqueueTx: the MySQL store has no Transact"
	}
	warm := min(d/4, time.Second)
	p.printf("warming up for %s", warm)
	if _, _, err := writeRun(ctx, sc, clients, warm, orderPlain); err != nil {
		return err
	}
	// The three runs take turns, a second at a time, so that the machine's
	// ups and downs fall on each of them alike.
	p.printf("%d clients for %s each, in turns: business transactions without an event, with one event each (EnqueueTx), with one event each (%s); no relay", clients, d, transact)
	rates, err := writeRounds(ctx, sc, clients, d, []orderMode{orderPlain, orderEnqueueTx, orderTransact})
	if err != nil {
		return err
	}
	without, withEnqueueTx, with := rates[0], rates[1], rates[2]
	p.printf("  %.0f, %.0f and %.0f tx/s", without, withEnqueueTx, with)

	p.printf("starting the relay library (no-op sink) and letting it drain the events written so far")
	sk := &noopSink{}
	rl, err := startLibraryRelay(ctx, p, relay.Config{Store: sc.outbox(), Sink: sk, Stream: stream})
	if err != nil {
		return err
	}
	defer rl.close()
	if w, ok := stream.(*postgres.WAL); ok {
		if err := waitStreaming(ctx, p, w); err != nil {
			return err
		}
	}
	if _, err := waitDrained(ctx, p, "relay", sc.outbox(), sk.n.Load, 0, time.Now()); err != nil {
		return err
	}
	before := sk.n.Load()
	p.printf("%d clients for %s: business transactions with one event each (%s), relay draining", clients, d, transact)
	n, took, err := writeRun(ctx, sc, clients, d, orderTransact)
	if err != nil {
		return err
	}
	withRelay := float64(n) / took.Seconds()
	p.printf("  %.0f tx/s; the relay published %d events meanwhile", withRelay, sk.n.Load()-before)
	if err := rl.close(); err != nil {
		return err
	}
	if err := e.release(ctx, sc); err != nil {
		return err
	}

	c := strconv.Itoa(clients)
	r := e.rep
	r.addNoRelay(scenario, key+"tx_without", "business tx/s, no event ("+c+" clients)", without, UnitTxPerSec, nil)
	r.addNoRelay(scenario, key+"tx_with_enqueue_tx", "business tx/s, one event each (EnqueueTx, own round trip)", withEnqueueTx, UnitTxPerSec, nil)
	r.addNoRelay(scenario, key+"ratio_enqueue_tx", "with one event (EnqueueTx, own round trip) / without", withEnqueueTx/without, UnitRatio, nil)
	r.addNoRelay(scenario, key+"tx_with", "business tx/s, one event each ("+transact+")", with, UnitTxPerSec, nil)
	r.addNoRelay(scenario, key+"ratio", "with one event ("+transact+") / without", with/without, UnitRatio, atLeast(writeRatioGoal))
	r.add(scenario, key+"tx_with_relay", "business tx/s, one event each ("+transact+"), relay draining", withRelay, UnitTxPerSec, nil)
	r.add(scenario, key+"ratio_relay", "with one event ("+transact+"), relay draining / without", withRelay/without, UnitRatio, nil)
	return nil
}

// writeRoundMax is the longest turn of one mode in writeRounds.
const writeRoundMax = time.Second

// writeRounds runs each mode for d in all, in turns of at most
// writeRoundMax, and returns each mode's transactions/s.
func writeRounds(ctx context.Context, sc scratch, clients int, d time.Duration, modes []orderMode) ([]float64, error) {
	rounds := max(1, int((d+writeRoundMax-1)/writeRoundMax))
	turn := d / time.Duration(rounds)
	counts := make([]int64, len(modes))
	spent := make([]time.Duration, len(modes))
	for range rounds {
		for i, m := range modes {
			n, took, err := writeRun(ctx, sc, clients, turn, m)
			if err != nil {
				return nil, err
			}
			counts[i] += n
			spent[i] += took
		}
	}
	rates := make([]float64, len(modes))
	for i := range modes {
		rates[i] = float64(counts[i]) / spent[i].Seconds()
	}
	return rates, nil
}

// writeRun runs clients goroutines that commit business transactions for
// d, and returns how many they committed together and how long it took.
func writeRun(ctx context.Context, sc scratch, clients int, d time.Duration, mode orderMode) (int64, time.Duration, error) {
	var seq atomic.Int64
	n, took, err := loadRun(ctx, &seq, clients, d, func(ctx context.Context, i int64) error {
		return sc.order(ctx, 100+i%100_000, mode)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("business transaction: %w", err)
	}
	return n, took, nil
}
