package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/store"
)

// The inbox methods below implement store.Inbox[pgx.Tx]; package store
// documents the contract of each, and inbox/inboxtest checks it.

//go:embed inbox.sql
var inboxSQL string

// inboxQuery returns the inbox query called name, placeholders filled.
func (s *Store) inboxQuery(name string) string { return s.sql.Get(name) }

// lastErrorMax bounds the error text kept in a row.
const lastErrorMax = 2000

// failureTimeout bounds recording a failed handler run once the caller's
// context is done.
const failureTimeout = 5 * time.Second

// InboxProcess writes ev's inbox row as done and runs fn in one transaction.
func (s *Store) InboxProcess(ctx context.Context, ev *store.InboxEvent, fn func(ctx context.Context, tx pgx.Tx) error) (store.InboxResult, error) {
	ran := false
	res, err := s.inboxTx(ctx, func(tx pgx.Tx) (store.InboxResult, error) {
		res, err := s.inboxTake(ctx, tx, ev, store.StatusDone, "", 0)
		if err != nil || res.Status != store.InboxTaken {
			return res, err
		}
		if ev.Seq > 0 {
			if adv, err := s.inboxAdvance(ctx, tx, ev.AggregateType, ev.AggregateID, ev.Seq); err != nil || adv.Status != store.InboxTaken {
				return adv, err
			}
		}
		ran = true
		return res, fn(ctx, tx)
	})
	if err != nil && ran {
		// fn or the commit failed, and everything rolled back: record the
		// failed attempt for inspection (the row stays free).
		if rerr := s.inboxRecordFailure(ctx, ev, err); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return res, err
}

// InboxClaim writes ev's inbox row pending, leased to p.Owner.
func (s *Store) InboxClaim(ctx context.Context, p *store.InboxClaimParams) (store.InboxResult, error) {
	return s.inboxTx(ctx, func(tx pgx.Tx) (store.InboxResult, error) {
		res, err := s.inboxTake(ctx, tx, &p.Event, store.StatusPending, p.Owner, p.Lease)
		if err != nil || res.Status != store.InboxTaken || p.Event.Seq == 0 {
			return res, err
		}
		var last int64
		if err := tx.QueryRow(ctx, s.inboxQuery("inbox_last_seq"), p.Event.AggregateType, p.Event.AggregateID).Scan(&last); err != nil {
			return res, fmt.Errorf("postgres: inbox sequence: %w", err)
		}
		if st := sequenceStatus(p.Event.Seq, last); st != store.InboxTaken {
			return store.InboxResult{Status: st, LastSeq: last}, nil
		}
		return res, nil
	})
}

// InboxComplete marks a claimed row done and runs fn (if not nil) in one
// transaction.
func (s *Store) InboxComplete(ctx context.Context, p *store.InboxCompleteParams, fn func(ctx context.Context, tx pgx.Tx) error) (store.InboxResult, error) {
	return s.inboxTx(ctx, func(tx pgx.Tx) (store.InboxResult, error) {
		tag, err := tx.Exec(ctx, s.inboxQuery("inbox_complete"), p.ID, p.Owner)
		if err != nil {
			return store.InboxResult{}, fmt.Errorf("postgres: inbox complete: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return store.InboxResult{Status: store.InboxLeaseLost}, nil
		}
		if p.Seq > 0 {
			if adv, err := s.inboxAdvance(ctx, tx, p.AggregateType, p.AggregateID, p.Seq); err != nil || adv.Status != store.InboxTaken {
				return adv, err
			}
		}
		res := store.InboxResult{Status: store.InboxTaken}
		if fn == nil {
			return res, nil
		}
		return res, fn(ctx, tx)
	})
}

// InboxFail makes a claimed row failed, free for the next delivery.
func (s *Store) InboxFail(ctx context.Context, p *store.InboxFailParams) (store.InboxResult, error) {
	tag, err := s.pool.Exec(ctx, s.inboxQuery("inbox_fail"), p.ID, p.Owner, lastError(p.Error))
	if err != nil {
		return store.InboxResult{}, fmt.Errorf("postgres: inbox fail: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.InboxResult{Status: store.InboxLeaseLost}, nil
	}
	return store.InboxResult{Status: store.InboxTaken}, nil
}

// InboxGet returns one inbox row, or store.ErrNotFound.
func (s *Store) InboxGet(ctx context.Context, id uuid.UUID) (store.InboxRecord, error) {
	var r store.InboxRecord
	var leaseExpires, processed *time.Time
	err := s.pool.QueryRow(ctx, s.inboxQuery("inbox_get"), id).Scan(&r.ID, &r.EventType, &r.AggregateType,
		&r.AggregateID, &r.Seq, &r.Payload, &r.Signature, &r.Status, &r.Attempts, &r.LastError, &r.LeaseOwner,
		&leaseExpires, &r.ReceivedAt, &processed)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("%w: inbox event %s", store.ErrNotFound, id)
	}
	if err != nil {
		return r, fmt.Errorf("postgres: inbox get: %w", err)
	}
	if leaseExpires != nil {
		r.LeaseExpiresAt = *leaseExpires
	}
	if processed != nil {
		r.ProcessedAt = *processed
	}
	return r, nil
}

// InboxDeleteProcessedBefore deletes up to limit done rows processed before
// the given time.
func (s *Store) InboxDeleteProcessedBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, s.inboxQuery("inbox_delete_processed"), before, limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: inbox delete processed: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// inboxTx runs step in a transaction and commits only when it took the row
// without error; otherwise it rolls back.
func (s *Store) inboxTx(ctx context.Context, step func(tx pgx.Tx) (store.InboxResult, error)) (store.InboxResult, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.InboxResult{}, fmt.Errorf("postgres: inbox begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	res, err := step(tx)
	if err != nil || res.Status != store.InboxTaken {
		return res, err
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("postgres: inbox commit: %w", err)
	}
	return res, nil
}

// inboxTake runs inbox_take and, when it took nothing, tells why.
func (s *Store) inboxTake(ctx context.Context, tx pgx.Tx, ev *store.InboxEvent, status, owner string, lease time.Duration) (store.InboxResult, error) {
	var leaseMS any
	if status == store.StatusPending {
		leaseMS = max(lease.Milliseconds(), 1)
	}
	var attempts int
	err := tx.QueryRow(ctx, s.inboxQuery("inbox_take"), ev.ID, status, nullPayload(ev.Payload), nullText(ev.Signature),
		ev.EventType, ev.AggregateType, ev.AggregateID, nullSeq(ev.Seq), nullText(owner), leaseMS).Scan(&attempts)
	if err == nil {
		return store.InboxResult{Status: store.InboxTaken, Attempt: attempts}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.InboxResult{}, fmt.Errorf("postgres: inbox take: %w", err)
	}
	var done bool
	if err := tx.QueryRow(ctx, s.inboxQuery("inbox_status"), ev.ID).Scan(&done); err != nil {
		return store.InboxResult{}, fmt.Errorf("postgres: inbox status: %w", err)
	}
	if done {
		return store.InboxResult{Status: store.InboxDone}, nil
	}
	return store.InboxResult{Status: store.InboxInProgress}, nil
}

// inboxAdvance moves an aggregate's last applied sequence number to seq.
func (s *Store) inboxAdvance(ctx context.Context, tx pgx.Tx, aggType, aggID string, seq int64) (store.InboxResult, error) {
	var advanced bool
	var last int64
	if err := tx.QueryRow(ctx, s.inboxQuery("inbox_advance"), aggType, aggID, seq).Scan(&advanced, &last); err != nil {
		return store.InboxResult{}, fmt.Errorf("postgres: inbox sequence: %w", err)
	}
	switch {
	case advanced:
		return store.InboxResult{Status: store.InboxTaken}, nil
	case last >= seq-1:
		// last is as of the statement's start: if it was seq-1, a
		// transaction that committed while this one waited applied seq.
		return store.InboxResult{Status: store.InboxSeqApplied, LastSeq: max(last, seq)}, nil
	}
	return store.InboxResult{Status: store.InboxOutOfOrder, LastSeq: last}, nil
}

// sequenceStatus says whether an event numbered seq may be applied after
// last: Taken when seq follows it, SeqApplied when seq is not above it,
// OutOfOrder when a predecessor is missing.
func sequenceStatus(seq, last int64) store.InboxStatus {
	switch {
	case seq == last+1:
		return store.InboxTaken
	case seq <= last:
		return store.InboxSeqApplied
	}
	return store.InboxOutOfOrder
}

// inboxRecordFailure marks ev's row failed after its handler run rolled
// back, even when ctx is already done.
func (s *Store) inboxRecordFailure(ctx context.Context, ev *store.InboxEvent, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failureTimeout)
	defer cancel()
	_, err := s.pool.Exec(ctx, s.inboxQuery("inbox_record_failure"), ev.ID, nullPayload(ev.Payload), nullText(ev.Signature),
		ev.EventType, ev.AggregateType, ev.AggregateID, nullSeq(ev.Seq), lastError(cause.Error()))
	if err != nil {
		return fmt.Errorf("postgres: inbox record failure: %w", err)
	}
	return nil
}

// lastError makes an error text fit a row: valid UTF-8, no NUL, bounded.
func lastError(msg string) string {
	msg = strings.ToValidUTF8(strings.ReplaceAll(msg, "\x00", ""), "?")
	if len(msg) > lastErrorMax {
		msg = msg[:lastErrorMax]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
	}
	return msg
}

// nullText is s, or SQL NULL when s is empty.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullSeq is seq, or SQL NULL for an unordered event.
func nullSeq(seq int64) any {
	if seq == 0 {
		return nil
	}
	return seq
}

// nullPayload stores an empty payload as SQL NULL.
func nullPayload(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	return p
}
