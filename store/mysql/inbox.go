package mysql

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// The inbox methods below implement store.Inbox[*sql.Tx]; package store
// documents the contract of each, and postboxtest/inboxtest checks it. The
// steps are sqlstore.Inbox's; inboxDialect runs them on inbox.sql, in
// transactions at READ COMMITTED that lock the event's row first.

//go:embed inbox.sql
var inboxSQL string

// InboxProcess writes ev's inbox row as done and runs fn in one
// transaction (see store.Inbox).
func (d *Driver) InboxProcess(ctx context.Context, ev *store.InboxEvent, fn func(ctx context.Context, tx *sql.Tx) error) (store.InboxResult, error) {
	return d.inbox.Process(ctx, ev, fn)
}

// InboxClaim writes ev's inbox row pending, leased to p.Owner, and commits.
func (d *Driver) InboxClaim(ctx context.Context, p *store.InboxClaimParams) (store.InboxResult, error) {
	return d.inbox.Claim(ctx, p)
}

// InboxComplete marks a claimed row done and runs fn (if not nil) in one
// transaction.
func (d *Driver) InboxComplete(ctx context.Context, p *store.InboxCompleteParams, fn func(ctx context.Context, tx *sql.Tx) error) (store.InboxResult, error) {
	return d.inbox.Complete(ctx, p, fn)
}

// InboxFail makes a claimed row failed, free for the next delivery.
func (d *Driver) InboxFail(ctx context.Context, p *store.InboxFailParams) (store.InboxResult, error) {
	return d.inbox.Fail(ctx, p)
}

// InboxGet returns one inbox row, or store.ErrNotFound.
func (s *Store) InboxGet(ctx context.Context, id uuid.UUID) (store.InboxRecord, error) {
	rows, err := s.query(ctx, s.db, "inbox_get", sql.Named("id", id.String()))
	if err != nil {
		return store.InboxRecord{}, fmt.Errorf("mysql: inbox get: %w", err)
	}
	recs, err := scanInboxRecords(rows)
	if err != nil {
		return store.InboxRecord{}, fmt.Errorf("mysql: inbox get: %w", err)
	}
	if len(recs) == 0 {
		return store.InboxRecord{}, fmt.Errorf("%w: inbox event %s", store.ErrNotFound, id)
	}
	return recs[0], nil
}

// InboxList returns the most recent inbox rows of a status (see
// store.InboxReader).
func (s *Store) InboxList(ctx context.Context, p store.InboxListParams) ([]store.InboxRecord, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	query := "inbox_list_open"
	if p.Status == store.StatusDone {
		query = "inbox_list_done"
	}
	rows, err := s.query(ctx, s.db, query, sql.Named("status", p.Status), sql.Named("limit", p.Limit))
	if err != nil {
		return nil, fmt.Errorf("mysql: inbox list: %w", err)
	}
	recs, err := scanInboxRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("mysql: inbox list: %w", err)
	}
	return recs, nil
}

// scanInboxRecords reads rows in the columns of inbox_get, and closes them.
func scanInboxRecords(rows *sql.Rows) ([]store.InboxRecord, error) {
	defer rows.Close()
	var out []store.InboxRecord
	for rows.Next() {
		var r store.InboxRecord
		var eventType, aggType, aggID, signature []byte
		var attempts int64
		var leaseExpires, received, processed sql.NullTime
		err := rows.Scan(&r.ID, &eventType, &aggType, &aggID, &r.Seq, &r.Payload, &signature,
			&r.Status, &attempts, &r.LastError, &r.LeaseOwner, &leaseExpires, &received, &processed)
		if err != nil {
			return nil, err
		}
		r.EventType, r.AggregateType, r.AggregateID, r.Signature = string(eventType), string(aggType), string(aggID), string(signature)
		r.Attempts = int(min(max(attempts, 0), sqlstore.RetriesMax+1))
		r.ReceivedAt, r.LeaseExpiresAt, r.ProcessedAt = anyTime(received), anyTime(leaseExpires), anyTime(processed)
		out = append(out, r)
	}
	return out, rows.Err()
}

// InboxDeleteProcessedBefore deletes up to limit done rows processed before
// the given time, oldest first, in a transaction of its own.
func (d *Driver) InboxDeleteProcessedBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkLimit("inbox delete processed", limit); err != nil || limit == 0 {
		return 0, err
	}
	n, err := d.exec(ctx, "inbox_delete_processed", sql.Named("before", before.UTC()), sql.Named("limit", limit))
	if err != nil {
		return 0, fmt.Errorf("mysql: inbox delete processed: %w", err)
	}
	return n, nil
}

// errDeadlock is InnoDB's error of a transaction it rolled back to break a
// deadlock.
const errDeadlock = 1213

// isDeadlock reports errDeadlock. Deliveries of one event whose first
// insert rolls back (a failed handler run) can deadlock on the gap the row
// leaves: the inbox steps then run again (sqlstore.Inbox.RetryTakeOn).
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDeadlock
}

// inboxDialect runs the statements of inbox.sql for sqlstore.Inbox, in
// the store's transactions.
type inboxDialect struct{ s *Store }

func (d inboxDialect) Begin(ctx context.Context) (*sql.Tx, error) { return d.s.tx.Begin(ctx) }

func (d inboxDialect) Commit(ctx context.Context, tx *sql.Tx) error { return d.s.tx.Commit(ctx, tx) }

func (d inboxDialect) Rollback(ctx context.Context, tx *sql.Tx) error {
	return d.s.tx.Rollback(ctx, tx)
}

// inboxRow is the locked row of an event, as inbox_lock reads it.
type inboxRow struct {
	status       string
	leaseExpires sql.NullTime
}

// free reports whether the row may be taken over at now: not done, and not
// leased (a lease that is not a time, a zero date, has ended).
func (r inboxRow) free(now time.Time) bool {
	return r.status != store.StatusDone && (!r.leaseExpires.Valid || r.leaseExpires.Time.Before(now))
}

// write writes ev's row with args: taken over (inbox_take_over) when it
// is there and free, inserted when new (inbox_insert); it reports whether
// it wrote it. A row that is there is locked by a locking read first (a
// record lock: the deliveries of one event queue on it); a new one by the
// insert, and one that a transaction inserted meanwhile by the insert's
// duplicate key, after which it is read again.
func (d inboxDialect) write(ctx context.Context, tx *sql.Tx, id uuid.UUID, now time.Time, args []any) (bool, error) {
	for {
		var r inboxRow
		var attempts int64
		err := d.s.queryRow(ctx, tx, "inbox_lock", sql.Named("id", id.String())).Scan(&r.status, &r.leaseExpires, &attempts)
		switch {
		case err == nil:
			if !r.free(now) {
				return false, nil
			}
			_, err = d.s.execN(ctx, tx, "inbox_take_over", args...)
			return err == nil, err
		case !errors.Is(err, sql.ErrNoRows):
			return false, err
		}
		n, err := d.s.execN(ctx, tx, "inbox_insert", args...)
		if err != nil || n == 1 {
			return n == 1, err
		}
	}
}

func (d inboxDialect) Take(ctx context.Context, tx *sql.Tx, ev *store.InboxEvent, status, owner string, lease time.Duration) (int, bool, error) {
	now := time.Now().UTC()
	var leaseUntil any
	if status == store.StatusPending {
		leaseUntil = now.Add(max(lease, time.Microsecond))
	}
	ok, err := d.write(ctx, tx, ev.ID, now, eventArgs(ev, now, sql.Named("status", status),
		sql.Named("owner", sqlstore.NullText(owner)), sql.Named("lease_until", leaseUntil), sql.Named("error", nil)))
	if err != nil || !ok {
		return 0, false, err
	}
	var attempts int
	err = d.s.queryRow(ctx, tx, "inbox_attempts", sql.Named("id", ev.ID.String())).Scan(&attempts)
	return attempts, err == nil, err
}

func (d inboxDialect) IsDone(ctx context.Context, tx *sql.Tx, id uuid.UUID) (bool, error) {
	var status string
	var lease sql.NullTime
	var attempts int64
	err := d.s.queryRow(ctx, tx, "inbox_lock", sql.Named("id", id.String())).Scan(&status, &lease, &attempts)
	return status == store.StatusDone, err
}

// Advance moves the aggregate's number from seq-1 to seq, or writes the
// first one. It locks the aggregate's row with a locking read first
// (inbox_seq_lock: the latest committed number), so that it compares the
// number it will change; a first row another transaction wrote meanwhile
// (a duplicate key) is read again, locked.
func (d inboxDialect) Advance(ctx context.Context, tx *sql.Tx, aggType, aggID string, seq int64) (bool, int64, error) {
	args := []any{sql.Named("aggregate_type", aggType), sql.Named("aggregate_id", aggID),
		sql.Named("seq", seq), sql.Named("now", time.Now().UTC())}
	for {
		var last int64
		err := d.s.queryRow(ctx, tx, "inbox_seq_lock", args...).Scan(&last)
		switch {
		case err == nil:
			if last != seq-1 {
				return false, last, nil
			}
			_, err := d.s.execN(ctx, tx, "inbox_advance", args...)
			return err == nil, last, err
		case !errors.Is(err, sql.ErrNoRows):
			return false, 0, err
		case seq != 1:
			return false, 0, nil
		}
		_, err = d.s.execN(ctx, tx, "inbox_first_seq", args...)
		if !isDuplicate(err) {
			return err == nil, 0, err
		}
	}
}

func (d inboxDialect) LastSeq(ctx context.Context, tx *sql.Tx, aggType, aggID string) (int64, error) {
	var last int64
	err := d.s.queryRow(ctx, tx, "inbox_last_seq",
		sql.Named("aggregate_type", aggType), sql.Named("aggregate_id", aggID)).Scan(&last)
	return last, err
}

func (d inboxDialect) Complete(ctx context.Context, tx *sql.Tx, id uuid.UUID, owner string) (bool, error) {
	n, err := d.s.execN(ctx, tx, "inbox_complete",
		sql.Named("id", id.String()), sql.Named("owner", owner), sql.Named("now", time.Now().UTC()))
	return n > 0, err
}

func (d inboxDialect) Fail(ctx context.Context, id uuid.UUID, owner, errText string) (bool, error) {
	n, err := d.s.exec(ctx, "inbox_fail", sql.Named("id", id.String()), sql.Named("owner", owner), sql.Named("error", errText))
	return n > 0, err
}

// RecordFailure runs in a transaction of its own: the row is written, or
// taken over, failed, unless another delivery processed or claimed the
// event meanwhile.
func (d inboxDialect) RecordFailure(ctx context.Context, ev *store.InboxEvent, errText string) error {
	return d.s.inTx(ctx, func(tx *sql.Tx) error {
		now := time.Now().UTC()
		_, err := d.write(ctx, tx, ev.ID, now, eventArgs(ev, now, sql.Named("status", store.StatusFailed),
			sql.Named("owner", nil), sql.Named("lease_until", nil), sql.Named("error", errText)))
		return err
	})
}

// eventArgs are the parameters of a statement that writes ev's row at
// now, followed by more.
func eventArgs(ev *store.InboxEvent, now time.Time, more ...any) []any {
	return append([]any{
		sql.Named("id", ev.ID.String()),
		sql.Named("now", now),
		sql.Named("payload", nullPayload(ev.Payload)),
		sql.Named("signature", sqlstore.NullText(ev.Signature)),
		sql.Named("event_type", ev.EventType),
		sql.Named("aggregate_type", ev.AggregateType),
		sql.Named("aggregate_id", ev.AggregateID),
		sql.Named("seq", sqlstore.NullSeq(ev.Seq)),
	}, more...)
}

// nullPayload is the payload as JSON text, or SQL NULL when it is empty
// (no JSON value is empty, so an empty payload can only mean none).
func nullPayload(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}
