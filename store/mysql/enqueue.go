package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/tracecontext"
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
	if err := prepareEvents(events); err != nil {
		return err
	}
	return s.insert(ctx, tx, events)
}

// Enqueue writes events in a transaction of its own and wakes the
// in-process listeners after its commit. As with EnqueueTx, events whose
// DedupKey is already taken are skipped and reported, and the others are
// committed; the trace context of ctx is recorded as EnqueueTx does.
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
		return fmt.Errorf("mysql: enqueue: %w", err)
	}
	s.Notify()
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
	st := s.stmt("enqueue")
	exec := func(args ...any) (sql.Result, error) { return tx.ExecContext(ctx, st.text, args...) }
	if len(events) > 1 {
		prepared, perr := tx.PrepareContext(ctx, st.text)
		if perr != nil {
			return fmt.Errorf("mysql: enqueue: %w", perr)
		}
		defer prepared.Close()
		exec = func(args ...any) (sql.Result, error) { return prepared.ExecContext(ctx, args...) }
		if _, serr := tx.ExecContext(ctx, "savepoint "+savepoint); serr != nil {
			return fmt.Errorf("mysql: enqueue: %w", serr)
		}
		// err is the result of insert: on failure, undo this call's rows.
		defer func() {
			cleanup := context.WithoutCancel(ctx)
			if err != nil && !isDuplicateOnly(err) {
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
				return fmt.Errorf("mysql: headers of event %s: %w", e.ID, err)
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
		_, err := exec(st.args([]any{
			sql.Named("id", e.ID.String()),
			sql.Named("aggregate_type", e.AggregateType),
			sql.Named("aggregate_id", e.AggregateID),
			sql.Named("event_type", e.EventType),
			sql.Named("payload", string(e.Payload)),
			sql.Named("dedup_key", dedup),
			sql.Named("headers", headers),
			sql.Named("available_at", availableAt),
			sql.Named("now", now),
		})...)
		switch {
		case err == nil:
		case e.DedupKey != "" && isDedupConflict(err):
			skipped = append(skipped, e.DedupKey)
		case isDuplicate(err):
			return fmt.Errorf("%w: %v", &postbox.DuplicateError{Keys: []string{e.ID.String()}}, err)
		default:
			return fmt.Errorf("mysql: enqueue: %w", err)
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
