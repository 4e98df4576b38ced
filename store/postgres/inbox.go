package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// The inbox methods below implement store.Inbox[pgx.Tx]; package store
// documents the contract of each, and postboxtest/inboxtest checks it. The steps
// are sqlstore.Inbox's; inboxDialect runs them on inbox.sql.
//
// Deliveries of one event at once serialise on its row: inbox_take waits
// for an uncommitted row of the same id, and inbox_advance for a
// transaction advancing the same aggregate.

//go:embed inbox.sql
var inboxSQL string

// InboxProcess writes ev's inbox row as done and runs fn in one transaction.
func (d *Driver) InboxProcess(ctx context.Context, ev *store.InboxEvent, fn func(ctx context.Context, tx pgx.Tx) error) (store.InboxResult, error) {
	return d.inbox.Process(ctx, ev, fn)
}

// InboxClaim writes ev's inbox row pending, leased to p.Owner.
func (d *Driver) InboxClaim(ctx context.Context, p *store.InboxClaimParams) (store.InboxResult, error) {
	return d.inbox.Claim(ctx, p)
}

// InboxComplete marks a claimed row done and runs fn (if not nil) in one
// transaction.
func (d *Driver) InboxComplete(ctx context.Context, p *store.InboxCompleteParams, fn func(ctx context.Context, tx pgx.Tx) error) (store.InboxResult, error) {
	return d.inbox.Complete(ctx, p, fn)
}

// InboxFail makes a claimed row failed, free for the next delivery.
func (d *Driver) InboxFail(ctx context.Context, p *store.InboxFailParams) (store.InboxResult, error) {
	return d.inbox.Fail(ctx, p)
}

// InboxGet returns one inbox row, or store.ErrNotFound.
func (s *Store) InboxGet(ctx context.Context, id uuid.UUID) (store.InboxRecord, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("inbox_get"), id)
	if err != nil {
		return store.InboxRecord{}, fmt.Errorf("postgres: inbox get: %w", err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanInboxRecord)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("%w: inbox event %s", store.ErrNotFound, id)
	}
	if err != nil {
		return r, fmt.Errorf("postgres: inbox get: %w", err)
	}
	return r, nil
}

// InboxList returns the most recent inbox rows of a status (see
// store.InboxReader).
func (s *Store) InboxList(ctx context.Context, p store.InboxListParams) ([]store.InboxRecord, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	query := "inbox_list_open"
	if p.Status == store.StatusDone {
		query = "inbox_list_done"
	}
	rows, err := s.pool.Query(ctx, s.sql.Get(query), p.Status, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox list: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanInboxRecord)
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox list: %w", err)
	}
	return out, nil
}

// scanInboxRecord reads the columns of inbox_get.
func scanInboxRecord(row pgx.CollectableRow) (store.InboxRecord, error) {
	var r store.InboxRecord
	// Times that take every value: an infinity (a plain-SQL writer's)
	// reads as the zero time instead of failing the list.
	var leaseExpires, received, processed pgtype.Timestamptz
	err := row.Scan(&r.ID, &r.EventType, &r.AggregateType, &r.AggregateID, &r.Seq, &r.Payload, &r.Signature,
		&r.Status, &r.Attempts, &r.LastError, &r.LeaseOwner, &leaseExpires, &received, &processed)
	r.LeaseExpiresAt, r.ReceivedAt, r.ProcessedAt = finiteTime(leaseExpires), finiteTime(received), finiteTime(processed)
	return r, err
}

// InboxDeleteProcessedBefore deletes up to limit done rows processed before
// the given time. On a partitioned inbox (PartitionParams.Inbox), it drops
// the partitions whose range ended instead (inboxExpire).
func (d *Driver) InboxDeleteProcessedBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	switch kind, err := d.deliveredKind(ctx, inboxTable); {
	case err != nil:
		return 0, err
	case kind == "p":
		return d.inboxExpire(ctx, before, limit)
	}
	return d.deleteBefore(ctx, "inbox_delete_processed", "inbox delete processed", before, limit)
}

// inboxDialect runs the statements of inbox.sql for sqlstore.Inbox, in
// the store's pgx transactions. Times are the server's (now()).
type inboxDialect struct {
	pgxTransactor
	s *Store
}

func (d inboxDialect) Take(ctx context.Context, tx pgx.Tx, ev *store.InboxEvent, status, owner string, lease time.Duration) (int, bool, error) {
	var leaseMS any
	if status == store.StatusPending {
		leaseMS = max(lease.Milliseconds(), 1)
	}
	var attempts int
	err := tx.QueryRow(ctx, d.s.sql.Get("inbox_take"), ev.ID, status, nullPayload(ev.Payload), sqlstore.NullText(ev.Signature),
		ev.EventType, ev.AggregateType, ev.AggregateID, sqlstore.NullSeq(ev.Seq), sqlstore.NullText(owner), leaseMS).Scan(&attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return attempts, err == nil, err
}

func (d inboxDialect) IsDone(ctx context.Context, tx pgx.Tx, id uuid.UUID) (bool, error) {
	var done bool
	err := tx.QueryRow(ctx, d.s.sql.Get("inbox_status"), id).Scan(&done)
	return done, err
}

// Advance reports the last applied number as of the statement's start.
func (d inboxDialect) Advance(ctx context.Context, tx pgx.Tx, aggType, aggID string, seq int64) (advanced bool, last int64, err error) {
	err = tx.QueryRow(ctx, d.s.sql.Get("inbox_advance"), aggType, aggID, seq).Scan(&advanced, &last)
	return advanced, last, err
}

func (d inboxDialect) LastSeq(ctx context.Context, tx pgx.Tx, aggType, aggID string) (int64, error) {
	var last int64
	err := tx.QueryRow(ctx, d.s.sql.Get("inbox_last_seq"), aggType, aggID).Scan(&last)
	return last, err
}

func (d inboxDialect) Complete(ctx context.Context, tx pgx.Tx, id uuid.UUID, owner string) (bool, error) {
	tag, err := tx.Exec(ctx, d.s.sql.Get("inbox_complete"), id, owner)
	return tag.RowsAffected() > 0, err
}

func (d inboxDialect) Fail(ctx context.Context, id uuid.UUID, owner, errText string) (bool, error) {
	tag, err := d.s.pool.Exec(ctx, d.s.sql.Get("inbox_fail"), id, owner, errText)
	return tag.RowsAffected() > 0, err
}

func (d inboxDialect) RecordFailure(ctx context.Context, ev *store.InboxEvent, errText string) error {
	_, err := d.s.pool.Exec(ctx, d.s.sql.Get("inbox_record_failure"), ev.ID, nullPayload(ev.Payload), sqlstore.NullText(ev.Signature),
		ev.EventType, ev.AggregateType, ev.AggregateID, sqlstore.NullSeq(ev.Seq), errText)
	return err
}

// nullPayload stores an empty payload as SQL NULL.
func nullPayload(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	return p
}
