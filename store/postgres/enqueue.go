package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/tracecontext"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// enqueueChunk bounds the events of one INSERT (PostgreSQL allows 65535
// parameters; each event takes enqueueColumns).
const (
	enqueueColumns = 8
	enqueueChunk   = 1000
)

// EnqueueTx writes events in the caller's pgx transaction, in one round trip
// per thousand events. Events without an ID get a UUIDv7, written back into
// the slice when it is passed as events... (set IDs with postbox.NewID to
// know them beforehand).
//
// When ctx carries a span, its trace context (as the global propagator,
// otel.GetTextMapPropagator, writes it) is stored in the headers of each
// event that has no traceparent of its own: the traceparent and
// tracestate headers, which the relay continues. The events' Headers maps
// are not modified.
//
// An event whose DedupKey is already in the outbox, or held after the
// delivery of an event that had it (store.SettleParams.DedupWindow), is
// skipped and reported
// by a *postbox.DuplicateError (errors.Is(err, postbox.ErrDuplicate)); the
// transaction stays usable and the other events are written, so the caller
// decides whether to commit or roll back. Committing after any other error
// would commit the business change without its events: roll back. A repeated ID aborts the
// transaction and is reported the same way.
func (s *Store) EnqueueTx(ctx context.Context, tx pgx.Tx, events ...postbox.Event) error {
	return s.enqueue(ctx, events, s.queryKeys(tx))
}

// DatabaseSQL returns the store's producer for database/sql transactions on
// PostgreSQL (any driver: pgx's stdlib, lib/pq, ...): its EnqueueTx is
// EnqueueTx's, for a *sql.Tx. It is the same call shape as the SQLite
// store's, so code written against store.Producer[*sql.Tx] runs on both.
func (s *Store) DatabaseSQL() store.Producer[*sql.Tx] { return sqlProducer{s} }

// sqlProducer is the Store's producer for database/sql transactions.
type sqlProducer struct{ s *Store }

// EnqueueTx writes events in the caller's database/sql transaction, as
// Store.EnqueueTx does in a pgx one.
func (p sqlProducer) EnqueueTx(ctx context.Context, tx *sql.Tx, events ...postbox.Event) error {
	return p.s.enqueue(ctx, events, func(ctx context.Context, query string, args []any) ([]string, error) {
		return sqlstore.CollectRows[string](tx.QueryContext(ctx, query, args...))
	})
}

// Enqueue writes events in a transaction of its own. As with EnqueueTx,
// events whose DedupKey is already taken are skipped and reported, and the
// others are committed, with the trace context of ctx as EnqueueTx records
// it. Up to a thousand events take one round trip (one INSERT, its own
// implicit transaction).
func (s *Store) Enqueue(ctx context.Context, events ...postbox.Event) error {
	if len(events) <= enqueueChunk {
		err := s.enqueue(ctx, events, s.queryKeys(s.pool))
		if outboxKindChanged(err) {
			// Partitioned since this store's last insert, which failed
			// alone (its own transaction): once more, in the new form.
			err = s.enqueue(ctx, events, s.queryKeys(s.pool))
		}
		return err
	}
	var skipped *postbox.DuplicateError
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := s.EnqueueTx(ctx, tx, events...)
		if errors.As(err, &skipped) && err == error(skipped) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	if skipped != nil {
		return skipped
	}
	return nil
}

// queryKeys runs the insert on q (a transaction, a pool) and collects the
// dedup keys it returns.
func (s *Store) queryKeys(q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) insertFunc {
	return func(ctx context.Context, query string, args []any) ([]string, error) {
		rows, err := q.Query(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	}
}

// insertFunc runs the insert and returns the dedup keys of the rows written.
type insertFunc func(ctx context.Context, query string, args []any) ([]string, error)

func (s *Store) enqueue(ctx context.Context, events []postbox.Event, insert insertFunc) error {
	// Every event is checked before anything is written.
	args := make([]any, 0, len(events)*enqueueColumns)
	tc := tracecontext.FromContext(ctx)
	for i := range events {
		a, err := enqueueArgs(&events[i], tc)
		if err != nil {
			return err
		}
		args = append(args, a...)
	}
	var dup postbox.DuplicateError
	for start := 0; start < len(events); start += enqueueChunk {
		chunk := events[start:min(start+enqueueChunk, len(events))]
		chunkArgs := args[start*enqueueColumns : (start+len(chunk))*enqueueColumns]
		query, err := s.skipInsertSQL(ctx, len(chunk), insert)
		if err != nil {
			return enqueueError(err)
		}
		written, err := insert(ctx, query, chunkArgs)
		if err != nil {
			if outboxKindChanged(err) {
				s.outboxKindSeen.Store(outboxKindUnknown)
			}
			return enqueueError(err)
		}
		dup.Keys = append(dup.Keys, skippedKeys(chunk, written)...)
	}
	if len(dup.Keys) > 0 {
		return &dup
	}
	return nil
}

// insertSQL is a multi-row INSERT for n events. It names only the article's
// columns and postbox's optional ones, so it runs on any driver. With
// onConflictSkip (EnqueueTx), an event whose dedup key is taken is skipped
// and the INSERT returns the dedup keys of the rows written; without
// (Transact), a taken dedup key fails the INSERT, and it returns nothing.
func (s *Store) insertSQL(n int, onConflictSkip bool) string {
	if n == 1 {
		if onConflictSkip {
			return s.insertOne[1]
		}
		return s.insertOne[0]
	}
	return s.buildInsertSQL(n, onConflictSkip)
}

// buildInsertSQL builds insertSQL's statement. With onConflictSkip, an
// event whose dedup key is held after a delivery (outbox_held_keys) is
// skipped as well: the trigger that refuses it would abort the caller's
// transaction.
func (s *Store) buildInsertSQL(n int, onConflictSkip bool) string {
	var b strings.Builder
	b.WriteString(s.expand("insert into {schema}.outbox_events (id, aggregate_type, aggregate_id, event_type, payload, dedup_key, headers, available_at) "))
	if onConflictSkip {
		b.WriteString("select * from (")
	}
	b.WriteString("values ")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		p := i*enqueueColumns + 1
		fmt.Fprintf(&b, "($%d::uuid, $%d::text, $%d::text, $%d::text, $%d::jsonb, $%d::text, $%d::jsonb, coalesce($%d::timestamptz, now()))",
			p, p+1, p+2, p+3, p+4, p+5, p+6, p+7)
	}
	if onConflictSkip {
		b.WriteString(s.expand(") v (id, aggregate_type, aggregate_id, event_type, payload, dedup_key, headers, available_at)" +
			" where v.dedup_key is null or not exists (select 1 from {schema}.outbox_held_keys k where k.dedup_key = v.dedup_key and k.expires_at > now())" +
			" on conflict (dedup_key) where dedup_key is not null do nothing returning coalesce(dedup_key, '')"))
	}
	return b.String()
}

// enqueueArgs validates an event and returns its INSERT parameters; tc is
// the producer's trace context, added to headers without a traceparent.
func enqueueArgs(e *postbox.Event, tc tracecontext.Headers) ([]any, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if e.ID == uuid.Nil {
		e.ID = postbox.NewID()
	}
	headers := "{}"
	if h := tc.Apply(e.Headers); len(h) > 0 {
		b, err := json.Marshal(h)
		if err != nil {
			return nil, fmt.Errorf("postgres: headers of event %s: %w", e.ID, err)
		}
		headers = string(b)
	}
	var dedup, availableAt any
	if e.DedupKey != "" {
		dedup = e.DedupKey
	}
	if !e.AvailableAt.IsZero() {
		availableAt = e.AvailableAt
	}
	// The id as text: the parameters serve database/sql drivers too.
	return []any{e.ID.String(), e.AggregateType, e.AggregateID, e.EventType, string(e.Payload), dedup, headers, availableAt}, nil
}

// skippedKeys returns the dedup keys of events the insert skipped.
func skippedKeys(events []postbox.Event, written []string) []string {
	got := make(map[string]int, len(written))
	for _, k := range written {
		got[k]++
	}
	var skipped []string
	for _, e := range events {
		if e.DedupKey == "" {
			continue
		}
		if got[e.DedupKey] > 0 {
			got[e.DedupKey]--
			continue
		}
		skipped = append(skipped, e.DedupKey)
	}
	return skipped
}

// enqueueError is the error of EnqueueTx's insert. The insert skips keys
// taken or held; the one unique violation it can meet on a dedup key is the
// trigger's, for a key held by a settle that committed while the statement
// ran: it aborted the transaction, which a skipped duplicate does not, so
// it is not reported as one (a caller would commit a transaction that is
// gone). A violation on the id is a duplicate.
func enqueueError(err error) error {
	if isUniqueViolation(err) && strings.Contains(err.Error(), dedupKeyIndex) {
		return fmt.Errorf("postgres: enqueue: a dedup key was held by a delivery that committed while this insert ran; the transaction is aborted (run it again: the key is then skipped): %w", err)
	}
	return duplicateOr(err, fmt.Errorf("postgres: enqueue: %w", err))
}

// dedupKeyIndex is the unique index of dedup keys, which the trigger of
// held keys names too (migration 0008).
const dedupKeyIndex = "outbox_events_dedup_key_uq"

// duplicateOr maps a unique violation (a repeated id) to ErrDuplicate.
func duplicateOr(err, otherwise error) error {
	if isUniqueViolation(err) {
		return fmt.Errorf("%w: %v", &postbox.DuplicateError{Keys: []string{"id"}}, err)
	}
	return otherwise
}

// isUniqueViolation reports a unique violation from any driver whose errors
// tell their SQLSTATE (pgx, lib/pq, ...).
func isUniqueViolation(err error) bool {
	var state interface{ SQLState() string }
	return errors.As(err, &state) && state.SQLState() == "23505"
}
