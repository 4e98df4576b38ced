package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// Stream is a source of the outbox's new events in commit order: the
// PostgreSQL store's WAL (postgres.WAL, a logical replication slot). A relay
// given one (Config.Stream) delivers the events it brings at once, and polls
// the table every PollInterval for the rest: retries, scheduled events, and
// whatever was written while nothing streamed.
type Stream interface {
	// String names the stream for logs ("slot S (publication P)").
	String() string
	// Check returns an error saying what to do when the stream cannot
	// run at all (a server setting, a missing privilege): the relay then
	// refuses to start.
	Check(ctx context.Context) error
	// Follow calls deliver with the ids of new events, in commit order,
	// once their transactions are visible to claims, until ctx ends (it
	// returns nil) or the stream breaks; it must not consider the events
	// of a batch handled before deliver returned nil for it. A stream that only one consumer may follow at a time
	// returns an error while another one does.
	Follow(ctx context.Context, deliver func(ctx context.Context, ids []uuid.UUID) error) error
	// ClaimIDs leases, as Outbox.Claim does, those of ids that are due and
	// not leased, so that the stream and the polling claims never hold
	// one event at once.
	ClaimIDs(ctx context.Context, p store.ClaimParams, ids []uuid.UUID) ([]store.Delivery, error)
}

// streamRetry is how long a relay waits before following the stream again
// after it stopped (another relay streams it: this one is its hot standby).
const streamRetry = 2 * time.Second

// follow delivers the stream's events until ctx ends, following it again
// streamRetry after each stop.
func (r *Relay) follow(ctx context.Context, work chan<- job) {
	standingBy := false
	for ctx.Err() == nil {
		err := r.cfg.Stream.Follow(ctx, func(ctx context.Context, ids []uuid.UUID) error {
			if standingBy {
				standingBy = false
				r.log.Info("streaming again from " + r.cfg.Stream.String())
			}
			return r.deliverStreamed(ctx, work, ids)
		})
		if ctx.Err() != nil {
			return
		}
		if !standingBy {
			standingBy = true
			r.log.Warn(fmt.Sprintf("not streaming; standing by, trying again every %s (polling every %s meanwhile)", streamRetry, r.cfg.PollInterval),
				"stream", r.cfg.Stream.String(), "error", err)
		}
		sleep(ctx, streamRetry)
	}
}

// deliverStreamed claims the events of ids that no one holds and delivers
// them, in commit order within each aggregate: the first event of every
// aggregate at once, then the second ones, and so on. It returns once every
// outcome is recorded in the table, the condition for the stream to
// confirm them.
func (r *Relay) deliverStreamed(ctx context.Context, work chan<- job, ids []uuid.UUID) error {
	batch, err := r.claimStreamed(ctx, ids)
	if err != nil {
		return err
	}
	for _, wave := range commitWaves(batch, ids) {
		settled := make(chan struct{}, len(wave))
		for _, d := range wave {
			work <- job{delivery: d, settled: settled}
		}
		for range wave {
			select {
			case <-settled:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// claimStreamed leases the events of ids that are due and not leased (the
// others were delivered already, are held by another claim, or are
// scheduled later), and records them in flight.
func (r *Relay) claimStreamed(ctx context.Context, ids []uuid.UUID) ([]store.Delivery, error) {
	claimCtx, cancel := context.WithTimeout(ctx, leasedCallTimeout(r.cfg.Lease))
	defer cancel()
	start := time.Now()
	batch, err := r.cfg.Stream.ClaimIDs(claimCtx, store.ClaimParams{Owner: r.cfg.Owner, Limit: len(ids), Lease: r.cfg.Lease}, ids)
	return batch, r.claimed(batch, start, err)
}

// commitWaves splits the claimed events into waves that may each be sent
// at once: the k-th wave holds the k-th event of each aggregate, in the
// order of ids (the commit order).
func commitWaves(claimed []store.Delivery, ids []uuid.UUID) [][]store.Delivery {
	byID := make(map[uuid.UUID]store.Delivery, len(claimed))
	for _, d := range claimed {
		byID[d.ID] = d
	}
	type aggregate struct{ typ, id string }
	seen := map[aggregate]int{}
	var waves [][]store.Delivery
	for _, id := range ids {
		d, ok := byID[id]
		if !ok {
			continue // delivered already, or held by another claim
		}
		delete(byID, id)
		a := aggregate{d.AggregateType, d.AggregateID}
		k := seen[a]
		seen[a] = k + 1
		if k == len(waves) {
			waves = append(waves, nil)
		}
		waves[k] = append(waves[k], d)
	}
	return waves
}
