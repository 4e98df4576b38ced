package chaos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// A partitioned run's outbox and its retention.
const (
	// PartitionInterval is the partitions' interval of a partitioned
	// run's outbox: short, so that partitions end, and are dropped, many
	// times in a run.
	PartitionInterval = 2 * time.Second
	// partitionUpkeepEvery is how often the run calls Expire with a zero
	// Before, as a relay's retention does every minute (relays in the run
	// do too): it creates the partitions ahead (two intervals) and drops
	// the past ones that hold no delivered event. A minute would leave the
	// 2 s partitions' writes to the DEFAULT partition.
	partitionUpkeepEvery = PartitionInterval / 2
	// partitionDropEvery is how often partition-drop calls Expire with
	// Before now: every partition is dropped within that time of its
	// range's end.
	partitionDropEvery = 250 * time.Millisecond
	// partitionLimit is ExpireParams.Limit: the relay's.
	partitionLimit = 1000
	// maxPartitionProblems bounds the Expire errors a report lists.
	maxPartitionProblems = 5
)

// partitioning is the retention of a partitioned run's outbox: its upkeep
// and partition-drop's steps, one at a time.
type partitioning struct {
	step sync.Mutex
	// dropped counts the partitions dropped; moved the unfinished events
	// found in partitions partition-drop was about to drop; gaveUp the
	// steps that gave up (see expire): the next one does their work.
	dropped, moved, gaveUp atomic.Int64

	mu       sync.Mutex
	problems []string
	more     int
}

// problem records an error of a retention step.
func (p *partitioning) problem(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.problems) < maxPartitionProblems {
		p.problems = append(p.problems, "partitions: "+err.Error())
	} else {
		p.more++
	}
}

// report lists the errors of the retention steps.
func (p *partitioning) report() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]string(nil), p.problems...)
	if p.more > 0 {
		out = append(out, fmt.Sprintf("partitions: and %d more errors", p.more))
	}
	return out
}

// partition makes the run's outbox partitioned, as `postbox migrate
// --partitioned --partition-interval 2s` does.
func (r *run) partition(ctx context.Context) error {
	if _, err := r.store.Partition(ctx, postgres.PartitionParams{Interval: PartitionInterval}); err != nil {
		return fmt.Errorf("chaos: partition the outbox: %w", err)
	}
	return nil
}

// partitionUpkeep runs a retention step with a zero Before every
// partitionUpkeepEvery until ctx ends, from the moment the outbox is
// partitioned: a gap in the partitions ahead sends the producers' events to
// the DEFAULT partition, where they keep the store from creating the
// partition of their range until they are delivered.
// The first step runs at once.
func (r *run) partitionUpkeep(ctx context.Context) {
	tick := time.NewTicker(partitionUpkeepEvery)
	defer tick.Stop()
	for {
		if err := r.expire(ctx, time.Time{}); err != nil && ctx.Err() == nil {
			r.parts.problem(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// expire runs Expire until it has no more to do, with Before before
// (zero: no delivered event removed). It first counts the unfinished
// events in the range partitions the step may drop: those whose range has
// ended (with a Before) or ended an interval ago (without: the store then
// drops those that hold no delivered event), which it moves to the DEFAULT
// partition (a relay may settle a few of them in between). A step that gives up is counted, not an error: waiting for
// its lock (lock_not_available), or losing a race with a relay's own
// retention step, which created (duplicate_table) or dropped
// (undefined_table) the same partition at the same moment.
func (r *run) expire(ctx context.Context, before time.Time) error {
	r.parts.step.Lock()
	defer r.parts.step.Unlock()
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ended := before
	if ended.IsZero() {
		ended = time.Now().Add(-PartitionInterval)
	}
	var n int64
	err := r.store.Pool().QueryRow(callCtx, r.tables.endedUnfinished, partitionBound(ended), r.store.Table("outbox_events_default")).Scan(&n)
	if err != nil {
		return fmt.Errorf("count the events of ended partitions: %w", err)
	}
	r.parts.moved.Add(n)
	for {
		res, err := r.store.Driver().Expire(callCtx, store.ExpireParams{Before: before, Limit: partitionLimit})
		r.parts.dropped.Add(int64(len(res.Dropped)))
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && slices.Contains(gaveUpCodes, pgErr.Code):
			r.parts.gaveUp.Add(1)
			return nil
		case err != nil:
			return err
		case !res.More:
			return nil
		}
	}
}

// gaveUpCodes are the SQLSTATEs of a retention step that gave up:
// lock_not_available, duplicate_table, undefined_table.
var gaveUpCodes = []string{"55P03", "42P07", "42P01"}

// partitionBound is the lowest id of the partition of PartitionInterval
// that t is in: a UUIDv7 of the range's first millisecond, every other bit
// zero (the bound the store gives its partitions).
func partitionBound(t time.Time) uuid.UUID {
	ms := t.UnixMilli()
	ms -= ms % PartitionInterval.Milliseconds()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(ms))
	var id uuid.UUID
	copy(id[:6], b[2:])
	return id
}

// injectPartitionDrop slows the consumer (sinkLatency each way, so that
// events are still being delivered when their partition's range ends) and
// runs a retention step with Before now every partitionDropEvery until the
// end: every partition is dropped moments after its range ends, its
// unfinished events, leased ones included, moved to the DEFAULT partition
// while the relays deliver them. The end reports the first error of a
// step.
func injectPartitionDrop(ctx context.Context, r *run, n int) (func() error, error) {
	if !r.cfg.Partitioned {
		return nil, errors.New("partition-drop needs a partitioned outbox")
	}
	slow, err := sinkFault(latencyOn(sinkLatency))(ctx, r, n)
	if err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		firstErr error
	)
	wg.Go(func() {
		tick := time.NewTicker(partitionDropEvery)
		defer tick.Stop()
		for {
			if err := r.expire(ctx, time.Now()); err != nil && firstErr == nil {
				firstErr = err
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	return func() error {
		close(stop)
		wg.Wait()
		return errors.Join(firstErr, slow())
	}, nil
}
