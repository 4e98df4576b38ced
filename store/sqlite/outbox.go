package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// Claim leases due events to p.Owner in one write transaction and returns
// them in sequence order. Write transactions run one at a time, so two
// claims never take the same event; they wait for each other instead of
// skipping each other's rows.
func (d *Driver) Claim(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error) {
	if err := checkLimit("claim", p.Limit); err != nil || p.Limit == 0 {
		return nil, err
	}
	query := d.sql.Get("claim")
	if p.Ordered {
		query = d.sql.Get("claim_ordered")
	}
	now := time.Now()
	afterAt := int64(math.MinInt64) // before every event
	if !p.After.IsZero() {
		afterAt = p.After.AvailableAt.UnixMicro()
	}
	var out []store.ClaimedEvent
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query,
			sql.Named("owner", p.Owner),
			sql.Named("limit", p.Limit),
			sql.Named("now", now.UnixMicro()),
			sql.Named("lease_until", now.Add(p.Lease).UnixMicro()),
			sql.Named("after_at", afterAt),
			sql.Named("after_seq", p.After.Seq),
			sql.Named("max_bytes", p.MaxBytes),
		)
		if err != nil {
			return err
		}
		defer rows.Close()
		// Each row scans into values of any type (SQLite keeps what it was
		// given in any column of a table that is not STRICT): a row the
		// store cannot read as an event is returned with ClaimedEvent.Invalid,
		// never failing the claim.
		var r claimedRow
		dest := []any{&r.d.ID, &r.d.OutboxSeq, &r.aggregateType, &r.aggregateID, &r.eventType, &r.payload, &r.headers, &r.attempts, &r.created, &r.available}
		for rows.Next() {
			r = claimedRow{}
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			out = append(out, r.delivery())
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OutboxSeq < out[j].OutboxSeq })
	return out, nil
}

// claimedRow is one row of a claim as scanned, each column that may hold
// a value of another type as any.
type claimedRow struct {
	d                                     store.ClaimedEvent
	aggregateType, aggregateID, eventType any
	payload, headers                      any
	attempts, created, available          any
}

// delivery is the row as a delivery, its problems in Invalid (the fields
// they name left zero).
func (r *claimedRow) delivery() store.ClaimedEvent {
	d := r.d
	var bad sqlstore.Problems
	var problem string
	d.AggregateType, problem = textValue(r.aggregateType)
	bad.Add("aggregate_type", problem)
	d.AggregateID, problem = textValue(r.aggregateID)
	bad.Add("aggregate_id", problem)
	d.EventType, problem = textValue(r.eventType)
	if problem == "" {
		problem = sqlstore.EventTypeProblem(d.EventType)
	}
	bad.Add("event_type", problem)
	payload, problem := textValue(r.payload)
	d.Payload = []byte(payload)
	bad.Add("payload", problem)
	headers, problem := textValue(r.headers)
	if problem == "" {
		d.Headers, problem = sqlstore.DecodeHeaders([]byte(headers))
	}
	bad.Add("headers", problem)
	// The claim counted this attempt (attempts + 1) when the value was in
	// bounds, and left any other value as it was.
	attempts, problem := integerValue(r.attempts)
	if problem == "" && (attempts < 1 || attempts > sqlstore.RetriesMax) {
		problem = fmt.Sprintf("%d is out of range (0 to %d)", attempts, sqlstore.RetriesMax)
	}
	if problem == "" {
		d.Attempt = int(attempts)
	}
	bad.Add("attempts", problem)
	d.CreatedAt, problem = timeValue(r.created)
	bad.Add("created_at", problem)
	d.AvailableAt, problem = timeValue(r.available)
	bad.Add("available_at", problem)
	if bad != nil {
		d.Invalid = bad.String()
	}
	return d
}

// textValue reads a text column: its text, or what is wrong with it.
func textValue(v any) (string, string) {
	switch v := v.(type) {
	case string:
		return v, sqlstore.TextProblem(v)
	case []byte:
		return "", "a blob is not text"
	case nil:
		return "", "null is not text"
	}
	return "", fmt.Sprintf("%v is not text", v)
}

// integerValue reads an integer column: its value, or what is wrong with
// it.
func integerValue(v any) (int64, string) {
	switch v := v.(type) {
	case int64:
		return v, ""
	case string:
		return 0, fmt.Sprintf("%.40q is not an integer", v)
	case []byte:
		return 0, "a blob is not an integer"
	case nil:
		return 0, "null is not an integer"
	}
	return 0, fmt.Sprintf("%v is not an integer", v)
}

// timeValue reads a time column (Unix microseconds): its time, or what is
// wrong with it (the zero time then).
func timeValue(v any) (time.Time, string) {
	n, problem := integerValue(v)
	if problem != "" {
		return time.Time{}, problem
	}
	t := time.UnixMicro(n)
	if problem := sqlstore.TimeProblem(t); problem != "" {
		return time.Time{}, problem
	}
	return t, ""
}

// settleRetry and settleFailure are the JSON rows of the settle queries.
type settleRetry struct {
	ID    uuid.UUID `json:"id"`
	At    int64     `json:"at"`
	Error string    `json:"error"`
}

type settleFailure struct {
	ID    uuid.UUID `json:"id"`
	Error string    `json:"error"`
}

// Settle records a batch of outcomes in one write transaction. Done ids are
// deleted (or marked done, with KeepDone) whoever holds them; retries,
// failures and releases apply only to events still leased to p.Owner. An id
// listed as done and as retried or failed is done. The events carry their
// lease (there are no claims to end: p.Ended is not used).
func (d *Driver) Settle(ctx context.Context, p store.SettleParams) error {
	if len(p.Done) == 0 && len(p.Retry) == 0 && len(p.Failed) == 0 && len(p.Release) == 0 {
		return nil
	}
	var done, retries, failures []byte
	var err error
	if len(p.Done) > 0 {
		if done, err = json.Marshal(p.Done); err != nil {
			return fmt.Errorf("sqlite: settle: %w", err)
		}
	}
	if len(p.Retry) > 0 {
		rs := make([]settleRetry, len(p.Retry))
		for i, r := range p.Retry {
			rs[i] = settleRetry{ID: r.ID, At: r.AvailableAt.UnixMicro(), Error: store.CleanErrorText(r.LastError)}
		}
		if retries, err = json.Marshal(rs); err != nil {
			return fmt.Errorf("sqlite: settle: %w", err)
		}
	}
	if len(p.Failed) > 0 {
		fs := make([]settleFailure, len(p.Failed))
		for i, f := range p.Failed {
			fs[i] = settleFailure{ID: f.ID, Error: store.CleanErrorText(f.LastError)}
		}
		if failures, err = json.Marshal(fs); err != nil {
			return fmt.Errorf("sqlite: settle: %w", err)
		}
	}
	now := sql.Named("now", time.Now().UnixMicro())
	owner := sql.Named("owner", p.Owner)
	err = d.inTx(ctx, func(tx *sql.Tx) error {
		if done != nil && p.DedupWindow > 0 {
			until := sql.Named("until", time.Now().Add(p.DedupWindow).UnixMicro())
			if _, err := tx.ExecContext(ctx, d.sql.Get("hold_keys"), sql.Named("ids", string(done)), until); err != nil {
				return err
			}
		}
		if done != nil {
			query := d.sql.Get("settle_delete")
			if p.KeepDone {
				query = d.sql.Get("settle_done")
			}
			if _, err := tx.ExecContext(ctx, query, sql.Named("ids", string(done)), now); err != nil {
				return err
			}
		}
		if retries != nil {
			if _, err := tx.ExecContext(ctx, d.sql.Get("settle_retry"), sql.Named("retries", string(retries)), owner); err != nil {
				return err
			}
		}
		if failures != nil {
			if _, err := tx.ExecContext(ctx, d.sql.Get("settle_failed"), sql.Named("failures", string(failures)), owner, now); err != nil {
				return err
			}
		}
		if len(p.Release) > 0 {
			ids := make([]uuid.UUID, len(p.Release))
			for i, r := range p.Release {
				ids[i] = r.ID
			}
			if _, err := tx.ExecContext(ctx, d.sql.Get("release"), idList(ids), owner, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: settle: %w", err)
	}
	return nil
}

// ExtendLease renews, until lease from now, the lease of those of ids still
// leased to owner, and returns them.
func (d *Driver) ExtendLease(ctx context.Context, owner string, ids []uuid.UUID, lease time.Duration) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var kept []uuid.UUID
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, d.sql.Get("extend_lease"), idList(ids), sql.Named("owner", owner),
			sql.Named("lease_until", time.Now().Add(lease).UnixMicro()))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				return err
			}
			kept = append(kept, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: extend lease: %w", err)
	}
	return kept, nil
}

// Release gives events leased to owner back to the queue at once, without
// counting the attempt.
func (d *Driver) Release(ctx context.Context, owner string, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := d.exec(ctx, "release", idList(ids), sql.Named("owner", owner),
		sql.Named("now", time.Now().UnixMicro())); err != nil {
		return fmt.Errorf("sqlite: release: %w", err)
	}
	return nil
}

// ReclaimExpired returns the events of crashed relays (expired leases) to
// the queue, or fails those that have used p.MaxAttempts, and reports how
// many of each relay's events it changed.
func (d *Driver) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]store.Reclaimed, error) {
	var out []store.Reclaimed
	now := sql.Named("now", time.Now().UnixMicro())
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, d.sql.Get("expired_owners"), now)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r store.Reclaimed
			if err := rows.Scan(&r.Owner, &r.Events); err != nil {
				return err
			}
			out = append(out, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, d.sql.Get("reclaim_expired"), sql.Named("max_attempts", p.MaxAttempts), now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: reclaim expired leases: %w", err)
	}
	return out, nil
}

// Expire is one step of retention (see store.Source): up to p.Limit
// delivered events processed before p.Before, handed to p.Keep first when
// set (read in (processed_at, id) order, given sorted by id, deleted only
// once Keep returned nil, those still done), then up to p.Limit dedup keys
// whose hold has ended (SettleParams.DedupWindow), each step a write
// transaction of its own. p.Limit is from 1 to store.HistoryBatchMax.
func (d *Driver) Expire(ctx context.Context, p store.ExpireParams) (store.ExpireResult, error) {
	res, err := sqlstore.Expire(ctx, expireSQL{d.Store}, p)
	if err != nil {
		return res, fmt.Errorf("sqlite: %w", err)
	}
	return res, nil
}

// deleteBefore runs a retention statement (purge_done,
// inbox_delete_processed): up to limit rows processed before before, oldest
// first, in a write transaction of its own. op names it in errors.
func (s *Store) deleteBefore(ctx context.Context, query, op string, before time.Time, limit int) (int, error) {
	if err := checkLimit(op, limit); err != nil || limit == 0 {
		return 0, err
	}
	n, err := s.exec(ctx, query, sql.Named("before", before.UnixMicro()), sql.Named("limit", limit))
	if err != nil {
		return 0, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return n, nil
}

// Stats counts events by status.
func (s *Store) Stats(ctx context.Context) (store.StatusCounts, error) {
	return s.stats(ctx, "stats")
}

// StatsUpTo counts events by status, each count stopping at limit (see
// store.Inspector).
func (s *Store) StatsUpTo(ctx context.Context, limit int64) (store.StatusCounts, error) {
	if limit < 1 {
		return store.StatusCounts{}, fmt.Errorf("sqlite: stats: limit %d: want at least 1", limit)
	}
	return s.stats(ctx, "stats_up_to", sql.Named("limit", limit), sql.Named("now", time.Now().UnixMicro()))
}

// stats runs a query of the counts (stats, stats_up_to).
func (s *Store) stats(ctx context.Context, query string, args ...any) (store.StatusCounts, error) {
	var st store.StatusCounts
	var oldest sql.NullInt64
	err := s.db.QueryRowContext(ctx, s.sql.Get(query), args...).Scan(&st.Pending, &st.Processing, &st.Done, &st.Failed, &oldest)
	if err != nil {
		return st, fmt.Errorf("sqlite: stats: %w", err)
	}
	if oldest.Valid {
		st.OldestPendingAge = max(0, time.Since(time.UnixMicro(oldest.Int64)))
	}
	return st, nil
}

// Get returns one event's record, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (store.Record, error) {
	rows, err := s.db.QueryContext(ctx, s.sql.Get("get"), sql.Named("id", id.String()))
	if err != nil {
		return store.Record{}, fmt.Errorf("sqlite: get event: %w", err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return store.Record{}, fmt.Errorf("sqlite: get event: %w", err)
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
	rows, err := s.db.QueryContext(ctx, s.sql.Get("list"), sql.Named("status", p.Status), sql.Named("limit", p.Limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", err)
	}
	return recs, nil
}

// GetByDedupKey returns the record of the event written with dedupKey, or
// store.ErrNotFound.
func (s *Store) GetByDedupKey(ctx context.Context, dedupKey string) (store.Record, error) {
	var id uuid.UUID
	err := s.db.QueryRowContext(ctx, s.sql.Get("get_by_dedup_key"), sql.Named("dedup_key", dedupKey)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Record{}, fmt.Errorf("%w: dedup key %q", store.ErrNotFound, dedupKey)
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("sqlite: get event by dedup key: %w", err)
	}
	return s.Get(ctx, id)
}

// Relays reports the relays that hold leases, from the leased rows.
func (s *Store) Relays(ctx context.Context) ([]store.RelayLeases, error) {
	rows, err := s.db.QueryContext(ctx, s.sql.Get("relays"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: relays: %w", err)
	}
	defer rows.Close()
	var out []store.RelayLeases
	for rows.Next() {
		var r store.RelayLeases
		var first, last int64
		if err := rows.Scan(&r.Owner, &r.Events, &first, &last); err != nil {
			return nil, fmt.Errorf("sqlite: relays: %w", err)
		}
		r.FirstExpiry, r.LastExpiry = time.UnixMicro(first), time.UnixMicro(last)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: relays: %w", err)
	}
	return out, nil
}

// LastSeq returns the last seq given out (see store.Inspector).
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, s.sql.Get("last_seq")).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: last seq: %w", err)
	}
	return n, nil
}

// exec runs a named statement in a write transaction of its own and returns
// the number of rows it changed.
func (s *Store) exec(ctx context.Context, name string, args ...any) (int, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = rowsAffected(tx.ExecContext(ctx, s.sql.Get(name), args...))
		return err
	})
	return int(n), err
}

// idList is the :ids parameter, a JSON array of ids.
func idList(ids []uuid.UUID) sql.NamedArg {
	b, _ := json.Marshal(ids) // uuid.UUID marshals as a string; cannot fail
	return sql.Named("ids", string(b))
}

// checkLimit refuses negative limits: SQLite would read them as "no limit".
func checkLimit(op string, limit int) error {
	if limit < 0 {
		return fmt.Errorf("sqlite: %s: limit %d is negative", op, limit)
	}
	return nil
}

// recordRows are the rows scanRecords reads: *sql.Rows, or rows that read
// a column of their own before (endpointFirst).
type recordRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// scanRecords reads the rows of get, list or failed_list. Columns that may
// hold a value of another type (SQLite keeps what it was given) scan as
// any and read as the zero value when they are not what they should be,
// so that such a row never breaks the status tools that list it.
func scanRecords(rows recordRows) ([]store.Record, error) {
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		var r store.Record
		var aggType, aggID, eventType, payload, headers, retries, attempts, availableAt, created, leaseExpires, processed any
		err := rows.Scan(&r.ID, &aggType, &aggID, &eventType, &payload, &r.DedupKey, &headers,
			&availableAt, &r.OutboxSeq, &r.Status, &retries, &attempts, &r.LastError, &r.LeaseOwner,
			&leaseExpires, &created, &processed)
		if err != nil {
			return nil, err
		}
		r.AggregateType, _ = textValue(aggType)
		r.AggregateID, _ = textValue(aggID)
		r.EventType, _ = textValue(eventType)
		text, _ := textValue(payload)
		r.Payload = []byte(text)
		text, _ = textValue(headers)
		r.Headers, _ = sqlstore.DecodeHeaders([]byte(text)) // a problem is the claim's to report
		n, _ := integerValue(retries)
		r.Retries = int(min(max(n, 0), sqlstore.RetriesMax))
		n, _ = integerValue(attempts)
		r.Attempts = int(min(max(n, 0), sqlstore.RetriesMax+1))
		r.AvailableAt, _ = timeValue(availableAt)
		r.CreatedAt, _ = timeValue(created)
		r.LeaseExpiresAt, _ = timeValue(leaseExpires)
		r.ProcessedAt, _ = timeValue(processed)
		out = append(out, r)
	}
	return out, rows.Err()
}

// anyTime reads a time column of a read path (Unix microseconds): the zero
// time for NULL and for a value that is not a time (timeValue's problems).
func anyTime(v any) time.Time {
	t, _ := timeValue(v)
	return t
}

// microTime reads a nullable time column (Unix microseconds): the zero
// time for NULL.
func microTime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMicro(n.Int64)
}
