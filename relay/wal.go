package relay

import (
	"context"
	"fmt"
	"sync"
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
	// Follow calls start with the ids of new events, in commit order,
	// and the batch's claim, until ctx ends (it returns nil) or the
	// stream breaks. The claim leases, as Outbox.Claim does, those of
	// the batch's events that are due and not leased, once they are
	// visible to claims, so that the stream and the polling claims never
	// hold one event at once. start claims the batch, begins its delivery
	// and returns a function that waits until the outcome of each is
	// recorded; Follow may start the next batches before waiting for the
	// earlier ones, and must not consider a batch handled before its wait
	// and the waits of the batches before it returned nil. A stream that
	// only one consumer may follow at a time returns an error while
	// another one does.
	Follow(ctx context.Context, start func(ctx context.Context, ids []uuid.UUID, claim StreamClaim) (wait func() error)) error
	// Behind reports whether the stream still reads writes older than
	// the newest commits by more than a moment (the claims and settles of
	// a drain, a bulk load elsewhere on the server): new events reach it
	// only after them, so the relay looks for them itself, every
	// Config.StreamBehindPoll, until it is no longer behind.
	Behind(ctx context.Context) (bool, error)
}

// StreamClaim is the claim of a batch of a Stream (see Stream.Follow).
type StreamClaim = func(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error)

// streamWatch is how often the relay asks the stream whether it is behind:
// meanwhile the claim loop looks for new events every
// Config.StreamBehindPoll, so new commits arrive within a few milliseconds,
// as they do through the stream when it keeps up, instead of at the next
// PollInterval.
const streamWatch = 100 * time.Millisecond

// watchStream asks the stream every streamWatch whether it is behind, until
// ctx ends, and wakes the claim loop when it falls behind. An error counts
// as not behind: the stream's own errors are reported by follow.
func (r *Relay) watchStream(ctx context.Context) {
	t := time.NewTicker(streamWatch)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.streamBehind.Store(false)
			return
		case <-t.C:
		}
		askCtx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		behind, err := r.cfg.Stream.Behind(askCtx)
		cancel()
		if err != nil {
			behind = false
		}
		if was := r.streamBehind.Swap(behind); behind != was {
			if behind {
				r.log.Debug(fmt.Sprintf("the stream is behind: looking for new events every %s until it catches up", r.cfg.StreamBehindPoll))
				r.notify()
			} else {
				r.log.Debug("the stream caught up")
			}
		}
	}
}

// streamRetry is how long a relay waits before following the stream again
// after it stopped (another relay streams it: this one is its hot standby).
const streamRetry = 2 * time.Second

// follow delivers the stream's events until ctx ends, following it again
// streamRetry after each stop.
func (r *Relay) follow(ctx context.Context, work chan<- job) {
	standingBy := false
	var order streamOrder
	for ctx.Err() == nil {
		err := r.cfg.Stream.Follow(ctx, func(ctx context.Context, ids []uuid.UUID, claim StreamClaim) func() error {
			if standingBy {
				standingBy = false
				r.log.Info("streaming again from " + r.cfg.Stream.String())
			}
			return r.startStreamed(ctx, work, &order, ids, claim)
		})
		if ctx.Err() != nil {
			return
		}
		if !standingBy {
			standingBy = true
			r.log.Warn(fmt.Sprintf("not streaming; standing by, trying again every %s (polling every %s meanwhile)", streamRetry, r.cfg.PollInterval),
				"stream", r.cfg.Stream.String(), "error", logError(err))
		}
		sleep(ctx, streamRetry)
	}
}

// startStreamed claims the events of ids that no one holds with claim, and
// returns a function that delivers them, in commit order within each
// aggregate (the first event of every aggregate at once, then the second
// ones, and so on, the first ones after the events of their aggregate that
// earlier batches still deliver), and returns once every outcome is
// recorded in the table, the condition for the stream to confirm them. An
// event is sent once the outcomes of those before it in its aggregate are
// known (the sink answered), not once they are recorded: the order of first
// attempts holds, and a hot aggregate does not wait for the settler's
// linger at each event.
func (r *Relay) startStreamed(ctx context.Context, work chan<- job, order *streamOrder, ids []uuid.UUID, claim StreamClaim) func() error {
	batch, err := r.claimStreamed(ctx, ids, claim)
	if err != nil {
		return func() error { return err }
	}
	waves := commitWaves(batch, ids)
	t := order.enter(waves)
	return func() error {
		defer t.end()
		for _, prev := range t.after {
			select {
			case <-prev:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		events := 0
		for _, wave := range waves {
			events += len(wave)
		}
		settled := make(chan struct{}, events)
		for k, wave := range waves {
			decided := make(chan struct{}, len(wave))
			for _, d := range wave {
				work <- job{delivery: d, settled: settled, decided: decided}
			}
			if err := receive(ctx, decided, len(wave)); err != nil {
				return err
			}
			t.decided(k)
		}
		return receive(ctx, settled, events)
	}
}

// receive waits for n values of ch, or for ctx to end.
func receive(ctx context.Context, ch <-chan struct{}, n int) error {
	for range n {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// streamOrder keeps the events of one aggregate that the stream brought in
// commit order across the batches delivered at once: per aggregate, it
// knows the last event started, with a channel closed once its outcome is
// known.
type streamOrder struct {
	mu   sync.Mutex
	last map[aggregateKey]chan struct{}
}

// aggregateKey names an aggregate.
type aggregateKey struct{ typ, id string }

func keyOf(d store.ClaimedEvent) aggregateKey { return aggregateKey{d.AggregateType, d.AggregateID} }

// streamedBatch is a batch entered in a streamOrder.
type streamedBatch struct {
	o     *streamOrder
	waves [][]store.ClaimedEvent
	// after are the events of earlier batches whose outcomes must be
	// known before the first wave is sent.
	after []<-chan struct{}
	// done are the channels of the events of each wave; closed counts
	// the waves whose channels are closed.
	done   [][]chan struct{}
	closed int
}

// enter records the events of waves, a batch about to be delivered, as the
// last of their aggregates, and returns the batch, with the events of
// earlier batches it waits for.
func (o *streamOrder) enter(waves [][]store.ClaimedEvent) *streamedBatch {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil {
		o.last = map[aggregateKey]chan struct{}{}
	}
	t := &streamedBatch{o: o, waves: waves, done: make([][]chan struct{}, len(waves))}
	for k, wave := range waves {
		t.done[k] = make([]chan struct{}, len(wave))
		for i, d := range wave {
			t.done[k][i] = make(chan struct{})
			if d.Invalid != "" {
				continue // of no known aggregate: it neither waits nor holds
			}
			key := keyOf(d)
			if prev, ok := o.last[key]; ok && k == 0 {
				t.after = append(t.after, prev)
			}
			o.last[key] = t.done[k][i]
		}
	}
	return t
}

// decided tells the successors of the events of wave k that their
// outcomes are known.
func (t *streamedBatch) decided(k int) {
	t.o.mu.Lock()
	defer t.o.mu.Unlock()
	for i, d := range t.waves[k] {
		ch := t.done[k][i]
		close(ch)
		if t.o.last[keyOf(d)] == ch {
			delete(t.o.last, keyOf(d))
		}
	}
	t.closed = k + 1
}

// end releases the successors of the events of the waves not decided
// (the batch stopped short): they wait no longer.
func (t *streamedBatch) end() {
	for k := t.closed; k < len(t.waves); k++ {
		t.decided(k)
	}
}

// claimStreamed leases, with the stream's claim, the events of ids that
// are due and not leased (the others were delivered already, are held by
// another claim, or are scheduled later), and records them in flight.
func (r *Relay) claimStreamed(ctx context.Context, ids []uuid.UUID, claim StreamClaim) ([]store.ClaimedEvent, error) {
	claimCtx, cancel := context.WithTimeout(ctx, leasedCallTimeout(r.cfg.Lease))
	defer cancel()
	start := time.Now()
	batch, err := claim(claimCtx, store.ClaimParams{Owner: r.cfg.Owner, Limit: len(ids), Lease: r.cfg.Lease})
	return batch, r.claimed(batch, start, err)
}

// commitWaves splits the claimed events into waves that may each be sent
// at once: the k-th wave holds the k-th event of each aggregate, in the
// order of ids (the commit order). The rows the store could not read,
// whose aggregate is not known, go in the first wave, and fail there.
func commitWaves(claimed []store.ClaimedEvent, ids []uuid.UUID) [][]store.ClaimedEvent {
	byID := make(map[uuid.UUID]store.ClaimedEvent, len(claimed))
	for _, d := range claimed {
		byID[d.ID] = d
	}
	type aggregate struct{ typ, id string }
	seen := map[aggregate]int{}
	var waves [][]store.ClaimedEvent
	for _, id := range ids {
		d, ok := byID[id]
		if !ok {
			continue // delivered already, or held by another claim
		}
		delete(byID, id)
		k := 0
		if d.Invalid == "" {
			a := aggregate{d.AggregateType, d.AggregateID}
			k = seen[a]
			seen[a] = k + 1
		}
		if k == len(waves) {
			waves = append(waves, nil)
		}
		waves[k] = append(waves[k], d)
	}
	return waves
}
