package postgres

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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

// FailedRetry sends failed events back to the queue in batches, and wakes
// the listening relays after each; failed deliveries of endpoints
// (FailedFilter.Endpoint) wake no one: package endpoint polls for them
// (see store.DeadLetters).
func (s *Store) FailedRetry(ctx context.Context, p store.FailedRetryParams) (int, error) {
	return s.dead.Retry(ctx, p)
}

// FailedPurge deletes failed events in batches (see store.DeadLetters).
func (s *Store) FailedPurge(ctx context.Context, p store.FailedPurgeParams) (int, error) {
	return s.dead.Purge(ctx, p)
}

// StatsByType counts the unfinished events of each type.
func (s *Store) StatsByType(ctx context.Context) ([]store.TypeStats, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("stats_by_type"))
	if err != nil {
		return nil, fmt.Errorf("postgres: stats by type: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.TypeStats, error) {
		var t store.TypeStats
		err := row.Scan(&t.EventType, &t.Pending, &t.Processing, &t.Failed)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: stats by type: %w", err)
	}
	return out, nil
}

// deadLetterSQL runs the statements of deadletters.sql for sqlstore.
type deadLetterSQL struct{ s *Store }

var _ sqlstore.DeadLetterSQL = deadLetterSQL{}

// filterArgs are $1 to $6 of every dead-letter statement, after the mode
// that prepares it unnamed each time it runs, so that the server plans it
// for these values. Each filter
// is optional (aggregate_type = $4 unless $4 is empty): a cached generic plan,
// which pgx's prepared statements get after five runs, cannot tell which
// filters are set and so uses no index of theirs (0.5-0.9 s for the list of
// one aggregate among 1,000,000 failed events through postbox console,
// against milliseconds planned with the values).
func filterArgs(f store.FailedFilter) []any {
	return []any{pgx.QueryExecModeDescribeExec, f.EventType, nullTime(f.FailedSince), nullTime(f.FailedBefore), f.AggregateType, f.AggregateID, f.ErrorContains}
}

// cursorArgs are filterArgs, then the cursor ($7, $8) and limit ($9).
func cursorArgs(f store.FailedFilter, after store.FailedCursor, limit int) []any {
	var at, seq any
	if !after.IsZero() {
		at, seq = after.ProcessedAt, after.OutboxSeq
	}
	return append(filterArgs(f), at, seq, limit)
}

// statement returns the name of the dead-letter statement query works on
// for f (failed_list: the outbox's; delivery_failed_list: the endpoints'
// deliveries), and args with, for deliveries, the endpoint appended as the
// last parameter (null for store.AnyEndpoint).
func statement(query string, f store.FailedFilter, args []any) (string, []any) {
	switch f.Endpoint {
	case uuid.Nil:
		return query, args
	case store.AnyEndpoint:
		return "delivery_" + query, append(args, nil)
	}
	return "delivery_" + query, append(args, f.Endpoint)
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func (d deadLetterSQL) ListFailed(ctx context.Context, f store.FailedFilter, after store.FailedCursor, limit int) ([]store.Record, error) {
	query, args := statement("failed_list", f, cursorArgs(f, after, limit))
	rows, err := d.s.pool.Query(ctx, d.s.sql.Get(query), args...)
	if err != nil {
		return nil, err
	}
	if f.Endpoint == uuid.Nil {
		return pgx.CollectRows(rows, scanRecord)
	}
	return pgx.CollectRows(rows, scanDeliveryRecord)
}

// scanDeliveryRecord reads one row of delivery_failed_list: its endpoint,
// then the columns of scanRecord.
func scanDeliveryRecord(row pgx.CollectableRow) (store.Record, error) {
	var endpoint uuid.UUID
	r, err := scanRecord(endpointFirst{row, &endpoint})
	r.Endpoint = endpoint
	return r, err
}

// endpointFirst is a row whose first column, the endpoint, Scan reads into
// endpoint before the columns it is given.
type endpointFirst struct {
	pgx.CollectableRow
	endpoint *uuid.UUID
}

func (r endpointFirst) Scan(dest ...any) error {
	return r.CollectableRow.Scan(append([]any{r.endpoint}, dest...)...)
}

func (d deadLetterSQL) ScanFailed(ctx context.Context, f store.FailedFilter, after store.FailedCursor, limit int) ([]sqlstore.FailedRow, error) {
	query, args := statement("failed_scan", f, cursorArgs(f, after, limit))
	rows, err := d.s.pool.Query(ctx, d.s.sql.Get(query), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (sqlstore.FailedRow, error) {
		var r sqlstore.FailedRow
		var processed pgtype.Timestamptz
		dest := []any{&r.ID, &processed, &r.Cursor.OutboxSeq, &r.LastError}
		if f.Endpoint != uuid.Nil {
			dest = slices.Insert(dest, 1, any(&r.Endpoint))
		}
		err := row.Scan(dest...)
		r.Cursor.ProcessedAt = finiteTime(processed)
		return r, err
	})
}

func (d deadLetterSQL) Retry(ctx context.Context, f store.FailedFilter, ids []uuid.UUID, limit int) (int, error) {
	n, err := d.change(ctx, "failed_retry", f, ids, limit)
	if err != nil || n == 0 || f.Endpoint != uuid.Nil {
		// The lanes of endpoints do not listen: package endpoint polls
		// for their due deliveries (store.Endpoints.DeliveryDue).
		return n, err
	}
	if _, err := d.s.pool.Exec(ctx, d.s.sql.Get("failed_notify")); err != nil {
		return n, fmt.Errorf("wake relays (%d events retried): %w", n, err)
	}
	return n, nil
}

func (d deadLetterSQL) Purge(ctx context.Context, f store.FailedFilter, ids []uuid.UUID, limit int) (int, error) {
	return d.change(ctx, "failed_purge", f, ids, limit)
}

// change runs query (up to limit rows) or, for ids, query_ids, on the
// outbox or the deliveries (statement).
func (d deadLetterSQL) change(ctx context.Context, query string, f store.FailedFilter, ids []uuid.UUID, limit int) (int, error) {
	args := filterArgs(f)
	if ids != nil {
		query += "_ids"
		args = append(args, rawIDs(ids))
	} else {
		args = append(args, limit)
	}
	query, args = statement(query, f, args)
	tag, err := d.s.pool.Exec(ctx, d.s.sql.Get(query), args...)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
