package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/tracecontext"
)

// EnqueueTx writes events in the caller's transaction tx, which must be a
// read-write transaction of DB(): the events commit or roll back with the
// business rows written beside them. Events without an ID get a UUIDv7,
// written back into the slice.
//
// An event whose DedupKey is already in the outbox (or earlier in events, or
// held after the delivery of an event that had it: store.SettleParams
// DedupWindow) is skipped and reported by a *postbox.DuplicateError (errors.Is(err,
// postbox.ErrDuplicate)) naming the keys; the other events are written and
// the transaction stays usable, so the caller decides whether to commit or
// roll back. Any other error, such as an ID already in the outbox (reported
// as a wrapped *postbox.DuplicateError naming the id, which also matches
// ErrDuplicate), leaves none of these events written; the transaction stays
// usable (PostgreSQL, by contrast, aborts it).
//
// When ctx carries a span, its trace context (as the global propagator,
// otel.GetTextMapPropagator, writes it) is stored in the headers of each
// event that has no traceparent of its own: the traceparent and
// tracestate headers, which the relay continues. The events' Headers maps
// are not modified.
//
// The relay's in-process listeners (Listen) are woken when tx commits, not
// before: the store's connections watch for committed outbox inserts. A
// relay in another process finds the events at its next poll.
func (s *Store) EnqueueTx(ctx context.Context, tx *sql.Tx, events ...postbox.Event) error {
	if tx == nil {
		return errors.New("sqlite: enqueue: transaction is nil")
	}
	if err := prepareEvents(events); err != nil {
		return err
	}
	return s.insert(ctx, tx, events)
}

// Enqueue writes events in a write transaction of its own and wakes the
// in-process listeners after its commit. As with EnqueueTx, events whose
// DedupKey is already taken are skipped and reported, and the others are
// committed; the trace context of ctx is recorded as EnqueueTx does.
// Inside a transaction of DB(), call EnqueueTx instead: Enqueue
// would wait for that transaction to end.
func (s *Store) Enqueue(ctx context.Context, events ...postbox.Event) error {
	if err := prepareEvents(events); err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	var skipped error
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		err := s.insert(ctx, tx, events)
		if isDuplicateOnly(err) {
			skipped = err
			return nil
		}
		return err
	})
	if err != nil {
		var dup *postbox.DuplicateError
		if errors.As(err, &dup) {
			return err
		}
		return fmt.Errorf("sqlite: enqueue: %w", err)
	}
	return skipped
}

// prepareEvents validates every event, then gives an id to those without.
func prepareEvents(events []postbox.Event) error {
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

// savepoint makes a multi-event enqueue all or nothing on error.
const savepoint = "postbox_enqueue"

// insert writes validated events with one prepared statement.
func (s *Store) insert(ctx context.Context, tx *sql.Tx, events []postbox.Event) (err error) {
	if len(events) == 0 {
		return nil
	}
	query := s.sql.Get("enqueue")
	exec := func(args ...any) (sql.Result, error) { return tx.ExecContext(ctx, query, args...) }
	if len(events) > 1 {
		stmt, perr := tx.PrepareContext(ctx, query)
		if perr != nil {
			return fmt.Errorf("sqlite: enqueue: %w", perr)
		}
		defer stmt.Close()
		exec = func(args ...any) (sql.Result, error) { return stmt.ExecContext(ctx, args...) }
		if _, serr := tx.ExecContext(ctx, "savepoint "+savepoint); serr != nil {
			return fmt.Errorf("sqlite: enqueue: %w", serr)
		}
		// err is the result of insert: on failure, undo this call's rows.
		// (A transaction already ended by its context has nothing to undo.)
		defer func() {
			cleanup := context.WithoutCancel(ctx)
			if err != nil && !isDuplicateOnly(err) {
				if _, rerr := tx.ExecContext(cleanup, "rollback to "+savepoint); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
					err = errors.Join(err, rerr)
				}
			}
			if _, rerr := tx.ExecContext(cleanup, "release "+savepoint); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
				err = errors.Join(err, rerr)
			}
		}()
	}
	now := time.Now().UnixMicro()
	tc := tracecontext.FromContext(ctx)
	var skipped []string
	for i := range events {
		e := &events[i]
		headers := "{}"
		if h := tc.Apply(e.Headers); len(h) > 0 {
			b, err := json.Marshal(h)
			if err != nil {
				return fmt.Errorf("sqlite: headers of event %s: %w", e.ID, err)
			}
			headers = string(b)
		}
		var dedup any
		if e.DedupKey != "" {
			dedup = e.DedupKey
		}
		availableAt := now
		if !e.AvailableAt.IsZero() {
			availableAt = e.AvailableAt.UnixMicro()
		}
		res, err := exec(
			sql.Named("id", e.ID.String()),
			sql.Named("aggregate_type", e.AggregateType),
			sql.Named("aggregate_id", e.AggregateID),
			sql.Named("event_type", e.EventType),
			sql.Named("payload", string(e.Payload)),
			sql.Named("dedup_key", dedup),
			sql.Named("headers", headers),
			sql.Named("available_at", availableAt),
			sql.Named("now", now),
		)
		if err != nil && e.DedupKey != "" && isHeldKey(err) {
			skipped = append(skipped, e.DedupKey)
			continue
		}
		if err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("%w: %v", &postbox.DuplicateError{Keys: []string{e.ID.String()}}, err)
			}
			return fmt.Errorf("sqlite: enqueue: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: enqueue: %w", err)
		} else if n == 0 {
			skipped = append(skipped, e.DedupKey)
		}
	}
	if len(skipped) > 0 {
		return &postbox.DuplicateError{Keys: skipped}
	}
	return nil
}

// isDuplicateOnly reports whether err is the report of skipped dedup keys,
// after which the written events stand.
func isDuplicateOnly(err error) bool {
	dup, ok := err.(*postbox.DuplicateError)
	return ok && dup != nil
}

// isUniqueViolation reports a UNIQUE or PRIMARY KEY constraint failure.
func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return true
	}
	return false
}

// isHeldKey reports the refusal of a dedup key held after the delivery of
// an event that had it (the trigger outbox_events_held_key of migration
// 0008): the event is skipped, as one whose key is in the outbox.
func isHeldKey(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_TRIGGER &&
		strings.Contains(se.Error(), "outbox_events.dedup_key (the key of a delivered event")
}
