package mysql

import (
	"context"
	"database/sql"
	_ "embed"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

//go:embed deadletters.sql
var deadLettersSQL string

// FailedList returns one page of failed events, the most recent failure
// first (see store.DeadLetters).
func (s *Store) FailedList(ctx context.Context, p store.FailedListParams) (store.FailedPage, error) {
	return s.dead.List(ctx, p)
}

// FailedGroups groups the most recent failed events by error fingerprint
// (see store.DeadLetters).
func (s *Store) FailedGroups(ctx context.Context, p store.FailedGroupsParams) (store.FailedGroups, error) {
	return s.dead.Groups(ctx, p)
}

// FailedRetry sends failed events back to the queue in batches, each a
// transaction of its own, and wakes this Store's listeners after
// each (relays of other processes find them by polling); failed
// deliveries of endpoints (FailedFilter.Endpoint) wake no one: package
// endpoint polls for them.
func (s *Store) FailedRetry(ctx context.Context, p store.FailedRetryParams) (int, error) {
	return s.dead.Retry(ctx, p)
}

// FailedPurge deletes failed events in batches, each a write transaction of
// its own (see store.DeadLetters).
func (s *Store) FailedPurge(ctx context.Context, p store.FailedPurgeParams) (int, error) {
	return s.dead.Purge(ctx, p)
}

// deadLetterSQL runs the statements of deadletters.sql for sqlstore.
type deadLetterSQL struct{ s *Store }

var _ sqlstore.DeadLetterSQL = deadLetterSQL{}

// filterArgs are the filters of every dead-letter statement, with, for
// the failed deliveries of endpoints (statement), :endpoint: an endpoint's
// id, or the empty text for store.AnyEndpoint.
func filterArgs(f store.FailedFilter) []any {
	since, before := timeMin, timeMax
	if !f.FailedSince.IsZero() {
		since = f.FailedSince.UTC()
	}
	if !f.FailedBefore.IsZero() {
		before = f.FailedBefore.UTC()
	}
	args := []any{sql.Named("event_type", f.EventType), sql.Named("since", since), sql.Named("before", before),
		sql.Named("aggregate_type", f.AggregateType), sql.Named("aggregate_id", f.AggregateID),
		sql.Named("error_contains", f.ErrorContains)}
	switch f.Endpoint {
	case uuid.Nil:
	case store.AnyEndpoint:
		args = append(args, sql.Named("endpoint", ""))
	default:
		args = append(args, sql.Named("endpoint", f.Endpoint.String()))
	}
	return args
}

// statement is the name of the dead-letter statement query works on for
// f: failed_retry for the outbox, delivery_failed_retry for the endpoints'
// deliveries.
func statement(query string, f store.FailedFilter) string {
	if f.Endpoint == uuid.Nil {
		return query
	}
	return "delivery_" + query
}

// listStatement is statement for the lists (failed_list, failed_scan),
// which have a statement of their own for every endpoint (see
// deadletters.sql).
func listStatement(query string, f store.FailedFilter) string {
	if f.Endpoint == store.AnyEndpoint {
		return "delivery_" + query + "_any"
	}
	return statement(query, f)
}

// cursorArgs are filterArgs, then the cursor and the limit.
func cursorArgs(f store.FailedFilter, after store.FailedCursor, limit int) []any {
	at, seq := timeMax, int64(0)
	if !after.IsZero() {
		at, seq = after.ProcessedAt.UTC(), after.OutboxSeq
	}
	return append(filterArgs(f), sql.Named("at", at), sql.Named("seq", seq), sql.Named("limit", limit))
}

func (d deadLetterSQL) ListFailed(ctx context.Context, f store.FailedFilter, after store.FailedCursor, limit int) ([]store.Record, error) {
	rows, err := d.s.query(ctx, d.s.db, listStatement("failed_list", f), cursorArgs(f, after, limit)...)
	if err != nil {
		return nil, err
	}
	if f.Endpoint == uuid.Nil {
		return scanRecords(rows)
	}
	withEndpoints := &endpointFirst{Rows: rows}
	recs, err := scanRecords(withEndpoints)
	for i := range recs {
		recs[i].Endpoint = withEndpoints.endpoints[i]
	}
	return recs, err
}

// endpointFirst are the rows of delivery_failed_list: Scan reads each
// one's first column, its endpoint, into endpoints before the columns it
// is given.
type endpointFirst struct {
	*sql.Rows
	endpoints []uuid.UUID
}

func (r *endpointFirst) Scan(dest ...any) error {
	var endpoint uuid.UUID
	err := r.Rows.Scan(append([]any{&endpoint}, dest...)...)
	r.endpoints = append(r.endpoints, endpoint)
	return err
}

func (d deadLetterSQL) ScanFailed(ctx context.Context, f store.FailedFilter, after store.FailedCursor, limit int) ([]sqlstore.FailedRow, error) {
	rows, err := d.s.query(ctx, d.s.db, listStatement("failed_scan", f), cursorArgs(f, after, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqlstore.FailedRow
	for rows.Next() {
		var r sqlstore.FailedRow
		var at sql.NullTime
		dest := []any{&r.ID, &at, &r.Cursor.OutboxSeq, &r.LastError}
		if f.Endpoint != uuid.Nil {
			dest = slices.Insert(dest, 1, any(&r.Endpoint))
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		r.Cursor.ProcessedAt = anyTime(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

func (d deadLetterSQL) Retry(ctx context.Context, f store.FailedFilter, ids []uuid.UUID, limit int) (int, error) {
	n, err := d.change(ctx, "failed_retry", f, ids, limit, sql.Named("now", time.Now().UTC()))
	if n > 0 && f.Endpoint == uuid.Nil {
		// The lanes of endpoints do not listen: package endpoint polls
		// for their due deliveries (store.Endpoints.DeliveryDue).
		d.s.Notify()
	}
	return n, err
}

func (d deadLetterSQL) Purge(ctx context.Context, f store.FailedFilter, ids []uuid.UUID, limit int) (int, error) {
	return d.change(ctx, "failed_purge", f, ids, limit)
}

// change runs query (up to limit rows) or, for ids, query_ids, on the
// outbox or the deliveries (statement), in a transaction of its own.
func (d deadLetterSQL) change(ctx context.Context, query string, f store.FailedFilter, ids []uuid.UUID, limit int, extra ...any) (int, error) {
	if err := checkLimit(query, limit); err != nil {
		return 0, err
	}
	args := append(filterArgs(f), extra...)
	if ids != nil {
		query += "_ids"
		args = append(args, idList(ids))
	} else {
		args = append(args, sql.Named("limit", limit))
	}
	return d.s.exec(ctx, statement(query, f), args...)
}
