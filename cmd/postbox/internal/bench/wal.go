package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store/postgres"
)

// errNeedsPostgres refuses a WAL-mode scenario on SQLite and MySQL.
var errNeedsPostgres = errors.New("WAL mode needs PostgreSQL (a logical replication slot)")

// walMode makes sc ready for WAL mode (see pgScratch.walMode) and returns
// the stream of a relay in this process.
func walMode(ctx context.Context, sc scratch) (*postgres.WAL, error) {
	pg, ok := sc.(*pgScratch)
	if !ok {
		return nil, errNeedsPostgres
	}
	return pg.walMode(ctx)
}

// waitStreaming waits until a relay streams w's slot: from then on, every
// commit reaches it through the stream.
func waitStreaming(ctx context.Context, p *progress, w *postgres.WAL) error {
	start := time.Now()
	for {
		st, err := w.State(ctx)
		if err != nil {
			return err
		}
		if st.Active {
			p.printf("  streaming %s after %s", w, time.Since(start).Round(time.Millisecond))
			return nil
		}
		if time.Since(start) > slotTimeout {
			return fmt.Errorf("no relay streams %s after %s", w, slotTimeout)
		}
		if !sleep(ctx, 10*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// walFillChunk is how many events each transaction of drain-noop-wal's
// backlog writes: the stream hands the relay whole transactions, and a
// backlog of a few large ones (fillChunk) is not what producers write.
const walFillChunk = 100

// runDrainWAL is drain-noop in WAL mode: the relay library, in process,
// with the PostgreSQL store's WAL stream (as `postbox relay --wal` runs
// it) drains a backlog written after its slot was created, to a no-op
// sink (the backlog written in transactions of walFillChunk events); then
// a fresh backlog (written as drain-noop's) with the raw-SQL DELETE. The slot
// is created by a first run of the relay on the empty outbox, stopped
// before the backlog is written: the stream then brings every event of
// the backlog, as it does to a relay restarted behind its producers.
func runDrainWAL(ctx context.Context, e *env, p *progress) error {
	n := e.cfg.DrainEvents
	sc, err := e.b.newScratch(ctx, "drain_wal")
	if err != nil {
		return err
	}
	stream, err := walMode(ctx, sc)
	if err != nil {
		return err
	}
	sk := &noopSink{}
	cfg := relay.Config{Store: sc.outbox(), Sink: sk, Stream: stream}
	p.printf("creating the slot: the relay library with the WAL stream, on the empty outbox")
	rl, err := startLibraryRelay(ctx, p, cfg)
	if err != nil {
		return err
	}
	err = waitStreaming(ctx, p, stream)
	if cerr := rl.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := fillBacklogBy(ctx, p, sc, n, walFillChunk); err != nil {
		return err
	}
	d, err := libraryDrain(ctx, p, "the relay library, WAL mode", sc.outbox(), cfg, sk.n.Load, n)
	if err != nil {
		return err
	}
	if err := e.release(ctx, sc); err != nil {
		return err
	}
	wal := rate(n, d)
	p.printf("the relay library in WAL mode drained %d events in %s: %.0f events/s", n, d.Round(time.Millisecond), wal)

	raw, err := e.rawDeleteDrain(ctx, p, "drain_wal_raw_delete", n)
	if err != nil {
		return err
	}
	r := e.rep
	r.add(ScenarioDrainWAL, "drain_wal.postbox", "relay library, WAL stream, no-op sink, defaults", wal, UnitEventsPerSec, atLeast(drainGoal))
	r.addNoRelay(ScenarioDrainWAL, "drain_wal.raw_delete", "raw SQL: DELETE 256 per statement", raw, UnitEventsPerSec, nil)
	r.add(ScenarioDrainWAL, "drain_wal.ratio_delete", "postbox WAL mode / raw DELETE", wal/raw, UnitRatio, atLeast(drainRatioGoal))
	return nil
}

// rawDeleteDrain drains a fresh backlog of n events with the raw-SQL
// DELETE, and returns its rate.
func (e *env) rawDeleteDrain(ctx context.Context, p *progress, label string, n int) (float64, error) {
	sc, err := e.filled(ctx, p, label, n)
	if err != nil {
		return 0, err
	}
	d, err := rawDrain(ctx, p, sc, rawDelete, n)
	if err != nil {
		return 0, err
	}
	if err := e.release(ctx, sc); err != nil {
		return 0, err
	}
	p.printf("%v drained %d events in %s: %.0f events/s", rawDelete, n, d.Round(time.Millisecond), rate(n, d))
	return rate(n, d), nil
}
