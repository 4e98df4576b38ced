package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/store"
)

// Retention's goal and settings.
const (
	// retentionGoalEvents and retentionGoal: removing 10,000,000
	// delivered events from the partitioned outbox costs under a second.
	retentionGoalEvents = 10_000_000
	retentionGoal       = 1.0 // seconds
	// retentionLimit is ExpireParams.Limit: the relay's batch.
	retentionLimit = 1000
)

// runRetention fills the plain outbox, then a partitioned one, with
// delivered events kept (done, processed an hour ago), and removes them
// all with the store's retention step, Expire, as a relay with
// --retention calls it (ExpireParams.Limit 1000, Before now, no archive)
// until it has nothing left to do: DELETE batches on the plain outbox,
// partition drops on the partitioned one. The measure is the time its
// calls took, on a server with nothing else of the bench running: the
// database's time, and the round trips. The goal is set for 10,000,000
// events: a run of fewer extrapolates linearly, which for partition drops
// (whose cost follows the partitions, not the rows) is an upper bound.
//
// The partitioned outbox has partitions of Config.RetentionPartition; while the
// backlog is written, Expire with a zero Before (no event removed) creates
// the partitions ahead every half interval, as a relay's retention does
// every minute, and the measure starts once the last partition's range
// has ended.
func runRetention(ctx context.Context, e *env, p *progress) error {
	b, ok := e.b.(*pgBackend)
	if !ok {
		return errHistoryNeedsPostgres
	}
	n := e.cfg.RetentionEvents
	took := map[outboxLayout]expired{}
	for _, l := range []outboxLayout{layoutPlain, layoutPartitioned} {
		x, err := retentionRun(ctx, e, p, b, l, n)
		if err != nil {
			return err
		}
		took[l] = x
	}
	scale := float64(retentionGoalEvents) / float64(n)
	plain, part := took[layoutPlain], took[layoutPartitioned]
	r := e.rep
	r.addNoRelay(ScenarioRetention, "retention.plain_seconds",
		fmt.Sprintf("plain outbox: Expire's DELETE batches of %d, %d delivered events (%d calls)", retentionLimit, n, plain.calls),
		plain.d.Seconds(), UnitSeconds, nil)
	r.addNoRelay(ScenarioRetention, "retention.plain_10m",
		fmt.Sprintf("plain outbox: extrapolated to %d events (linear)", retentionGoalEvents),
		plain.d.Seconds()*scale, UnitSeconds, nil)
	r.addNoRelay(ScenarioRetention, "retention.partitioned_seconds",
		fmt.Sprintf("partitioned outbox: Expire's partition drops, %d delivered events in %d partitions of %s (%d calls)", n, part.dropped, e.cfg.RetentionPartition, part.calls),
		part.d.Seconds(), UnitSeconds, nil)
	r.addNoRelay(ScenarioRetention, "retention.partitioned_10m",
		fmt.Sprintf("partitioned outbox: extrapolated to %d events (linear: an upper bound)", retentionGoalEvents),
		part.d.Seconds()*scale, UnitSeconds, atMost(retentionGoal))
	r.addNoRelay(ScenarioRetention, "retention.partitions_dropped", "partitioned outbox: partitions Expire dropped",
		float64(part.dropped), UnitPartitions, nil)
	r.addNoRelay(ScenarioRetention, "retention.ratio", "plain outbox's time / partitioned outbox's",
		plain.d.Seconds()/part.d.Seconds(), UnitRatio, nil)
	// The floor: what freeing the partitions' bytes costs the server and
	// its filesystem, from one DROP TABLE of the plain outbox (whose
	// deletes left its files as they were), scaled to those bytes.
	floor := plain.dropTable.Seconds() * float64(part.bytes) / float64(plain.bytes)
	r.addNoRelay(ScenarioRetention, "retention.partitioned_mib", "partitioned outbox: the size of the partitions dropped",
		float64(part.bytes)/(1<<20), UnitMiB, nil)
	r.addNoRelay(ScenarioRetention, "retention.drop_floor_seconds",
		fmt.Sprintf("floor: one DROP TABLE of the plain outbox after its deletes (%.0f MiB), scaled to the partitions' size", float64(plain.bytes)/(1<<20)),
		floor, UnitSeconds, nil)
	r.addNoRelay(ScenarioRetention, "retention.floor_ratio", "partitioned outbox's time / the floor's: what the drops cost beyond freeing their bytes",
		part.d.Seconds()/floor, UnitRatio, nil)
	return nil
}

// expired is what removing a backlog took.
type expired struct {
	// d is the time of the Expire calls, calls how many there were.
	d     time.Duration
	calls int
	// dropped is how many partitions they dropped.
	dropped int
	// bytes is the size of the outbox's files when the calls began (its
	// partitions', on a partitioned outbox).
	bytes int64
	// dropTable is the time of one DROP TABLE of the outbox after the
	// calls (the plain outbox: its deletes left the files as they were).
	dropTable time.Duration
}

// retentionRun fills a fresh outbox laid out as l with n delivered events
// and removes them with Expire.
func retentionRun(ctx context.Context, e *env, p *progress, b *pgBackend, l outboxLayout, n int) (expired, error) {
	sc, err := b.newLayoutScratch(ctx, "retention_"+l.String(), l, e.cfg.RetentionPartition)
	if err != nil {
		return expired{}, err
	}
	outbox := sc.outbox()
	fill := func(ctx context.Context, from, to int) error {
		_, err := b.workPool.Exec(ctx, sc.sql(pgFillDelivered), from, to)
		return err
	}
	var filled, upkeep time.Time
	// keepUp is what a relay's retention does every minute while the
	// outbox fills: Expire with a zero Before, which removes no event and
	// creates the partitions ahead (every half interval here).
	keepUp := func(ctx context.Context) error {
		if time.Since(upkeep) < e.cfg.RetentionPartition/2 {
			return nil
		}
		if _, err := expireAll(ctx, nil, outbox, store.ExpireParams{Limit: retentionLimit}); err != nil {
			return fmt.Errorf("create the partitions ahead: %w", err)
		}
		upkeep = time.Now()
		return nil
	}
	if l == layoutPartitioned {
		fillDelivered := fill
		fill = func(ctx context.Context, from, to int) error {
			if err := keepUp(ctx); err != nil {
				return err
			}
			err := fillDelivered(ctx, from, to)
			filled = time.Now()
			return err
		}
	}
	if err := fillWith(ctx, p, sc, "delivered events", n, fillChunk, fill); err != nil {
		return expired{}, err
	}
	if l == layoutPartitioned {
		// The last event's partition ends at most an interval after it
		// was written; the upkeep goes on meanwhile, as a relay's would,
		// so that the measured step creates what a relay's step of that
		// moment creates, not the partitions of the whole wait.
		end := filled.Add(e.cfg.RetentionPartition + time.Second)
		p.printf("waiting %s for the last partition's range to end", time.Until(end).Round(100*time.Millisecond))
		for wait := time.Until(end); wait > 0; wait = time.Until(end) {
			if !sleep(ctx, min(wait, e.cfg.RetentionPartition/2)) {
				return expired{}, ctx.Err()
			}
			if err := keepUp(ctx); err != nil {
				return expired{}, err
			}
		}
	}
	var bytes int64
	if err := b.workPool.QueryRow(ctx, pgOutboxBytes, sc.workStore.Table("outbox_events")).Scan(&bytes); err != nil {
		return expired{}, fmt.Errorf("size of %s: %w", l.describe(), err)
	}
	p.printf("removing the %d delivered events of %s (%.0f MiB) with Expire (Limit %d, Before now)", n, l.describe(), float64(bytes)/(1<<20), retentionLimit)
	x, err := expireAll(ctx, p, outbox, store.ExpireParams{Before: time.Now(), Limit: retentionLimit})
	if err != nil {
		return expired{}, err
	}
	x.bytes = bytes
	stats, err := outbox.Stats(ctx)
	if err != nil {
		return expired{}, err
	}
	if left := stats.Done + stats.Pending + stats.Processing + stats.Failed; left != 0 {
		return expired{}, fmt.Errorf("%s: %d events left after Expire (%+v)", l.describe(), left, stats)
	}
	if l == layoutPlain {
		start := time.Now()
		if _, err := b.workPool.Exec(ctx, sc.sql("drop table {outbox}")); err != nil {
			return expired{}, fmt.Errorf("drop %s: %w", l.describe(), err)
		}
		x.dropTable = time.Since(start)
		p.printf("%s: one DROP TABLE of its %.0f MiB in %s", l.describe(), float64(bytes)/(1<<20), x.dropTable.Round(time.Millisecond))
	}
	if err := e.release(ctx, sc); err != nil {
		return expired{}, err
	}
	p.printf("%s: %d delivered events removed in %s of Expire calls (%d calls, %d partitions dropped)",
		l.describe(), n, x.d.Round(time.Millisecond), x.calls, x.dropped)
	return x, nil
}

// expireAll calls Expire with ps until it has no more to do, and sums the
// time the calls took; p, when not nil, shows its progress.
func expireAll(ctx context.Context, p *progress, src store.Source, ps store.ExpireParams) (expired, error) {
	var (
		x       expired
		th      throttle
		removed int
	)
	for {
		if p != nil && th.due() {
			p.printf("  %d events removed, %d partitions dropped, in %d calls (%s)", removed, x.dropped, x.calls, x.d.Round(time.Millisecond))
		}
		start := time.Now()
		res, err := src.Expire(ctx, ps)
		x.d += time.Since(start)
		x.calls++
		if err != nil {
			return x, fmt.Errorf("expire: %w", err)
		}
		x.dropped += len(res.Dropped)
		removed += res.Events
		if !res.More {
			return x, nil
		}
	}
}
