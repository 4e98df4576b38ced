package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// The inbox methods below implement store.Inbox[*sql.Tx]; package store
// documents the contract of each, and inbox/inboxtest checks it.
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

// lastErrorMax bounds the error text kept in an inbox row.
const lastErrorMax = 2000

// failureTimeout bounds recording a failed handler run once the caller's
// context is done.
const failureTimeout = 5 * time.Second

// InboxProcess writes ev's inbox row as done and runs fn in one write
// transaction. fn runs while the store's write lock is held: the other
// writers of the database wait for it, so keep it short, and never begin
// another write transaction of DB() inside it (it would wait for this one).
func (s *Store) InboxProcess(ctx context.Context, ev *store.InboxEvent, fn func(ctx context.Context, tx *sql.Tx) error) (store.InboxResult, error) {
	ran := false
	res, err := s.inboxTx(ctx, func(tx *sql.Tx, now int64) (store.InboxResult, error) {
		res, err := s.inboxTake(ctx, tx, now, ev, store.StatusDone, "", 0)
		if err != nil || res.Status != store.InboxTaken {
			return res, err
		}
		if ev.Seq > 0 {
			if adv, err := s.inboxAdvance(ctx, tx, now, ev.AggregateType, ev.AggregateID, ev.Seq); err != nil || adv.Status != store.InboxTaken {
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

// InboxClaim writes ev's inbox row pending, leased to p.Owner, and commits.
func (s *Store) InboxClaim(ctx context.Context, p *store.InboxClaimParams) (store.InboxResult, error) {
	return s.inboxTx(ctx, func(tx *sql.Tx, now int64) (store.InboxResult, error) {
		res, err := s.inboxTake(ctx, tx, now, &p.Event, store.StatusPending, p.Owner, p.Lease)
		if err != nil || res.Status != store.InboxTaken || p.Event.Seq == 0 {
			return res, err
		}
		last, err := s.inboxLastSeq(ctx, tx, p.Event.AggregateType, p.Event.AggregateID)
		if err != nil {
			return store.InboxResult{}, err
		}
		if st := sequenceStatus(p.Event.Seq, last); st != store.InboxTaken {
			return store.InboxResult{Status: st, LastSeq: last}, nil
		}
		return res, nil
	})
}

// InboxComplete marks a claimed row done and runs fn (if not nil) in one
// write transaction. Like InboxProcess, fn runs under the write lock.
func (s *Store) InboxComplete(ctx context.Context, p *store.InboxCompleteParams, fn func(ctx context.Context, tx *sql.Tx) error) (store.InboxResult, error) {
	return s.inboxTx(ctx, func(tx *sql.Tx, now int64) (store.InboxResult, error) {
		res, err := tx.ExecContext(ctx, s.sql.Get("inbox_complete"),
			sql.Named("id", p.ID.String()), sql.Named("owner", p.Owner), sql.Named("now", now))
		if err != nil {
			return store.InboxResult{}, fmt.Errorf("sqlite: inbox complete: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return store.InboxResult{}, fmt.Errorf("sqlite: inbox complete: %w", err)
		} else if n == 0 {
			return store.InboxResult{Status: store.InboxLeaseLost}, nil
		}
		if p.Seq > 0 {
			if adv, err := s.inboxAdvance(ctx, tx, now, p.AggregateType, p.AggregateID, p.Seq); err != nil || adv.Status != store.InboxTaken {
				return adv, err
			}
		}
		taken := store.InboxResult{Status: store.InboxTaken}
		if fn == nil {
			return taken, nil
		}
		return taken, fn(ctx, tx)
	})
}

// InboxFail makes a claimed row failed, free for the next delivery.
func (s *Store) InboxFail(ctx context.Context, p *store.InboxFailParams) (store.InboxResult, error) {
	n, err := s.exec(ctx, "inbox_fail", sql.Named("id", p.ID.String()), sql.Named("owner", p.Owner),
		sql.Named("error", lastError(p.Error)))
	if err != nil {
		return store.InboxResult{}, fmt.Errorf("sqlite: inbox fail: %w", err)
	}
	if n == 0 {
		return store.InboxResult{Status: store.InboxLeaseLost}, nil
	}
	return store.InboxResult{Status: store.InboxTaken}, nil
}

// InboxGet returns one inbox row, or store.ErrNotFound.
func (s *Store) InboxGet(ctx context.Context, id uuid.UUID) (store.InboxRecord, error) {
	var r store.InboxRecord
	var received int64
	var leaseExpires, processed sql.NullInt64
	err := s.db.QueryRowContext(ctx, s.sql.Get("inbox_get"), sql.Named("id", id.String())).Scan(
		&r.ID, &r.EventType, &r.AggregateType, &r.AggregateID, &r.Seq, &r.Payload, &r.Signature, &r.Status,
		&r.Attempts, &r.LastError, &r.LeaseOwner, &leaseExpires, &received, &processed)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("%w: inbox event %s", store.ErrNotFound, id)
	}
	if err != nil {
		return r, fmt.Errorf("sqlite: inbox get: %w", err)
	}
	r.ReceivedAt = time.UnixMicro(received)
	if leaseExpires.Valid {
		r.LeaseExpiresAt = time.UnixMicro(leaseExpires.Int64)
	}
	if processed.Valid {
		r.ProcessedAt = time.UnixMicro(processed.Int64)
	}
	return r, nil
}

// InboxDeleteProcessedBefore deletes up to limit done rows processed before
// the given time, oldest first, in a write transaction of its own.
func (s *Store) InboxDeleteProcessedBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkLimit("inbox delete processed", limit); err != nil || limit == 0 {
		return 0, err
	}
	n, err := s.exec(ctx, "inbox_delete_processed", sql.Named("before", before.UnixMicro()), sql.Named("limit", limit))
	if err != nil {
		return 0, fmt.Errorf("sqlite: inbox delete processed: %w", err)
	}
	return n, nil
}

// inboxTx runs step in a write transaction, with the time its statements
// use as now, and commits only when step took the row without error;
// otherwise it rolls back.
func (s *Store) inboxTx(ctx context.Context, step func(tx *sql.Tx, now int64) (store.InboxResult, error)) (store.InboxResult, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.InboxResult{}, fmt.Errorf("sqlite: inbox begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	// The clock is read once the write lock is held, so the rows of
	// successive transactions get times in commit order.
	res, err := step(tx, time.Now().UnixMicro())
	if err != nil || res.Status != store.InboxTaken {
		return res, err
	}
	if err := tx.Commit(); err != nil {
		return res, fmt.Errorf("sqlite: inbox commit: %w", err)
	}
	return res, nil
}

// inboxTake runs inbox_take and, when it took nothing, tells why.
func (s *Store) inboxTake(ctx context.Context, tx *sql.Tx, now int64, ev *store.InboxEvent, status, owner string, lease time.Duration) (store.InboxResult, error) {
	var leaseUntil any
	if status == store.StatusPending {
		leaseUntil = now + max(lease.Microseconds(), 1)
	}
	var attempts int
	err := tx.QueryRowContext(ctx, s.sql.Get("inbox_take"),
		sql.Named("id", ev.ID.String()),
		sql.Named("now", now),
		sql.Named("status", status),
		sql.Named("payload", nullPayload(ev.Payload)),
		sql.Named("signature", nullText(ev.Signature)),
		sql.Named("event_type", ev.EventType),
		sql.Named("aggregate_type", ev.AggregateType),
		sql.Named("aggregate_id", ev.AggregateID),
		sql.Named("seq", nullSeq(ev.Seq)),
		sql.Named("owner", nullText(owner)),
		sql.Named("lease_until", leaseUntil),
	).Scan(&attempts)
	if err == nil {
		return store.InboxResult{Status: store.InboxTaken, Attempt: attempts}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return store.InboxResult{}, fmt.Errorf("sqlite: inbox take: %w", err)
	}
	var done bool
	if err := tx.QueryRowContext(ctx, s.sql.Get("inbox_status"), sql.Named("id", ev.ID.String())).Scan(&done); err != nil {
		return store.InboxResult{}, fmt.Errorf("sqlite: inbox status: %w", err)
	}
	if done {
		return store.InboxResult{Status: store.InboxDone}, nil
	}
	return store.InboxResult{Status: store.InboxInProgress}, nil
}

// inboxAdvance moves an aggregate's last applied sequence number to seq,
// or tells why it cannot.
func (s *Store) inboxAdvance(ctx context.Context, tx *sql.Tx, now int64, aggType, aggID string, seq int64) (store.InboxResult, error) {
	res, err := tx.ExecContext(ctx, s.sql.Get("inbox_advance"), sql.Named("aggregate_type", aggType),
		sql.Named("aggregate_id", aggID), sql.Named("seq", seq), sql.Named("now", now))
	if err != nil {
		return store.InboxResult{}, fmt.Errorf("sqlite: inbox sequence: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return store.InboxResult{}, fmt.Errorf("sqlite: inbox sequence: %w", err)
	} else if n == 1 {
		return store.InboxResult{Status: store.InboxTaken}, nil
	}
	last, err := s.inboxLastSeq(ctx, tx, aggType, aggID)
	if err != nil {
		return store.InboxResult{}, err
	}
	st := sequenceStatus(seq, last)
	if st == store.InboxTaken {
		// The write transaction sees no other writer: this cannot happen.
		return store.InboxResult{}, fmt.Errorf("sqlite: inbox sequence of %s %s: %d follows %d but did not advance", aggType, aggID, seq, last)
	}
	return store.InboxResult{Status: st, LastSeq: last}, nil
}

// inboxLastSeq returns an aggregate's last applied sequence number, or 0.
func (s *Store) inboxLastSeq(ctx context.Context, tx *sql.Tx, aggType, aggID string) (int64, error) {
	var last int64
	err := tx.QueryRowContext(ctx, s.sql.Get("inbox_last_seq"),
		sql.Named("aggregate_type", aggType), sql.Named("aggregate_id", aggID)).Scan(&last)
	if err != nil {
		return 0, fmt.Errorf("sqlite: inbox sequence: %w", err)
	}
	return last, nil
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
// back, in a write transaction of its own, even when ctx is already done.
func (s *Store) inboxRecordFailure(ctx context.Context, ev *store.InboxEvent, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failureTimeout)
	defer cancel()
	_, err := s.exec(ctx, "inbox_record_failure",
		sql.Named("id", ev.ID.String()),
		sql.Named("now", time.Now().UnixMicro()),
		sql.Named("payload", nullPayload(ev.Payload)),
		sql.Named("signature", nullText(ev.Signature)),
		sql.Named("event_type", ev.EventType),
		sql.Named("aggregate_type", ev.AggregateType),
		sql.Named("aggregate_id", ev.AggregateID),
		sql.Named("seq", nullSeq(ev.Seq)),
		sql.Named("error", lastError(cause.Error())),
	)
	if err != nil {
		return fmt.Errorf("sqlite: inbox record failure: %w", err)
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

// nullPayload is the payload as JSON text, or SQL NULL when it is empty
// (no JSON value is empty, so an empty payload can only mean none).
func nullPayload(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
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
