package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// InboxTxSQL runs a store's inbox statements inside its transaction T.
// Each method runs the statement of the store's inbox.sql of the same name
// and reports what it found; Inbox turns that into a store.InboxResult.
type InboxTxSQL[T any] interface {
	// Take runs inbox_take: it inserts ev's row, or takes a free row over,
	// as status (store.StatusDone; or store.StatusPending, leased to owner
	// for lease), counting the attempt, and returns the attempts. ok is
	// false when it took nothing: the row is done or leased.
	Take(ctx context.Context, tx T, ev *store.InboxEvent, status, owner string, lease time.Duration) (attempts int, ok bool, err error)
	// IsDone runs inbox_status: whether a row Take did not take is done
	// (or else leased).
	IsDone(ctx context.Context, tx T, id uuid.UUID) (bool, error)
	// Advance runs inbox_advance: it moves the aggregate's last applied
	// sequence number from seq-1 to seq (the first event, seq 1, creates
	// it) and reports whether it did. When it did not, last is the last
	// applied number as the statement saw it: a database where writers
	// run at once may have seen seq-1 and then lost the row to a
	// transaction that applied seq while this one waited.
	Advance(ctx context.Context, tx T, aggType, aggID string, seq int64) (advanced bool, last int64, err error)
	// LastSeq runs inbox_last_seq: the aggregate's last applied sequence
	// number, or 0.
	LastSeq(ctx context.Context, tx T, aggType, aggID string) (int64, error)
	// Complete runs inbox_complete: it marks the row done if it is pending
	// and leased to owner, and reports whether it did.
	Complete(ctx context.Context, tx T, id uuid.UUID, owner string) (bool, error)
}

// InboxSQL runs a store's inbox statements that take a transaction of
// their own. errText is cleaned and bounded already.
type InboxSQL interface {
	// Fail runs inbox_fail: it makes the row failed, with errText, if it
	// is pending and leased to owner, and reports whether it did.
	Fail(ctx context.Context, id uuid.UUID, owner, errText string) (bool, error)
	// RecordFailure runs inbox_record_failure: ev's handler run rolled
	// back, its row is written, or made, failed with the attempt counted.
	RecordFailure(ctx context.Context, ev *store.InboxEvent, errText string) error
}

// InboxDialect is what a store gives the inbox steps: its transactions and
// its inbox statements.
type InboxDialect[T any] interface {
	Transactor[T]
	InboxTxSQL[T]
	InboxSQL
}

// Inbox carries out the transactional methods of store.Inbox
// (InboxProcess, InboxClaim, InboxComplete, InboxFail) on a store's
// dialect; the store keeps the rest (InboxGet, the retention delete),
// whose rows are its own.
type Inbox[T any] struct {
	store string
	d     InboxDialect[T]
	// retryTake, when not nil, reports the errors of Take and IsDone
	// after which the whole step is run again (see RetryTakeOn).
	retryTake func(error) bool
}

// NewInbox returns the inbox steps on d. storeName prefixes the errors
// ("postgres").
func NewInbox[T any](storeName string, d InboxDialect[T]) *Inbox[T] {
	return &Inbox[T]{store: storeName, d: d}
}

// RetryTakeOn makes the steps run again, in a new transaction, when Take
// or IsDone fails with an error retryable reports (MySQL's deadlocks of
// concurrent inserts of one event, which roll the whole transaction back),
// up to takeAttempts times. Nothing of the step has run then: not the
// handler. It returns ib.
func (ib *Inbox[T]) RetryTakeOn(retryable func(error) bool) *Inbox[T] {
	ib.retryTake = retryable
	return ib
}

// takeAttempts bounds the runs of a step whose Take keeps failing with an
// error RetryTakeOn retries.
const takeAttempts = 5

// errTakeAgain wraps an error of Take or IsDone that RetryTakeOn retries.
type errTakeAgain struct{ err error }

func (e errTakeAgain) Error() string { return e.err.Error() }
func (e errTakeAgain) Unwrap() error { return e.err }

// lastErrorMax bounds, in bytes, the error text kept in an inbox row.
const lastErrorMax = 2000

// failureTimeout bounds recording a failed handler run once the caller's
// context is done.
const failureTimeout = 5 * time.Second

// Process is store.Inbox's InboxProcess.
func (ib *Inbox[T]) Process(ctx context.Context, ev *store.InboxEvent, fn func(ctx context.Context, tx T) error) (store.InboxResult, error) {
	ran := false
	res, err := ib.inTx(ctx, func(tx T) (store.InboxResult, error) {
		res, err := ib.take(ctx, tx, ev, store.StatusDone, "", 0)
		if err != nil || res.Status != store.InboxTaken {
			return res, err
		}
		if ev.Seq > 0 {
			if adv, err := ib.advance(ctx, tx, ev.AggregateType, ev.AggregateID, ev.Seq); err != nil || adv.Status != store.InboxTaken {
				return adv, err
			}
		}
		ran = true
		return res, fn(ctx, tx)
	})
	if err != nil && ran {
		// fn or the commit failed, and everything rolled back: record the
		// failed attempt for inspection (the row stays free).
		if rerr := ib.recordFailure(ctx, ev, err); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return res, err
}

// Claim is store.Inbox's InboxClaim.
func (ib *Inbox[T]) Claim(ctx context.Context, p *store.InboxClaimParams) (store.InboxResult, error) {
	return ib.inTx(ctx, func(tx T) (store.InboxResult, error) {
		res, err := ib.take(ctx, tx, &p.Event, store.StatusPending, p.Owner, p.Lease)
		if err != nil || res.Status != store.InboxTaken || p.Event.Seq == 0 {
			return res, err
		}
		last, err := ib.d.LastSeq(ctx, tx, p.Event.AggregateType, p.Event.AggregateID)
		if err != nil {
			return store.InboxResult{}, fmt.Errorf("%s: inbox sequence: %w", ib.store, err)
		}
		if st := sequenceStatus(p.Event.Seq, last); st != store.InboxTaken {
			return store.InboxResult{Status: st, LastSeq: last}, nil
		}
		return res, nil
	})
}

// Complete is store.Inbox's InboxComplete; fn may be nil.
func (ib *Inbox[T]) Complete(ctx context.Context, p *store.InboxCompleteParams, fn func(ctx context.Context, tx T) error) (store.InboxResult, error) {
	return ib.inTx(ctx, func(tx T) (store.InboxResult, error) {
		ok, err := ib.d.Complete(ctx, tx, p.ID, p.Owner)
		if err != nil {
			return store.InboxResult{}, fmt.Errorf("%s: inbox complete: %w", ib.store, err)
		}
		if !ok {
			return store.InboxResult{Status: store.InboxLeaseLost}, nil
		}
		if p.Seq > 0 {
			if adv, err := ib.advance(ctx, tx, p.AggregateType, p.AggregateID, p.Seq); err != nil || adv.Status != store.InboxTaken {
				return adv, err
			}
		}
		res := store.InboxResult{Status: store.InboxTaken}
		if fn == nil {
			return res, nil
		}
		return res, fn(ctx, tx)
	})
}

// Fail is store.Inbox's InboxFail.
func (ib *Inbox[T]) Fail(ctx context.Context, p *store.InboxFailParams) (store.InboxResult, error) {
	ok, err := ib.d.Fail(ctx, p.ID, p.Owner, errorText(p.Error))
	if err != nil {
		return store.InboxResult{}, fmt.Errorf("%s: inbox fail: %w", ib.store, err)
	}
	if !ok {
		return store.InboxResult{Status: store.InboxLeaseLost}, nil
	}
	return store.InboxResult{Status: store.InboxTaken}, nil
}

// inTx runs step in a transaction and commits only when it took the row
// without error; otherwise it rolls back. A step whose Take failed with an
// error RetryTakeOn retries runs again, in a new transaction.
func (ib *Inbox[T]) inTx(ctx context.Context, step func(tx T) (store.InboxResult, error)) (store.InboxResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := ib.inTxOnce(ctx, step)
		var again errTakeAgain
		if !errors.As(err, &again) {
			return res, err
		}
		if attempt == takeAttempts || ctx.Err() != nil {
			return res, again.err
		}
	}
}

// inTxOnce is one run of inTx.
func (ib *Inbox[T]) inTxOnce(ctx context.Context, step func(tx T) (store.InboxResult, error)) (store.InboxResult, error) {
	tx, err := ib.d.Begin(ctx)
	if err != nil {
		return store.InboxResult{}, fmt.Errorf("%s: inbox begin: %w", ib.store, err)
	}
	defer ib.d.Rollback(context.WithoutCancel(ctx), tx) //nolint:errcheck // a no-op after Commit
	res, err := step(tx)
	if err != nil || res.Status != store.InboxTaken {
		return res, err
	}
	if err := ib.d.Commit(ctx, tx); err != nil {
		return res, fmt.Errorf("%s: inbox commit: %w", ib.store, err)
	}
	return res, nil
}

// take takes ev's row and, when it took nothing, tells why.
func (ib *Inbox[T]) take(ctx context.Context, tx T, ev *store.InboxEvent, status, owner string, lease time.Duration) (store.InboxResult, error) {
	attempts, ok, err := ib.d.Take(ctx, tx, ev, status, owner, lease)
	if err != nil {
		return store.InboxResult{}, ib.takeError(fmt.Errorf("%s: inbox take: %w", ib.store, err))
	}
	if ok {
		return store.InboxResult{Status: store.InboxTaken, Attempt: attempts}, nil
	}
	done, err := ib.d.IsDone(ctx, tx, ev.ID)
	if err != nil {
		return store.InboxResult{}, ib.takeError(fmt.Errorf("%s: inbox status: %w", ib.store, err))
	}
	if done {
		return store.InboxResult{Status: store.InboxDuplicate}, nil
	}
	return store.InboxResult{Status: store.InboxInProgress}, nil
}

// takeError is err, of Take or IsDone, marked to be run again when
// RetryTakeOn says so.
func (ib *Inbox[T]) takeError(err error) error {
	if ib.retryTake != nil && ib.retryTake(err) {
		return errTakeAgain{err}
	}
	return err
}

// advance moves an aggregate's last applied sequence number to seq, or
// tells why it cannot.
func (ib *Inbox[T]) advance(ctx context.Context, tx T, aggType, aggID string, seq int64) (store.InboxResult, error) {
	advanced, last, err := ib.d.Advance(ctx, tx, aggType, aggID, seq)
	switch {
	case err != nil:
		return store.InboxResult{}, fmt.Errorf("%s: inbox sequence: %w", ib.store, err)
	case advanced:
		return store.InboxResult{Status: store.InboxTaken}, nil
	case last >= seq-1:
		// last is as the statement saw it: if it was seq-1, a transaction
		// that committed while this one waited applied seq.
		return store.InboxResult{Status: store.InboxSeqApplied, LastSeq: max(last, seq)}, nil
	}
	return store.InboxResult{Status: store.InboxOutOfOrder, LastSeq: last}, nil
}

// sequenceStatus says whether an event numbered seq may be applied after
// last: InboxTaken when seq follows it, InboxSeqApplied when seq is not
// above it, InboxOutOfOrder when a predecessor is missing.
func sequenceStatus(seq, last int64) store.InboxStatus {
	switch {
	case seq == last+1:
		return store.InboxTaken
	case seq <= last:
		return store.InboxSeqApplied
	}
	return store.InboxOutOfOrder
}

// recordFailure marks ev's row failed after its handler run rolled back,
// even when ctx is already done.
func (ib *Inbox[T]) recordFailure(ctx context.Context, ev *store.InboxEvent, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failureTimeout)
	defer cancel()
	if err := ib.d.RecordFailure(ctx, ev, errorText(cause.Error())); err != nil {
		return fmt.Errorf("%s: inbox record failure: %w", ib.store, err)
	}
	return nil
}

// errorText makes an error text fit an inbox row (see store.ErrorText).
func errorText(msg string) string { return store.ErrorText(msg, lastErrorMax) }

// NullText is s, or SQL NULL (nil) when s is empty.
func NullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// NullSeq is seq, or SQL NULL (nil) for an unordered event (0).
func NullSeq(seq int64) any {
	if seq == 0 {
		return nil
	}
	return seq
}
