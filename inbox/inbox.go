package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// ProcessFunc applies one event in the transaction that also writes the
// event's inbox row. It must do all its work through tx: whatever it
// returns an error for is rolled back with the row, so the event can be
// delivered again and processed then. Work outside the database belongs in
// the Claim flow.
type ProcessFunc[TTx any] func(ctx context.Context, tx TTx, ev *Event) error

// Record is the full state of one inbox row, as Get returns it.
type Record = store.InboxRecord

// Inbox applies each incoming event once. It is safe for concurrent use.
type Inbox[TTx any] struct {
	store    Store[TTx]
	observer Observer
}

// New returns an inbox on s, a store's driver, such as a *postgres.Store's:
//
//	ib := inbox.New(pgStore.Driver())
//
// The store's tables must exist (run its migrations first). Options add
// what is optional, such as an Observer for metrics:
//
//	ib := inbox.New(pgStore.Driver(), inbox.WithObserver(metrics.Inbox()))
func New[TTx any](s Store[TTx], opts ...Option) *Inbox[TTx] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return &Inbox[TTx]{store: s, observer: o.observer}
}

// Process applies ev exactly once: it writes the event's inbox row and runs
// fn in one transaction, and commits both or neither.
//
// An event processed before reports Duplicate without running fn: answer it
// as a success. When fn fails, nothing of it or of the row stays (the row is
// only marked failed, for inspection), and its error comes back, wrapped:
// answer it as a temporary failure, so the sender delivers the event again,
// and that delivery is processed. Deliveries of one event at once wait for
// each other; fn commits once.
//
// An ordered event (Seq > 0) whose predecessor has not been applied is
// refused with an *OrderError matching ErrOutOfOrder, and nothing is
// stored: the sender retries it later. An event claimed for external work
// (see Claim) reports ErrInProgress. An invalid event reports
// ErrInvalidEvent.
func (ib *Inbox[TTx]) Process(ctx context.Context, ev *Event, fn ProcessFunc[TTx]) (Outcome, error) {
	if ib.observer == nil {
		return ib.process(ctx, ev, fn, nil)
	}
	var h Handling
	outcome, err := ib.process(ctx, ev, fn, &h)
	h.EventType, h.Outcome = ev.EventType, outcomeOf(outcome, err)
	ib.observer.Handled(h)
	return outcome, err
}

// process is Process; it times the handler into h unless h is nil.
func (ib *Inbox[TTx]) process(ctx context.Context, ev *Event, fn ProcessFunc[TTx], h *Handling) (Outcome, error) {
	if err := validate(ev); err != nil {
		return 0, err
	}
	var handlerErr error
	res, err := ib.store.InboxProcess(ctx, ev, func(ctx context.Context, tx TTx) error {
		if h == nil {
			handlerErr = fn(ctx, tx, ev)
			return handlerErr
		}
		start := time.Now()
		handlerErr = fn(ctx, tx, ev)
		h.HandlerRan, h.HandlerDuration = true, time.Since(start)
		return handlerErr
	})
	switch {
	case err != nil && handlerErr != nil:
		return 0, fmt.Errorf("inbox: event %s: handler: %w", ev.ID, err)
	case err != nil:
		return 0, fmt.Errorf("inbox: event %s: %w", ev.ID, err)
	case res.Status == store.InboxDuplicate:
		return Duplicate, nil
	}
	if err := refusal(ev, res); err != nil {
		return 0, err
	}
	return Processed, nil
}

// refusal returns the error for a store result other than Taken and Done.
func refusal(ev *Event, res store.InboxResult) error {
	switch res.Status {
	case store.InboxTaken:
		return nil
	case store.InboxInProgress:
		return fmt.Errorf("%w: event %s is claimed by another consumer", ErrInProgress, ev.ID)
	case store.InboxOutOfOrder, store.InboxSeqApplied:
		e := &OrderError{Err: ErrOutOfOrder, AggregateType: ev.AggregateType, AggregateID: ev.AggregateID, Seq: ev.Seq, LastApplied: res.LastSeq}
		if res.Status == store.InboxSeqApplied {
			e.Err = ErrSequenceApplied
		}
		return fmt.Errorf("inbox: event %s: %w", ev.ID, e)
	case store.InboxLeaseLost:
		return fmt.Errorf("%w: event %s", ErrLeaseLost, ev.ID)
	}
	return fmt.Errorf("inbox: event %s: store reported %v", ev.ID, res.Status)
}

// Get returns the inbox row of one event, or an error matching
// store.ErrNotFound.
func (ib *Inbox[TTx]) Get(ctx context.Context, id uuid.UUID) (Record, error) {
	r, err := ib.store.InboxGet(ctx, id)
	if err != nil {
		return r, fmt.Errorf("inbox: get %s: %w", id, err)
	}
	return r, nil
}

// DeleteProcessedBefore deletes up to limit done rows processed before the
// given time, oldest first, and reports how many it deleted; call it until
// it reports fewer than limit. Pending and failed rows are kept.
//
// The inbox recognises a duplicate for as long as its row is kept, so keep
// rows longer than the longest time a sender may deliver an event again:
// its whole retry schedule, plus the time an event can wait in a dead-letter
// state before someone retries it by hand. Any duplicate arriving within
// that retention is always caught. An ordered event is not applied again
// even after its row is gone: its aggregate's sequence refuses it
// (ErrSequenceApplied, HTTP 409, where a duplicate would have had 200).
func (ib *Inbox[TTx]) DeleteProcessedBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, errors.New("inbox: delete processed: limit must be positive")
	}
	n, err := ib.store.InboxDeleteProcessedBefore(ctx, before, limit)
	if err != nil {
		return n, fmt.Errorf("inbox: delete processed: %w", err)
	}
	return n, nil
}
