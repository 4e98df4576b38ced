package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// The inbox methods below implement store.Inbox[*sql.Tx]; package store
// documents the contract of each, and postboxtest/inboxtest checks it. The steps
// are sqlstore.Inbox's; inboxDialect runs them on inbox.sql.
//
// Where the PostgreSQL store waits on the event's row lock, this one waits
// for the write lock: every method that writes runs in a read-write
// transaction of DB(), which queues for the Store's write lock and begins
// with BEGIN IMMEDIATE. Two deliveries of one event therefore run one after
// the other, and the second sees the first's committed row: Done if it
// committed, a free failed row to take over if it rolled back. Between
// processes SQLite's lock (and its busy timeout) does the same.

//go:embed inbox.sql
var inboxSQL string

// InboxProcess writes ev's inbox row as done and runs fn in one write
// transaction. fn runs while the store's write lock is held: the other
// writers of the database wait for it, so keep it short, and never begin
// another write transaction of DB() inside it (it would wait for this one).
func (d *Driver) InboxProcess(ctx context.Context, ev *store.InboxEvent, fn func(ctx context.Context, tx *sql.Tx) error) (store.InboxResult, error) {
	return d.inbox.Process(ctx, ev, handler(fn))
}

// InboxClaim writes ev's inbox row pending, leased to p.Owner, and commits.
func (d *Driver) InboxClaim(ctx context.Context, p *store.InboxClaimParams) (store.InboxResult, error) {
	return d.inbox.Claim(ctx, p)
}

// InboxComplete marks a claimed row done and runs fn (if not nil) in one
// write transaction. Like InboxProcess, fn runs under the write lock.
func (d *Driver) InboxComplete(ctx context.Context, p *store.InboxCompleteParams, fn func(ctx context.Context, tx *sql.Tx) error) (store.InboxResult, error) {
	return d.inbox.Complete(ctx, p, handler(fn))
}

// InboxFail makes a claimed row failed, free for the next delivery.
func (d *Driver) InboxFail(ctx context.Context, p *store.InboxFailParams) (store.InboxResult, error) {
	return d.inbox.Fail(ctx, p)
}

// InboxGet returns one inbox row, or store.ErrNotFound.
func (s *Store) InboxGet(ctx context.Context, id uuid.UUID) (store.InboxRecord, error) {
	rows, err := s.db.QueryContext(ctx, s.sql.Get("inbox_get"), sql.Named("id", id.String()))
	if err != nil {
		return store.InboxRecord{}, fmt.Errorf("sqlite: inbox get: %w", err)
	}
	recs, err := scanInboxRecords(rows)
	if err != nil {
		return store.InboxRecord{}, fmt.Errorf("sqlite: inbox get: %w", err)
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
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	query := "inbox_list_open"
	if p.Status == store.StatusDone {
		query = "inbox_list_done"
	}
	rows, err := s.db.QueryContext(ctx, s.sql.Get(query), sql.Named("status", p.Status), sql.Named("limit", p.Limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: inbox list: %w", err)
	}
	recs, err := scanInboxRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: inbox list: %w", err)
	}
	return recs, nil
}

// scanInboxRecords reads rows in the columns of inbox_get, and closes them.
func scanInboxRecords(rows *sql.Rows) ([]store.InboxRecord, error) {
	defer rows.Close()
	var out []store.InboxRecord
	for rows.Next() {
		var r store.InboxRecord
		// Integers and times as any: a value of another type (SQLite
		// keeps what a plain-SQL writer gave) reads as zero instead of
		// failing the list.
		var seq, attempts, leaseExpires, received, processed any
		err := rows.Scan(&r.ID, &r.EventType, &r.AggregateType, &r.AggregateID, &seq, &r.Payload, &r.Signature,
			&r.Status, &attempts, &r.LastError, &r.LeaseOwner, &leaseExpires, &received, &processed)
		if err != nil {
			return nil, err
		}
		r.Seq, _ = integerValue(seq)
		n, _ := integerValue(attempts)
		r.Attempts = int(min(max(n, 0), sqlstore.RetriesMax+1))
		r.ReceivedAt, r.LeaseExpiresAt, r.ProcessedAt = anyTime(received), anyTime(leaseExpires), anyTime(processed)
		out = append(out, r)
	}
	return out, rows.Err()
}

// InboxDeleteProcessedBefore deletes up to limit done rows processed before
// the given time, oldest first, in a write transaction of its own.
func (d *Driver) InboxDeleteProcessedBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	return d.deleteBefore(ctx, "inbox_delete_processed", "inbox delete processed", before, limit)
}

// inboxTx is a write transaction of the inbox steps, with the time its
// statements use as now. The clock is read once the write lock is held, so
// the rows of successive transactions get times in commit order.
type inboxTx struct {
	tx  *sql.Tx
	now int64
}

// handler runs a caller's fn, which may be nil, in an inboxTx.
func handler(fn func(ctx context.Context, tx *sql.Tx) error) func(ctx context.Context, tx *inboxTx) error {
	if fn == nil {
		return nil
	}
	return func(ctx context.Context, t *inboxTx) error { return fn(ctx, t.tx) }
}

// inboxDialect runs the statements of inbox.sql for sqlstore.Inbox, in
// the store's write transactions. Times are INTEGER microseconds from this
// process's clock.
type inboxDialect struct{ s *Store }

func (d inboxDialect) Begin(ctx context.Context) (*inboxTx, error) {
	tx, err := d.s.tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &inboxTx{tx: tx, now: time.Now().UnixMicro()}, nil
}

func (d inboxDialect) Commit(ctx context.Context, t *inboxTx) error { return d.s.tx.Commit(ctx, t.tx) }

func (d inboxDialect) Rollback(ctx context.Context, t *inboxTx) error {
	return d.s.tx.Rollback(ctx, t.tx)
}

func (d inboxDialect) Take(ctx context.Context, t *inboxTx, ev *store.InboxEvent, status, owner string, lease time.Duration) (int, bool, error) {
	var leaseUntil any
	if status == store.StatusPending {
		leaseUntil = t.now + max(lease.Microseconds(), 1)
	}
	var attempts int
	err := t.tx.QueryRowContext(ctx, d.s.sql.Get("inbox_take"), eventArgs(ev, t.now,
		sql.Named("status", status),
		sql.Named("owner", sqlstore.NullText(owner)),
		sql.Named("lease_until", leaseUntil),
	)...).Scan(&attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return attempts, err == nil, err
}

func (d inboxDialect) IsDone(ctx context.Context, t *inboxTx, id uuid.UUID) (bool, error) {
	var done bool
	err := t.tx.QueryRowContext(ctx, d.s.sql.Get("inbox_status"), sql.Named("id", id.String())).Scan(&done)
	return done, err
}

// Advance reads the last applied number after a statement that did not
// advance: in a write transaction, nothing changed it meanwhile.
func (d inboxDialect) Advance(ctx context.Context, t *inboxTx, aggType, aggID string, seq int64) (bool, int64, error) {
	n, err := rowsAffected(t.tx.ExecContext(ctx, d.s.sql.Get("inbox_advance"), sql.Named("aggregate_type", aggType),
		sql.Named("aggregate_id", aggID), sql.Named("seq", seq), sql.Named("now", t.now)))
	if err != nil || n == 1 {
		return n == 1, 0, err
	}
	last, err := d.LastSeq(ctx, t, aggType, aggID)
	return false, last, err
}

func (d inboxDialect) LastSeq(ctx context.Context, t *inboxTx, aggType, aggID string) (int64, error) {
	var last int64
	err := t.tx.QueryRowContext(ctx, d.s.sql.Get("inbox_last_seq"),
		sql.Named("aggregate_type", aggType), sql.Named("aggregate_id", aggID)).Scan(&last)
	return last, err
}

func (d inboxDialect) Complete(ctx context.Context, t *inboxTx, id uuid.UUID, owner string) (bool, error) {
	n, err := rowsAffected(t.tx.ExecContext(ctx, d.s.sql.Get("inbox_complete"),
		sql.Named("id", id.String()), sql.Named("owner", owner), sql.Named("now", t.now)))
	return n > 0, err
}

func (d inboxDialect) Fail(ctx context.Context, id uuid.UUID, owner, errText string) (bool, error) {
	n, err := d.s.exec(ctx, "inbox_fail", sql.Named("id", id.String()), sql.Named("owner", owner), sql.Named("error", errText))
	return n > 0, err
}

// RecordFailure runs in a write transaction of its own.
func (d inboxDialect) RecordFailure(ctx context.Context, ev *store.InboxEvent, errText string) error {
	_, err := d.s.exec(ctx, "inbox_record_failure", eventArgs(ev, time.Now().UnixMicro(), sql.Named("error", errText))...)
	return err
}

// eventArgs are the parameters of a statement that writes ev's row at
// now, followed by more.
func eventArgs(ev *store.InboxEvent, now int64, more ...any) []any {
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

// rowsAffected is the number of rows a statement changed.
func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// nullPayload is the payload as JSON text, or SQL NULL when it is empty
// (no JSON value is empty, so an empty payload can only mean none).
func nullPayload(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}
