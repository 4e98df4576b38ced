package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/tracecontext"
)

// EnqueueSQL is what a database/sql store brings to the producers' insert
// (Enqueue): its statement, its arguments, and what its errors mean.
type EnqueueSQL interface {
	// Query is the insert of one event (the store's enqueue statement);
	// one statement, prepared once for many events.
	Query() string
	// Args are the statement's arguments for e, as the store's column
	// types take them: headers is the JSON of its headers (the trace
	// context applied), dedup its key or nil, availableAt and now times in
	// UTC.
	Args(e *postbox.Event, headers string, dedup any, availableAt, now time.Time) []any
	// DedupTaken reports an error refusing the event's dedup key: taken in
	// the outbox, or held after the delivery of an event that had it.
	DedupTaken(err error) bool
	// DuplicateID reports an error refusing the event's id: it is in the
	// outbox already.
	DuplicateID(err error) bool
}

// Enqueue writes events into a database/sql store's outbox: the steps of
// its EnqueueTx and Enqueue, whatever the database.
type Enqueue struct {
	store string // "sqlite", "mysql": the errors' prefix
	d     EnqueueSQL
}

// NewEnqueue returns the enqueue of the store named storeName.
func NewEnqueue(storeName string, d EnqueueSQL) *Enqueue {
	return &Enqueue{store: storeName, d: d}
}

// PrepareEvents validates every event, then gives a UUIDv7 to those
// without an id, written back into the slice.
func PrepareEvents(events []postbox.Event) error {
	for i := range events {
		if err := events[i].Validate(); err != nil {
			return err
		}
	}
	for i := range events {
		if events[i].ID == uuid.Nil {
			events[i].ID = postbox.NewID()
		}
	}
	return nil
}

// IsDuplicateOnly reports whether err is the report of skipped dedup keys
// (a *postbox.DuplicateError itself, not wrapped), after which the events
// written stand.
func IsDuplicateOnly(err error) bool {
	dup, ok := err.(*postbox.DuplicateError)
	return ok && dup != nil
}

// savepoint makes a multi-event insert all or nothing on error.
const savepoint = "postbox_enqueue"

// Insert writes prepared events (PrepareEvents) in tx, with one prepared
// statement, the trace context of ctx in the headers of those without a
// traceparent. An event whose dedup key is taken is skipped (an insert
// that wrote no row is one too) and reported by a *postbox.DuplicateError
// naming the keys, the others written; any other error undoes this call's
// rows (a savepoint) and leaves tx usable. An id already in the outbox is
// a wrapped *postbox.DuplicateError naming it.
func (q *Enqueue) Insert(ctx context.Context, tx *sql.Tx, events []postbox.Event) (err error) {
	if len(events) == 0 {
		return nil
	}
	query := q.d.Query()
	exec := func(args ...any) (sql.Result, error) { return tx.ExecContext(ctx, query, args...) }
	if len(events) > 1 {
		stmt, perr := tx.PrepareContext(ctx, query)
		if perr != nil {
			return fmt.Errorf("%s: enqueue: %w", q.store, perr)
		}
		defer stmt.Close()
		exec = func(args ...any) (sql.Result, error) { return stmt.ExecContext(ctx, args...) }
		if _, serr := tx.ExecContext(ctx, "savepoint "+savepoint); serr != nil {
			return fmt.Errorf("%s: enqueue: %w", q.store, serr)
		}
		// err is the result of Insert: on failure, undo this call's rows.
		// (A transaction already ended by its context has nothing to undo.)
		defer func() {
			cleanup := context.WithoutCancel(ctx)
			if err != nil && !IsDuplicateOnly(err) {
				if _, rerr := tx.ExecContext(cleanup, "rollback to savepoint "+savepoint); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
					err = errors.Join(err, rerr)
				}
			}
			if _, rerr := tx.ExecContext(cleanup, "release savepoint "+savepoint); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
				err = errors.Join(err, rerr)
			}
		}()
	}
	now := time.Now().UTC()
	tc := tracecontext.FromContext(ctx)
	var skipped []string
	for i := range events {
		e := &events[i]
		headers := "{}"
		if h := tc.Apply(e.Headers); len(h) > 0 {
			b, err := json.Marshal(h)
			if err != nil {
				return fmt.Errorf("%s: headers of event %s: %w", q.store, e.ID, err)
			}
			headers = string(b)
		}
		var dedup any
		if e.DedupKey != "" {
			dedup = e.DedupKey
		}
		availableAt := now
		if !e.AvailableAt.IsZero() {
			availableAt = e.AvailableAt.UTC()
		}
		res, err := exec(q.d.Args(e, headers, dedup, availableAt, now)...)
		switch {
		case err != nil && e.DedupKey != "" && q.d.DedupTaken(err):
			skipped = append(skipped, e.DedupKey)
			continue
		case err != nil && q.d.DuplicateID(err):
			return fmt.Errorf("%w: %v", &postbox.DuplicateError{Keys: []string{e.ID.String()}}, err)
		case err != nil:
			return fmt.Errorf("%s: enqueue: %w", q.store, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("%s: enqueue: %w", q.store, err)
		} else if n == 0 {
			skipped = append(skipped, e.DedupKey)
		}
	}
	if len(skipped) > 0 {
		return &postbox.DuplicateError{Keys: skipped}
	}
	return nil
}
