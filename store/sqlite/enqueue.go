package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
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
	if err := sqlstore.PrepareEvents(events); err != nil {
		return err
	}
	return s.enqueue.Insert(ctx, tx, events)
}

// Enqueue writes events in a write transaction of its own and wakes the
// in-process listeners after its commit. As with EnqueueTx, events whose
// DedupKey is already taken are skipped and reported, and the others are
// committed; the trace context of ctx is recorded as EnqueueTx does.
// Inside a transaction of DB(), call EnqueueTx instead: Enqueue
// would wait for that transaction to end.
func (s *Store) Enqueue(ctx context.Context, events ...postbox.Event) error {
	if err := sqlstore.PrepareEvents(events); err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	var skipped error
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		err := s.enqueue.Insert(ctx, tx, events)
		if sqlstore.IsDuplicateOnly(err) {
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

// enqueueSQL is the SQLite store's side of sqlstore.Enqueue: times are
// INTEGER microseconds.
type enqueueSQL struct{ s *Store }

func (q enqueueSQL) Query() string { return q.s.sql.Get("enqueue") }

func (enqueueSQL) Args(e *postbox.Event, headers string, dedup any, availableAt, now time.Time) []any {
	return []any{
		sql.Named("id", e.ID.String()),
		sql.Named("aggregate_type", e.AggregateType),
		sql.Named("aggregate_id", e.AggregateID),
		sql.Named("event_type", e.EventType),
		sql.Named("payload", string(e.Payload)),
		sql.Named("dedup_key", dedup),
		sql.Named("headers", headers),
		sql.Named("available_at", availableAt.UnixMicro()),
		sql.Named("now", now.UnixMicro()),
	}
}

func (enqueueSQL) DedupTaken(err error) bool  { return isHeldKey(err) }
func (enqueueSQL) DuplicateID(err error) bool { return isUniqueViolation(err) }

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
