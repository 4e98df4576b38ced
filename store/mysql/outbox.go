package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// timeMin is before every event in claim order (ClaimParams.After zero),
// and every time a row holds.
var (
	timeMin = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	// timeMax is after every time a DATETIME(6) holds.
	timeMax = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// Claim leases due events to p.Owner in one transaction (READ COMMITTED)
// and returns them in sequence order. It locks the events it takes with
// SELECT ... FOR UPDATE SKIP LOCKED, so relays claiming at once skip each
// other's rows, then leases them by seq and reads them. An ordered claim
// first reads the heads of the aggregates without a lock, then locks
// those still pending (AggregateRun is not used: heads only).
//
// When ctx has a deadline, each statement of the claim is bounded on the
// server by a share of the time left (see claimBounds), so that a claim
// that outlives its caller fails there and leases nothing; its error is
// then also context.DeadlineExceeded.
func (d *Driver) Claim(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error) {
	if err := checkLimit("claim", p.Limit); err != nil || p.Limit == 0 {
		return nil, err
	}
	bound := d.claimBounds(ctx)
	now := time.Now().UTC()
	var out []store.ClaimedEvent
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		seqs, err := d.lockDue(ctx, tx, p, now, bound)
		if err != nil || len(seqs) == 0 {
			return err
		}
		list := seqList(seqs)
		st := d.stmt("claim_update")
		if _, err := tx.ExecContext(ctx, bound(st.text, false), st.args([]any{list,
			sql.Named("owner", p.Owner), sql.Named("lease_until", now.Add(p.Lease))})...); err != nil {
			return err
		}
		st = d.stmt("claim_read")
		rows, err := tx.QueryContext(ctx, bound(st.text, true), st.args([]any{list})...)
		if err != nil {
			return err
		}
		defer rows.Close()
		// Each row scans into values that take whatever the columns hold: a
		// row the store cannot read as an event is returned with
		// ClaimedEvent.Invalid, never failing the claim.
		var r claimedRow
		dest := []any{&r.id, &r.d.OutboxSeq, &r.aggregateType, &r.aggregateID, &r.eventType, &r.payload, &r.headers, &r.attempts, &r.created, &r.available}
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
		return nil, claimError(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OutboxSeq < out[j].OutboxSeq })
	return out, nil
}

// lockDue locks the events p takes and returns their seqs, in claim order,
// within p.MaxBytes.
func (d *Driver) lockDue(ctx context.Context, tx *sql.Tx, p store.ClaimParams, now time.Time, bound func(string, bool) string) ([]int64, error) {
	var rows *sql.Rows
	var err error
	if p.Ordered {
		st := d.stmt("claim_heads")
		heads, err := sqlstore.CollectRows[int64](tx.QueryContext(ctx, bound(st.text, true),
			st.args([]any{sql.Named("now", now), sql.Named("limit", p.Limit)})...))
		if err != nil || len(heads) == 0 {
			return nil, err
		}
		st = d.stmt("claim_lock_heads")
		rows, err = tx.QueryContext(ctx, bound(st.text, true), st.args([]any{seqList(heads)})...)
	} else {
		afterAt := timeMin
		if !p.After.IsZero() {
			afterAt = p.After.AvailableAt.UTC()
		}
		st := d.stmt("claim_lock")
		rows, err = tx.QueryContext(ctx, bound(st.text, true), st.args([]any{sql.Named("now", now),
			sql.Named("after_at", afterAt), sql.Named("after_seq", p.After.Seq), sql.Named("limit", p.Limit)})...)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var seqs []int64
	var total int64
	for rows.Next() {
		var seq int64
		var size sql.NullInt64
		if err := rows.Scan(&seq, &size); err != nil {
			return nil, err
		}
		total += size.Int64
		if p.MaxBytes > 0 && len(seqs) > 0 && total > p.MaxBytes {
			break // the rows left stay locked until the commit, unleased
		}
		seqs = append(seqs, seq)
	}
	return seqs, rows.Err()
}

// seqList is the :seqs parameter, a JSON array of seqs.
func seqList(seqs []int64) sql.NamedArg {
	b, _ := json.Marshal(seqs) // cannot fail
	return sql.Named("seqs", string(b))
}

// claimBounds returns what bounds each statement of a claim on the server
// within ctx's deadline: the statement, given whether it is a SELECT, with
// a time limit of six tenths of the time left, and a lock wait of three
// tenths (in whole seconds, at least one: innodb_lock_wait_timeout's
// unit). MariaDB takes both as SET STATEMENT max_statement_time=...,
// innodb_lock_wait_timeout=... FOR; MySQL as optimizer hints,
// MAX_EXECUTION_TIME (SELECT only) and SET_VAR. Without a deadline, the
// statements are left as they are.
func (s *Store) claimBounds(ctx context.Context) func(stmt string, isSelect bool) string {
	deadline, ok := ctx.Deadline()
	if !ok {
		return func(stmt string, _ bool) string { return stmt }
	}
	left := time.Until(deadline)
	statement := max(left*6/10, time.Millisecond)
	lock := max(int64((left*3/10)/time.Second), 1)
	if s.mariadb {
		prefix := fmt.Sprintf("set statement max_statement_time=%.3f, innodb_lock_wait_timeout=%d for ", statement.Seconds(), lock)
		return func(stmt string, _ bool) string { return prefix + stmt }
	}
	return func(stmt string, isSelect bool) string {
		hint := fmt.Sprintf("/*+ SET_VAR(innodb_lock_wait_timeout=%d) */ ", lock)
		if isSelect {
			hint = fmt.Sprintf("/*+ MAX_EXECUTION_TIME(%d) SET_VAR(innodb_lock_wait_timeout=%d) */ ", max(statement.Milliseconds(), 1), lock)
		}
		keyword, rest, _ := strings.Cut(strings.TrimSpace(stmt), " ")
		return keyword + " " + hint + rest
	}
}

// Server errors of a statement stopped by the claim's bounds.
const (
	errLockWaitTimeout  = 1205 // innodb_lock_wait_timeout
	errMariaDBTimeLimit = 1969 // max_statement_time
	errMySQLTimeLimit   = 3024 // MAX_EXECUTION_TIME
)

// claimError is err, of a claim, as the claim's error: a claim the server
// stopped for its bounds (claimBounds) is also context.DeadlineExceeded,
// as the relay's deadline would have been.
func claimError(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == errLockWaitTimeout || me.Number == errMariaDBTimeLimit || me.Number == errMySQLTimeLimit) {
		return fmt.Errorf("mysql: claim: %w (%w)", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("mysql: claim: %w", err)
}

// claimedRow is one row of a claim as scanned, each column that may hold
// a value no event has in a type that takes it.
type claimedRow struct {
	d                                     store.ClaimedEvent
	id                                    []byte
	aggregateType, aggregateID, eventType []byte
	payload, headers                      []byte
	attempts                              int64
	created, available                    sql.NullTime
}

// delivery is the row as a delivery, its problems in Invalid (the fields
// they name left zero).
func (r *claimedRow) delivery() store.ClaimedEvent {
	d := r.d
	var bad sqlstore.Problems
	var problem string
	d.ID, problem = idValue(r.id)
	bad.Add("id", problem)
	d.AggregateType, problem = textValue(r.aggregateType)
	bad.Add("aggregate_type", problem)
	d.AggregateID, problem = textValue(r.aggregateID)
	bad.Add("aggregate_id", problem)
	d.EventType, problem = textValue(r.eventType)
	if problem == "" {
		problem = sqlstore.EventTypeProblem(d.EventType)
	}
	bad.Add("event_type", problem)
	d.Payload = r.payload
	if r.payload == nil {
		bad.Add("payload", "null is not JSON")
	}
	d.Headers, problem = sqlstore.DecodeHeaders(r.headers)
	bad.Add("headers", problem)
	// The claim counted this attempt (attempts + 1) when the value was in
	// bounds, and left any other value as it was.
	if r.attempts < 1 || r.attempts > sqlstore.RetriesMax {
		bad.Add("attempts", fmt.Sprintf("%d is out of range (0 to %d)", r.attempts, sqlstore.RetriesMax))
	} else {
		d.Attempt = int(r.attempts)
	}
	d.CreatedAt, problem = timeValue(r.created)
	bad.Add("created_at", problem)
	d.AvailableAt, problem = timeValue(r.available)
	bad.Add("available_at", problem)
	if bad != nil {
		d.Invalid = bad.String()
	}
	return d
}

// idValue reads an id column.
func idValue(b []byte) (uuid.UUID, string) {
	id, err := uuid.ParseBytes(b)
	if err != nil {
		return uuid.Nil, fmt.Sprintf("%.40q is not a UUID", b)
	}
	return id, ""
}

// textValue reads a text column: its text, or what is wrong with it.
func textValue(b []byte) (string, string) {
	if b == nil {
		return "", "null is not text"
	}
	s := string(b)
	return s, sqlstore.TextProblem(s)
}

// timeValue reads a time column: its time, or what is wrong with it (the
// zero time then). A zero date ('0000-00-00', which a session without
// NO_ZERO_DATE can write where migration 0008's checks were dropped) reads
// as the first time of year 1: the driver gives both as Go's zero time.
func timeValue(t sql.NullTime) (time.Time, string) {
	if !t.Valid {
		return time.Time{}, "null is not a time"
	}
	if problem := sqlstore.TimeProblem(t.Time); problem != "" {
		return time.Time{}, problem
	}
	return t.Time, ""
}

// anyTime reads a nullable time column of a read path: the zero time for
// NULL and for a value that is not a time.
func anyTime(t sql.NullTime) time.Time {
	v, _ := timeValue(t)
	return v
}

// settleRetry and settleFailure are the JSON rows of the settle queries.
type settleRetry struct {
	ID    uuid.UUID `json:"id"`
	At    string    `json:"at"`
	Error string    `json:"error"`
}

type settleFailure struct {
	ID    uuid.UUID `json:"id"`
	Error string    `json:"error"`
}

// jsonTime is t as json_table reads a DATETIME(6): UTC, microseconds.
func jsonTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000000") }

// Settle records a batch of outcomes in one transaction. Done ids are
// deleted (or marked done, with KeepDone) whoever holds them; retries,
// failures and releases apply only to events still leased to p.Owner. An
// id listed as done and as retried or failed is done. The events carry
// their lease (there are no claims to end: p.Ended is not used).
func (d *Driver) Settle(ctx context.Context, p store.SettleParams) error {
	if len(p.Done) == 0 && len(p.Retry) == 0 && len(p.Failed) == 0 && len(p.Release) == 0 {
		return nil
	}
	var retries, failures []byte
	var err error
	if len(p.Retry) > 0 {
		rs := make([]settleRetry, len(p.Retry))
		for i, r := range p.Retry {
			rs[i] = settleRetry{ID: r.ID, At: jsonTime(r.AvailableAt), Error: store.CleanErrorText(r.LastError)}
		}
		if retries, err = json.Marshal(rs); err != nil {
			return fmt.Errorf("mysql: settle: %w", err)
		}
	}
	if len(p.Failed) > 0 {
		fs := make([]settleFailure, len(p.Failed))
		for i, f := range p.Failed {
			fs[i] = settleFailure{ID: f.ID, Error: store.CleanErrorText(f.LastError)}
		}
		if failures, err = json.Marshal(fs); err != nil {
			return fmt.Errorf("mysql: settle: %w", err)
		}
	}
	now := sql.Named("now", time.Now().UTC())
	owner := sql.Named("owner", p.Owner)
	err = d.inTx(ctx, func(tx *sql.Tx) error {
		if len(p.Done) > 0 && p.DedupWindow > 0 {
			until := sql.Named("until", time.Now().Add(p.DedupWindow).UTC())
			if _, err := d.execN(ctx, tx, "hold_keys", idList(p.Done), until); err != nil {
				return err
			}
		}
		if len(p.Done) > 0 {
			query := "settle_delete"
			if p.KeepDone {
				query = "settle_done"
			}
			if _, err := d.execN(ctx, tx, query, idList(p.Done), now); err != nil {
				return err
			}
		}
		if retries != nil {
			if _, err := d.execN(ctx, tx, "settle_retry", sql.Named("retries", string(retries)), owner); err != nil {
				return err
			}
		}
		if failures != nil {
			if _, err := d.execN(ctx, tx, "settle_failed", sql.Named("failures", string(failures)), owner, now); err != nil {
				return err
			}
		}
		if len(p.Release) > 0 {
			ids := make([]uuid.UUID, len(p.Release))
			for i, r := range p.Release {
				ids[i] = r.ID
			}
			if _, err := d.execN(ctx, tx, "release", idList(ids), owner, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mysql: settle: %w", err)
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
		if _, err := d.execN(ctx, tx, "extend_lease", idList(ids), sql.Named("owner", owner),
			sql.Named("lease_until", time.Now().Add(lease).UTC())); err != nil {
			return err
		}
		var err error
		kept, err = sqlstore.CollectRows[uuid.UUID](d.query(ctx, tx, "leased", idList(ids), sql.Named("owner", owner)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: extend lease: %w", err)
	}
	return kept, nil
}

// Release gives events leased to owner back to the queue at once, without
// counting the attempt.
func (d *Driver) Release(ctx context.Context, owner string, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := d.exec(ctx, "release", idList(ids), sql.Named("owner", owner), sql.Named("now", time.Now().UTC())); err != nil {
		return fmt.Errorf("mysql: release: %w", err)
	}
	return nil
}

// ReclaimExpired returns the events of crashed relays (expired leases) to
// the queue, or fails those that have used p.MaxAttempts, and reports how
// many of each relay's events it changed.
func (d *Driver) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]store.Reclaimed, error) {
	var out []store.Reclaimed
	now := sql.Named("now", time.Now().UTC())
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		out = nil
		rows, err := d.query(ctx, tx, "expired_owners", now)
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
		_, err = d.execN(ctx, tx, "reclaim_expired", sql.Named("max_attempts", p.MaxAttempts), now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: reclaim expired leases: %w", err)
	}
	return out, nil
}

// Expire is one step of retention (see store.Source): up to p.Limit
// delivered events processed before p.Before, handed to p.Keep first when
// set (read in (processed_at, id) order, given sorted by id, deleted only
// once Keep returned nil, those still done), then up to p.Limit dedup keys
// whose hold has ended (SettleParams.DedupWindow), each step a transaction
// of its own. p.Limit is from 1 to store.HistoryBatchMax.
func (d *Driver) Expire(ctx context.Context, p store.ExpireParams) (store.ExpireResult, error) {
	res, err := sqlstore.Expire(ctx, expireSQL{d.Store}, p)
	if err != nil {
		return res, fmt.Errorf("mysql: %w", err)
	}
	return res, nil
}

// idList is the :ids parameter, a JSON array of ids.
func idList(ids []uuid.UUID) sql.NamedArg {
	b, _ := json.Marshal(ids) // uuid.UUID marshals as a string; cannot fail
	return sql.Named("ids", string(b))
}

// checkLimit refuses negative limits.
func checkLimit(op string, limit int) error {
	if limit < 0 {
		return fmt.Errorf("mysql: %s: limit %d is negative", op, limit)
	}
	return nil
}
