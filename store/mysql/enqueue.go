package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// EnqueueTx writes events in the caller's transaction tx, a transaction of
// DB(): the events commit or roll back with the business rows written
// beside them. Events without an ID get a UUIDv7, written back into the
// slice.
//
// An event whose DedupKey is already in the outbox (or earlier in events, or
// held after the delivery of an event that had it: store.SettleParams
// DedupWindow) is skipped and reported by a *postbox.DuplicateError
// (errors.Is(err, postbox.ErrDuplicate)) naming the keys; the other events
// are written and the transaction stays usable, so the caller decides
// whether to commit or roll back. Any other error, such as an ID already in
// the outbox (reported as a wrapped *postbox.DuplicateError naming the id,
// which also matches ErrDuplicate), leaves none of these events written;
// the transaction stays usable (MySQL undoes the failed statement, and a
// savepoint the others).
//
// When ctx carries a span, its trace context is stored in the headers of
// each event that has no traceparent of its own (see store/sqlite).
//
// Relays find the events when their poll sees the outbox's newest seq
// change (within 250 ms; see Listen); call Notify after the commit to wake
// this process's relays at once.
func (s *Store) EnqueueTx(ctx context.Context, tx *sql.Tx, events ...postbox.Event) error {
	if tx == nil {
		return errors.New("mysql: enqueue: transaction is nil")
	}
	if err := sqlstore.PrepareEvents(events); err != nil {
		return err
	}
	return s.enqueue.Insert(ctx, tx, events)
}

// Enqueue writes events in a transaction of its own and wakes the
// in-process listeners after its commit. As with EnqueueTx, events whose
// DedupKey is already taken are skipped and reported, and the others are
// committed; the trace context of ctx is recorded as EnqueueTx does.
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
		return fmt.Errorf("mysql: enqueue: %w", err)
	}
	s.Notify()
	return skipped
}

// enqueueSQL is the MySQL store's side of sqlstore.Enqueue.
type enqueueSQL struct{ s *Store }

func (q enqueueSQL) Query() string { return q.s.stmt("enqueue").text }

func (q enqueueSQL) Args(e *postbox.Event, headers string, dedup any, availableAt, now time.Time) []any {
	return q.s.stmt("enqueue").args([]any{
		sql.Named("id", e.ID.String()),
		sql.Named("aggregate_type", e.AggregateType),
		sql.Named("aggregate_id", e.AggregateID),
		sql.Named("event_type", e.EventType),
		sql.Named("payload", string(e.Payload)),
		sql.Named("dedup_key", dedup),
		sql.Named("headers", headers),
		sql.Named("available_at", availableAt),
		sql.Named("now", now),
	})
}

func (enqueueSQL) DedupTaken(err error) bool  { return isDedupConflict(err) }
func (enqueueSQL) DuplicateID(err error) bool { return isDuplicate(err) }

// errDuplicateKey is the server's error of a duplicate in a unique index
// (and of the held keys' trigger, migration 0008).
const errDuplicateKey = 1062

// isDuplicate reports a duplicate key.
func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDuplicateKey
}

// isDedupConflict reports a duplicate dedup key: in the outbox (its unique
// index), or held after the delivery of an event that had it (the
// trigger's error names dedup_key).
func isDedupConflict(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDuplicateKey &&
		(strings.Contains(me.Message, "outbox_events_dedup_key_uq") || strings.Contains(me.Message, "Duplicate dedup_key"))
}
