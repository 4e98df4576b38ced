package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// Claim leases due events to p.Owner and returns them in sequence order.
// It writes one lease row for the batch and never updates the events; claims
// take turns on an advisory lock, in one round trip with the claim. The
// lease commits asynchronously (see relay_async_commit in queries.sql).
//
// An ordered claim needs the index MigrateOrdered builds: without it, Claim
// returns ErrOrderedIndexMissing. The check runs before the store's first
// ordered claim, and again after an ordered claim that failed.
func (d *Driver) Claim(ctx context.Context, p store.ClaimParams) (out []store.ClaimedEvent, err error) {
	if p.Ordered {
		return d.claimOrdered(ctx, p)
	}
	after := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	if !p.After.IsZero() {
		after = pgtype.Timestamptz{Time: p.After.AvailableAt, Valid: true}
	}
	if p.MaxBytes > 0 {
		return d.claim(ctx, d.sql.Get("claim_bounded"), p, nil, nil, after, p.After.Seq, p.MaxBytes)
	}
	return d.claim(ctx, d.sql.Get("claim"), p, nil, nil, after, p.After.Seq)
}

// claimPresize bounds the room claim makes for its deliveries before it
// reads them.
const claimPresize = 4096

// claim runs one of the claim queries for p (its $1, $2 and $3: owner,
// limit, lease) with the query's further args, in the claims' turn
// (claim_lock), and returns the events it leased in sequence order. The
// query's columns after the event's are scanned into extra, and each row is
// passed to seen (when not nil) once scanned.
func (s *Store) claim(ctx context.Context, query string, p store.ClaimParams, extra []any, seen func(store.ClaimedEvent), args ...any) (out []store.ClaimedEvent, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim: %w", err)
	}
	defer conn.Release()
	batch := &pgx.Batch{}
	batch.Queue(s.sql.Get("relay_async_commit"))
	if lock, statement, ok := claimTimeouts(ctx); ok {
		batch.Queue(s.sql.Get("claim_timeouts"), strconv.FormatInt(lock.Milliseconds(), 10), strconv.FormatInt(statement.Milliseconds(), 10))
	}
	batch.Queue(s.sql.Get("claim_lock"), s.lockKey("claim"))
	batch.Queue(query, append([]any{p.Owner, p.Limit, p.Lease.Milliseconds()}, args...)...)
	results := conn.SendBatch(ctx, batch)
	defer results.Close()
	for range batch.Len() - 1 {
		if _, err := results.Exec(); err != nil {
			return nil, claimError(err)
		}
	}
	rows, err := results.Query()
	if err != nil {
		return nil, claimError(err)
	}
	// Sized for a full claim (up to claimPresize): grown by appends, the
	// slice of deliveries (some 200 bytes each) was most of a claim's
	// allocations.
	// Each row scans into r through one dest, made once per claim, into
	// types that take every value the columns hold (infinite times
	// included): a row the store cannot read as an event is returned with
	// ClaimedEvent.Invalid, never failing the claim, which has leased it.
	var r claimedRow
	// The id scans as 16 bytes: scanned as a uuid.UUID (an sql.Scanner)
	// it would go through its text form.
	dest := append([]any{(*[16]byte)(&r.d.ID), &r.d.OutboxSeq, &r.d.AggregateType, &r.d.AggregateID, &r.d.EventType, &r.d.Payload, &r.headers, &r.attempt, &r.created, &r.available, &r.d.Lease}, extra...)
	out, err = pgx.AppendRows(make([]store.ClaimedEvent, 0, min(p.Limit, claimPresize)), rows, func(row pgx.CollectableRow) (store.ClaimedEvent, error) {
		r = claimedRow{}
		if err := row.Scan(dest...); err != nil {
			return r.d, err
		}
		d := r.delivery()
		if seen != nil {
			seen(d)
		}
		return d, nil
	})
	if err != nil {
		return nil, claimError(err)
	}
	if err := results.Close(); err != nil {
		return nil, claimError(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OutboxSeq < out[j].OutboxSeq })
	return out, nil
}

// claimTimeouts returns the bounds of a claim on the server (claim_timeouts)
// within ctx's deadline, once a connection is held: three tenths of the
// time left for the wait for the claims' turn, six tenths for each
// statement, so that the server cancels a slow claim, which then leases
// nothing, before the client gives up on it, not knowing whether it
// committed. ok is false without a deadline; a deadline too near for a
// claim to finish still gets a millisecond, and fails on the server.
func claimTimeouts(ctx context.Context) (lock, statement time.Duration, ok bool) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0, 0, false
	}
	left := time.Until(deadline)
	return max(left*3/10, time.Millisecond), max(left*6/10, time.Millisecond), true
}

// claimError is err, of a claim, as the claim's error: a claim the server
// cancelled for its bounds (claim_timeouts) is also
// context.DeadlineExceeded, as the relay's deadline would have been.
func claimError(err error) error {
	var pgErr *pgconn.PgError
	// query_canceled (statement_timeout), lock_not_available (lock_timeout)
	if errors.As(err, &pgErr) && (pgErr.Code == "57014" || pgErr.Code == "55P03") {
		return fmt.Errorf("postgres: claim: %w (%w)", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("postgres: claim: %w", err)
}

// claimedRow is one row of a claim as scanned: the columns that may hold
// values no event has in types that take them.
type claimedRow struct {
	d                  store.ClaimedEvent
	headers            []byte
	attempt            int64 // retries + 1, as the claim counted it
	created, available pgtype.Timestamptz
}

// delivery is the row as a delivery, its problems in Invalid (the fields
// they name left zero).
func (r *claimedRow) delivery() store.ClaimedEvent {
	d := r.d
	var bad sqlstore.Problems
	var problem string
	d.Attempt, problem = sqlstore.Attempt(r.attempt - 1)
	bad.Add("retries", problem)
	d.CreatedAt, problem = readTime(r.created)
	bad.Add("created_at", problem)
	d.AvailableAt, problem = readTime(r.available)
	bad.Add("available_at", problem)
	bad.Add("event_type", sqlstore.EventTypeProblem(d.EventType))
	d.Headers, problem = sqlstore.DecodeHeaders(r.headers)
	bad.Add("headers", problem)
	if bad != nil {
		d.Invalid = bad.String()
	}
	return d
}

// readTime reads a timestamptz column as a row's time, and says what is
// wrong with it (the zero time then): an infinity, NULL, a year out of
// range (see sqlstore.TimeProblem).
func readTime(t pgtype.Timestamptz) (time.Time, string) {
	switch {
	case t.InfinityModifier == pgtype.Infinity:
		return time.Time{}, "infinity is not a time"
	case t.InfinityModifier == pgtype.NegativeInfinity:
		return time.Time{}, "-infinity is not a time"
	case !t.Valid:
		return time.Time{}, "null is not a time"
	}
	if problem := sqlstore.TimeProblem(t.Time); problem != "" {
		return time.Time{}, problem
	}
	return t.Time, ""
}

// Settle records a batch of outcomes in one statement, committed
// asynchronously like a claim: a server crash may forget it, and the events
// are then delivered again. A settle that releases events commits
// synchronously: a release forgotten by a crash would count an attempt when
// the lease expires. Error texts are cleaned (store.CleanErrorText).
func (d *Driver) Settle(ctx context.Context, p store.SettleParams) error {
	return d.settle(ctx, p, "settle")
}

// settle is Settle; op names it in errors.
func (s *Store) settle(ctx context.Context, p store.SettleParams, op string) error {
	retryIDs := make([]uuid.UUID, len(p.Retry))
	retryAt := make([]time.Time, len(p.Retry))
	retryErr := make([]string, len(p.Retry))
	// The events that leave their lease, and the claim of each (0: any).
	leaving := make([]uuid.UUID, 0, len(p.Retry)+len(p.Failed)+len(p.Release))
	leavingClaims := make([]int64, 0, cap(leaving))
	for i, r := range p.Retry {
		retryIDs[i], retryAt[i], retryErr[i] = r.ID, r.AvailableAt, store.CleanErrorText(r.LastError)
		leaving, leavingClaims = append(leaving, r.ID), append(leavingClaims, r.Lease)
	}
	failIDs := make([]uuid.UUID, len(p.Failed))
	failErr := make([]string, len(p.Failed))
	for i, f := range p.Failed {
		failIDs[i], failErr[i] = f.ID, store.CleanErrorText(f.LastError)
		leaving, leavingClaims = append(leaving, f.ID), append(leavingClaims, f.Lease)
	}
	for _, r := range p.Release {
		leaving, leavingClaims = append(leaving, r.ID), append(leavingClaims, r.Lease)
	}
	ended := p.Ended
	if ended == nil {
		ended = []int64{}
	}
	batch := &pgx.Batch{}
	if len(p.Release) == 0 {
		batch.Queue(s.sql.Get("relay_async_commit"))
	}
	batch.Queue(s.sql.Get("lease_lock"), p.Owner)
	batch.Queue(s.sql.Get("settle"), p.Owner, uuidArray(p.Done), uuidArray(retryIDs), retryAt, retryErr,
		uuidArray(failIDs), failErr, uuidArray(leaving), p.KeepDone, ended, leavingClaims, p.DedupWindow.Milliseconds())
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	return nil
}

// ExtendLease renews owner's leases (every event it holds, which includes
// ids) and returns those of ids that it still holds.
func (d *Driver) ExtendLease(ctx context.Context, owner string, ids []uuid.UUID, lease time.Duration) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	// The lease lock and the renewal: one round trip, one implicit
	// transaction.
	batch := &pgx.Batch{}
	batch.Queue(d.sql.Get("lease_lock"), owner)
	batch.Queue(d.sql.Get("extend_lease"), owner, lease.Milliseconds(), ids)
	results := d.pool.SendBatch(ctx, batch)
	defer results.Close()
	held := map[uuid.UUID]bool{}
	_, err := results.Exec()
	if err == nil {
		var rows pgx.Rows
		if rows, err = results.Query(); err == nil {
			var leased []uuid.UUID
			_, err = pgx.ForEachRow(rows, []any{&leased}, func() error {
				for _, id := range leased {
					held[id] = true
				}
				return nil
			})
		}
	}
	if err == nil {
		err = results.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: extend lease: %w", err)
	}
	kept := make([]uuid.UUID, 0, len(ids))
	for _, id := range ids {
		if held[id] {
			kept = append(kept, id)
		}
	}
	return kept, nil
}

// Release gives events leased to owner back to the queue without counting
// the attempt: a settle with releases alone (committed synchronously).
func (d *Driver) Release(ctx context.Context, owner string, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	released := make([]store.Released, len(ids))
	for i, id := range ids {
		released[i] = store.Released{ID: id}
	}
	return d.settle(ctx, store.SettleParams{Owner: owner, Release: released}, "release")
}

// ReclaimExpired returns the events of crashed relays to the queue, and
// reports how many of each relay's events it changed. It takes the lease
// lock of each expired relay first, in one order, in a transaction of its
// own (two round trips; it runs a few times per lease period).
func (d *Driver) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]store.Reclaimed, error) {
	var out []store.Reclaimed
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, d.sql.Get("reclaim_lock"))
		if err != nil {
			return err
		}
		owners, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(owners) == 0 {
			return err
		}
		rows, err = tx.Query(ctx, d.sql.Get("reclaim_expired"), p.MaxAttempts, owners)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Reclaimed, error) {
			var r store.Reclaimed
			err := row.Scan(&r.Owner, &r.Events)
			return r, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: reclaim expired leases: %w", err)
	}
	return out, nil
}

// Expire is one step of retention (see store.Source): on a partitioned
// outbox, its partitions' upkeep; on a plain table, up to p.Limit
// delivered events processed before p.Before, handed to p.Keep first when
// set (read in (processed_at, id) order, given sorted by id, deleted only
// once Keep returned nil, those still done), then up to p.Limit dedup keys
// whose hold has ended (SettleParams.DedupWindow). p.Limit is from 1 to
// store.HistoryBatchMax.
func (d *Driver) Expire(ctx context.Context, p store.ExpireParams) (store.ExpireResult, error) {
	if err := sqlstore.CheckExpireLimit(p.Limit); err != nil {
		return store.ExpireResult{}, fmt.Errorf("postgres: %w", err)
	}
	res, partitioned, err := d.expirePartitions(ctx, p)
	if partitioned || err != nil {
		return res, err
	}
	res, err = sqlstore.Expire(ctx, expireSQL{d.Store}, p)
	if err != nil {
		return res, fmt.Errorf("postgres: %w", err)
	}
	return res, nil
}

// deleteBefore runs a retention statement (purge_done,
// inbox_delete_processed): up to limit rows processed before before,
// oldest first. op names it in errors.
func (s *Store) deleteBefore(ctx context.Context, query, op string, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, s.sql.Get(query), before, limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: %s: %w", op, err)
	}
	return int(tag.RowsAffected()), nil
}

// Stats counts events by status.
func (s *Store) Stats(ctx context.Context) (store.StatusCounts, error) {
	return s.stats(ctx, "stats")
}

// StatsUpTo counts events by status, each count stopping at limit (see
// store.Inspector).
func (s *Store) StatsUpTo(ctx context.Context, limit int64) (store.StatusCounts, error) {
	if limit < 1 {
		return store.StatusCounts{}, fmt.Errorf("postgres: stats: limit %d: want at least 1", limit)
	}
	return s.stats(ctx, "stats_up_to", limit)
}

// stats runs a query of the counts (stats, stats_up_to).
func (s *Store) stats(ctx context.Context, query string, args ...any) (store.StatusCounts, error) {
	var st store.StatusCounts
	var age float64
	err := s.pool.QueryRow(ctx, s.sql.Get(query), args...).Scan(&st.Pending, &st.Processing, &st.Done, &st.Failed, &age)
	if err != nil {
		return st, fmt.Errorf("postgres: stats: %w", err)
	}
	st.OldestPendingAge = time.Duration(age * float64(time.Second))
	return st, nil
}

// Get returns one event's record, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (store.Record, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("get"), id)
	if err != nil {
		return store.Record{}, fmt.Errorf("postgres: get event: %w", err)
	}
	rec, err := pgx.CollectExactlyOneRow(rows, scanRecord)
	if errors.Is(err, pgx.ErrNoRows) {
		return rec, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	return rec, err
}

// List returns records with the given status, in sequence order.
func (s *Store) List(ctx context.Context, p store.ListParams) ([]store.Record, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("list"), p.Status, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list events: %w", err)
	}
	return pgx.CollectRows(rows, scanRecord)
}

// GetByDedupKey returns the record of the event written with dedupKey, or
// store.ErrNotFound.
func (s *Store) GetByDedupKey(ctx context.Context, dedupKey string) (store.Record, error) {
	var id uuid.UUID
	err := s.pool.QueryRow(ctx, s.sql.Get("get_by_dedup_key"), dedupKey).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Record{}, fmt.Errorf("%w: dedup key %q", store.ErrNotFound, dedupKey)
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("postgres: get event by dedup key: %w", err)
	}
	return s.Get(ctx, id)
}

// Relays reports the relays that hold leases, from outbox_leases.
func (s *Store) Relays(ctx context.Context) ([]store.RelayLeases, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("relays"))
	if err != nil {
		return nil, fmt.Errorf("postgres: relays: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.RelayLeases, error) {
		var r store.RelayLeases
		err := row.Scan(&r.Owner, &r.Events, &r.FirstExpiry, &r.LastExpiry)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: relays: %w", err)
	}
	return out, nil
}

// LastSeq returns the value of the outbox's sequence (see store.Inspector).
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, s.sql.Get("last_seq"), s.Table("outbox_events")).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: last seq: %w", err)
	}
	return n, nil
}

// scanRecord reads one row of get, list or failed_list. Its times and
// headers scan into types that take every value (an infinity, which an older schema or a
// plain-SQL producer may have written, reads as the zero time), so that
// such a row never breaks the status tools that list it.
func scanRecord(row pgx.CollectableRow) (store.Record, error) {
	var r store.Record
	var headers []byte
	var available, leaseExpires, created, processed pgtype.Timestamptz
	err := row.Scan(&r.ID, &r.AggregateType, &r.AggregateID, &r.EventType, &r.Payload, &r.DedupKey, &headers,
		&available, &r.OutboxSeq, &r.Status, &r.Retries, &r.Attempts, &r.LastError, &r.LeaseOwner,
		&leaseExpires, &created, &processed)
	r.Headers, _ = sqlstore.DecodeHeaders(headers) // a problem is the claim's to report
	r.AvailableAt, r.LeaseExpiresAt = finiteTime(available), finiteTime(leaseExpires)
	r.CreatedAt, r.ProcessedAt = finiteTime(created), finiteTime(processed)
	return r, err
}

// finiteTime is t, or the zero time for NULL and the infinities.
func finiteTime(t pgtype.Timestamptz) time.Time {
	if !t.Valid || t.InfinityModifier != pgtype.Finite {
		return time.Time{}
	}
	return t.Time
}

// rawIDs converts ids to the form pgx encodes without going through text.
func rawIDs(ids []uuid.UUID) [][16]byte {
	out := make([][16]byte, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
