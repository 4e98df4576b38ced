package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// Stats counts events by status.
func (s *Store) Stats(ctx context.Context) (store.StatusCounts, error) {
	return s.stats(ctx, "stats")
}

// StatsUpTo counts events by status, each count stopping at limit (see
// store.Inspector).
func (s *Store) StatsUpTo(ctx context.Context, limit int64) (store.StatusCounts, error) {
	if limit < 1 {
		return store.StatusCounts{}, fmt.Errorf("mysql: stats: limit %d: want at least 1", limit)
	}
	return s.stats(ctx, "stats_up_to", sql.Named("limit", limit), sql.Named("now", time.Now().UTC()))
}

// stats runs a query of the counts (stats, stats_up_to).
func (s *Store) stats(ctx context.Context, query string, args ...any) (store.StatusCounts, error) {
	var st store.StatusCounts
	var oldest sql.NullTime
	err := s.queryRow(ctx, s.db, query, args...).Scan(&st.Pending, &st.Processing, &st.Done, &st.Failed, &oldest)
	if err != nil {
		return st, fmt.Errorf("mysql: stats: %w", err)
	}
	if t := anyTime(oldest); !t.IsZero() {
		st.OldestPendingAge = max(0, time.Since(t))
	}
	return st, nil
}

// StatsByType counts the unfinished events of each type.
func (s *Store) StatsByType(ctx context.Context) ([]store.TypeStats, error) {
	rows, err := s.query(ctx, s.db, "stats_by_type")
	if err != nil {
		return nil, fmt.Errorf("mysql: stats by type: %w", err)
	}
	defer rows.Close()
	var out []store.TypeStats
	for rows.Next() {
		var t store.TypeStats
		var eventType []byte
		if err := rows.Scan(&eventType, &t.Pending, &t.Processing, &t.Failed); err != nil {
			return nil, fmt.Errorf("mysql: stats by type: %w", err)
		}
		t.EventType = string(eventType)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: stats by type: %w", err)
	}
	return out, nil
}

// Get returns one event's record, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (store.Record, error) {
	rows, err := s.query(ctx, s.db, "get", sql.Named("id", id.String()))
	if err != nil {
		return store.Record{}, fmt.Errorf("mysql: get event: %w", err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return store.Record{}, fmt.Errorf("mysql: get event: %w", err)
	}
	if len(recs) == 0 {
		return store.Record{}, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	return recs[0], nil
}

// List returns up to p.Limit records with status p.Status, in sequence order.
func (s *Store) List(ctx context.Context, p store.ListParams) ([]store.Record, error) {
	if err := checkLimit("list events", p.Limit); err != nil || p.Limit == 0 {
		return nil, err
	}
	rows, err := s.query(ctx, s.db, "list", sql.Named("status", p.Status), sql.Named("limit", p.Limit))
	if err != nil {
		return nil, fmt.Errorf("mysql: list events: %w", err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("mysql: list events: %w", err)
	}
	return recs, nil
}

// GetByDedupKey returns the record of the event written with dedupKey, or
// store.ErrNotFound.
func (s *Store) GetByDedupKey(ctx context.Context, dedupKey string) (store.Record, error) {
	var id uuid.UUID
	err := s.queryRow(ctx, s.db, "get_by_dedup_key", sql.Named("dedup_key", dedupKey)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Record{}, fmt.Errorf("%w: dedup key %q", store.ErrNotFound, dedupKey)
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("mysql: get event by dedup key: %w", err)
	}
	return s.Get(ctx, id)
}

// Relays reports the relays that hold leases, from the leased rows.
func (s *Store) Relays(ctx context.Context) ([]store.RelayLeases, error) {
	rows, err := s.query(ctx, s.db, "relays")
	if err != nil {
		return nil, fmt.Errorf("mysql: relays: %w", err)
	}
	defer rows.Close()
	var out []store.RelayLeases
	for rows.Next() {
		var r store.RelayLeases
		var first, last sql.NullTime
		if err := rows.Scan(&r.Owner, &r.Events, &first, &last); err != nil {
			return nil, fmt.Errorf("mysql: relays: %w", err)
		}
		r.FirstExpiry, r.LastExpiry = anyTime(first), anyTime(last)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: relays: %w", err)
	}
	return out, nil
}

// LastSeq returns the last seq given out (see store.Inspector): InnoDB's
// next auto-increment value, less one, which inserts that rolled back
// advanced too.
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("mysql: last seq: %w", err)
	}
	defer conn.Close()
	if !s.mariadb {
		// MySQL caches the tables' statistics, auto_increment with them.
		if _, err := conn.ExecContext(ctx, "set session information_schema_stats_expiry = 0"); err != nil {
			return 0, fmt.Errorf("mysql: last seq: %w", err)
		}
	}
	var n int64
	if err := s.queryRow(ctx, conn, "last_seq").Scan(&n); err != nil {
		return 0, fmt.Errorf("mysql: last seq: %w", err)
	}
	return n, nil
}

// recordRows are the rows scanRecords reads: *sql.Rows, or rows that read
// a column of their own before (endpointFirst).
type recordRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// scanRecords reads the rows of get, list or failed_list. A column that
// holds a value no event has (a zero date, headers that are no object, a
// count out of bounds) reads as the zero value, so that such a row never
// breaks the status tools that list it.
func scanRecords(rows recordRows) ([]store.Record, error) {
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		var r store.Record
		var aggType, aggID, eventType, payload, headers []byte
		var retries, attempts int64
		var availableAt, created, leaseExpires, processed sql.NullTime
		err := rows.Scan(&r.ID, &aggType, &aggID, &eventType, &payload, &r.DedupKey, &headers,
			&availableAt, &r.OutboxSeq, &r.Status, &retries, &attempts, &r.LastError, &r.LeaseOwner,
			&leaseExpires, &created, &processed)
		if err != nil {
			return nil, err
		}
		r.AggregateType, r.AggregateID, r.EventType = string(aggType), string(aggID), string(eventType)
		r.Payload = payload
		r.Headers, _ = sqlstore.DecodeHeaders(headers) // a problem is the claim's to report
		r.Retries = int(min(max(retries, 0), sqlstore.RetriesMax))
		r.Attempts = int(min(max(attempts, 0), sqlstore.RetriesMax+1))
		r.AvailableAt = anyTime(availableAt)
		r.CreatedAt = anyTime(created)
		r.LeaseExpiresAt = anyTime(leaseExpires)
		r.ProcessedAt = anyTime(processed)
		out = append(out, r)
	}
	return out, rows.Err()
}
