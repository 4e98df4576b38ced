package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// EndpointLane returns the Source of e's deliveries (see store.Endpoints):
// its claims lease deliveries with one endpoint_leases row each (see
// endpoints.sql); every step of a lane locks the endpoint's row first, so
// the steps of one endpoint take turns.
func (d *Driver) EndpointLane(e store.Endpoint) store.Source {
	return &lane{s: d.Store, e: store.Endpoint{ID: e.ID, Name: e.Name, Shadow: e.Shadow}}
}

// lane is one endpoint's deliveries as a store.Source.
type lane struct {
	s *Store
	e store.Endpoint // ID, Name and Shadow only
}

// String names the store and the endpoint (name and id).
func (l *lane) String() string { return l.s.String() + " " + sqlstore.LaneName(l.e) }

// CheckSchema checks the store's migrations: ordered claims need nothing
// more than them.
func (l *lane) CheckSchema(ctx context.Context, _ store.SchemaParams) error {
	return l.s.CheckSchema(ctx, store.SchemaParams{})
}

// Listen returns an error wrapping store.ErrCannotListen: package endpoint
// wakes its lanes itself.
func (l *lane) Listen(context.Context, func(store.Listening), func()) error {
	return sqlstore.LaneCannotListen("mysql", l.e)
}

// inTx runs fn in a transaction that holds the lock of the lane's
// endpoint row (lane_lock); enabled says whether the endpoint is enabled
// (false too when it is gone).
func (l *lane) inTx(ctx context.Context, fn func(tx *sql.Tx, enabled bool) error) error {
	return l.s.inTx(ctx, func(tx *sql.Tx) error {
		var enabled bool
		err := l.s.queryRow(ctx, tx, "lane_lock", sql.Named("endpoint", l.e.ID)).Scan(&enabled)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return fn(tx, enabled)
	})
}

// Claim leases due deliveries of the endpoint, none while it is not
// enabled, in one transaction, and returns them in sequence order: it
// reads them (lane_claim, or lane_claim_ordered: the heads of the
// endpoint's aggregates) and writes their lease (lane_lease).
func (l *lane) Claim(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error) {
	if err := checkLimit("claim", p.Limit); err != nil || p.Limit == 0 {
		return nil, err
	}
	now := time.Now().UTC()
	args := []any{
		sql.Named("endpoint", l.e.ID),
		sql.Named("owner", p.Owner),
		sql.Named("limit", p.Limit),
		sql.Named("now", now),
		sql.Named("lease_until", now.Add(p.Lease)),
	}
	var out []store.ClaimedEvent
	err := l.inTx(ctx, func(tx *sql.Tx, enabled bool) error {
		out = nil
		if !enabled {
			return nil
		}
		query := "lane_claim_ordered"
		if !p.Ordered {
			afterAt := timeMin
			if !p.After.IsZero() {
				afterAt = p.After.AvailableAt.UTC()
			}
			query = "lane_claim"
			args = append(slices.Clip(args), sql.Named("after_at", afterAt), sql.Named("after_seq", p.After.Seq))
		}
		rows, err := l.s.query(ctx, tx, query, args...)
		if err != nil {
			return err
		}
		// Each row scans into values that take whatever the columns hold,
		// as the outbox's claim does: a row the store cannot read is
		// returned with ClaimedEvent.Invalid, never failing the claim.
		var r claimedRow
		var size sql.NullInt64
		var total int64
		dest := []any{&r.id, &r.d.OutboxSeq, &r.aggregateType, &r.aggregateID, &r.eventType, &r.payload, &r.headers, &r.attempts, &r.created, &r.available, &size}
		for rows.Next() {
			r = claimedRow{}
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return err
			}
			total += size.Int64
			if p.MaxBytes > 0 && len(out) > 0 && total > p.MaxBytes {
				break
			}
			out = append(out, r.delivery())
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(out) == 0 {
			return err
		}
		ids := make([]uuid.UUID, len(out))
		for i, d := range out {
			ids[i] = d.ID
		}
		st := l.s.stmt("lane_lease")
		res, err := tx.ExecContext(ctx, st.text, st.args(append(slices.Clip(args), idList(ids)))...)
		if err != nil {
			return err
		}
		lease, err := res.LastInsertId()
		for i := range out {
			out[i].Lease = lease
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: claim deliveries of %s: %w", sqlstore.LaneName(l.e), err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OutboxSeq < out[j].OutboxSeq })
	return out, nil
}

// Settle records a batch of outcomes in one transaction (see
// store.Source); error texts are cleaned and cut (store.ErrorText).
func (l *lane) Settle(ctx context.Context, p store.SettleParams) error {
	if len(p.Done) == 0 && len(p.Retry) == 0 && len(p.Failed) == 0 && len(p.Release) == 0 && len(p.Ended) == 0 {
		return nil
	}
	endpoint := sql.Named("endpoint", l.e.ID)
	owner := sql.Named("owner", p.Owner)
	now := sql.Named("now", time.Now().UTC())
	var steps []func(tx *sql.Tx) error
	step := func(query string, args ...any) {
		steps = append(steps, func(tx *sql.Tx) error {
			_, err := l.s.execN(ctx, tx, query, append(args, endpoint)...)
			return err
		})
	}
	if len(p.Done) > 0 {
		if p.KeepDone {
			step("lane_settle_done", idList(p.Done), now)
		} else {
			step("lane_settle_delete", idList(p.Done))
		}
	}
	if len(p.Retry) > 0 {
		rs := make([]settleRetry, len(p.Retry))
		for i, r := range p.Retry {
			rs[i] = settleRetry{ID: r.ID, At: jsonTime(r.AvailableAt), Error: store.ErrorText(r.LastError, sqlstore.ErrorTextMax)}
		}
		b, _ := json.Marshal(rs) // ids, times and valid text: cannot fail
		step("lane_settle_retry", sql.Named("retries", string(b)), owner)
	}
	if len(p.Failed) > 0 {
		fs := make([]settleFailure, len(p.Failed))
		for i, f := range p.Failed {
			fs[i] = settleFailure{ID: f.ID, Error: store.ErrorText(f.LastError, sqlstore.ErrorTextMax)}
		}
		b, _ := json.Marshal(fs) // ids and valid text: cannot fail
		step("lane_settle_failed", sql.Named("failures", string(b)), owner, now, sql.Named("shadow", l.e.Shadow))
	}
	// The deliveries that leave their lease, and the claim of each (0:
	// any), after the outcomes that check the lease.
	leaving := map[uuid.UUID][]int64{}
	for _, r := range p.Retry {
		leaving[r.ID] = append(leaving[r.ID], r.Lease)
	}
	for _, f := range p.Failed {
		leaving[f.ID] = append(leaving[f.ID], f.Lease)
	}
	for _, r := range p.Release {
		leaving[r.ID] = append(leaving[r.ID], r.Lease)
	}
	ended, _ := json.Marshal(append([]int64{}, p.Ended...)) // integers: cannot fail
	if len(leaving) > 0 {
		steps = append(steps, func(tx *sql.Tx) error { return l.leave(ctx, tx, p.Owner, leaving, p.Ended) })
	}
	step("lane_end", owner, sql.Named("ended", string(ended)))
	err := l.inTx(ctx, func(tx *sql.Tx, _ bool) error {
		for _, run := range steps {
			if err := run(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mysql: settle deliveries of %s: %w", sqlstore.LaneName(l.e), err)
	}
	return nil
}

// leave takes the deliveries of leaving out of the lists of owner's
// leases: each from the lease it names (0: every lease of owner), leases
// ended left to lane_end.
func (l *lane) leave(ctx context.Context, tx *sql.Tx, owner string, leaving map[uuid.UUID][]int64, ended []int64) error {
	rows, err := l.s.query(ctx, tx, "lane_owner_leases", sql.Named("endpoint", l.e.ID), sql.Named("owner", owner))
	if err != nil {
		return err
	}
	type lease struct {
		id  int64
		ids []uuid.UUID
	}
	var leases []lease
	for rows.Next() {
		var le lease
		var list []byte
		if err := rows.Scan(&le.id, &list); err != nil {
			rows.Close()
			return err
		}
		if json.Unmarshal(list, &le.ids) != nil {
			continue // not a list of ids: the claim's own, never changed
		}
		if !slices.Contains(ended, le.id) {
			leases = append(leases, le)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, le := range leases {
		kept := slices.DeleteFunc(slices.Clone(le.ids), func(id uuid.UUID) bool {
			names := leaving[id]
			return slices.Contains(names, 0) || slices.Contains(names, le.id)
		})
		if len(kept) == len(le.ids) {
			continue
		}
		b, _ := json.Marshal(append([]uuid.UUID{}, kept...)) // ids: cannot fail
		if _, err := l.s.execN(ctx, tx, "lane_set_ids", sql.Named("ids", string(b)), sql.Named("id", le.id)); err != nil {
			return err
		}
	}
	return nil
}

// ExtendLease renews owner's leases that list any of ids (lane_extend_lease),
// and returns those of ids still held (lane_held), in the order of ids.
func (l *lane) ExtendLease(ctx context.Context, owner string, ids []uuid.UUID, lease time.Duration) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var renewed []uuid.UUID
	err := l.inTx(ctx, func(tx *sql.Tx, _ bool) error {
		args := []any{idList(ids), sql.Named("endpoint", l.e.ID), sql.Named("owner", owner)}
		_, err := l.s.execN(ctx, tx, "lane_extend_lease", append(args, sql.Named("lease_until", time.Now().Add(lease).UTC()))...)
		if err != nil {
			return err
		}
		renewed, err = sqlstore.CollectRows[uuid.UUID](l.s.query(ctx, tx, "lane_held", args...))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: extend leases on %s: %w", sqlstore.LaneName(l.e), err)
	}
	return sqlstore.HeldInOrder(ids, renewed), nil
}

// ReclaimExpired returns the deliveries of the endpoint's expired leases to
// the queue, or fails (drops) those that used p.MaxAttempts, and deletes
// those leases.
func (l *lane) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]store.Reclaimed, error) {
	var out []store.Reclaimed
	endpoint := sql.Named("endpoint", l.e.ID)
	now := sql.Named("now", time.Now().UTC())
	err := l.inTx(ctx, func(tx *sql.Tx, _ bool) error {
		out = nil
		rows, err := l.s.query(ctx, tx, "lane_expired_owners", endpoint, now)
		if err != nil {
			return err
		}
		for rows.Next() {
			var r store.Reclaimed
			if err := rows.Scan(&r.Owner, &r.Events); err != nil {
				rows.Close()
				return err
			}
			out = append(out, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = l.s.execN(ctx, tx, "lane_reclaim_expired", endpoint, now,
			sql.Named("max_attempts", p.MaxAttempts), sql.Named("shadow", l.e.Shadow))
		if err == nil {
			_, err = l.s.execN(ctx, tx, "lane_reclaim_leases", endpoint, now)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: reclaim expired leases on %s: %w", sqlstore.LaneName(l.e), err)
	}
	return out, nil
}

// Expire deletes up to p.Limit of the endpoint's finished (done or
// dropped) deliveries processed before p.Before, and up to p.Limit of its
// attempts made before it; Events counts both. Limit is from 1 to
// store.HistoryBatchMax, as the outbox's.
func (l *lane) Expire(ctx context.Context, p store.ExpireParams) (store.ExpireResult, error) {
	if p.Keep != nil {
		return store.ExpireResult{}, store.ErrKeepUnsupported
	}
	if err := sqlstore.CheckExpireLimit(p.Limit); err != nil {
		return store.ExpireResult{}, fmt.Errorf("mysql: %s: %w", sqlstore.LaneName(l.e), err)
	}
	var total int64
	err := l.s.inTx(ctx, func(tx *sql.Tx) error {
		total = 0
		for _, query := range []string{"lane_purge_deliveries", "lane_purge_attempts"} {
			n, err := l.s.execN(ctx, tx, query, sql.Named("endpoint", l.e.ID),
				sql.Named("before", p.Before.UTC()), sql.Named("limit", p.Limit))
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	if err != nil {
		return store.ExpireResult{}, fmt.Errorf("mysql: purge finished deliveries of %s: %w", sqlstore.LaneName(l.e), err)
	}
	return store.ExpireResult{Events: int(total), More: int(total) >= p.Limit}, nil
}

// EndpointRequeue sends events to one endpoint again as replays, in one
// transaction (see store.Endpoints): package endpoint's poll finds them
// due.
func (s *Store) EndpointRequeue(ctx context.Context, endpoint uuid.UUID, events []store.HistoryEvent, replay string) (store.RequeueResult, error) {
	rows, dups, err := sqlstore.PrepareRequeue(events, replay)
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("mysql: requeue to endpoint %s: %w", endpoint, err)
	}
	list, ids, err := requeueJSON(rows)
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("mysql: requeue to endpoint %s: %w", endpoint, err)
	}
	now := time.Now().UTC()
	var found bool
	var requeued, inserted int64
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.queryRow(ctx, tx, "endpoint_requeue_exists", endpoint).Scan(&found); err != nil || !found {
			return err
		}
		var err error
		requeued, err = s.execN(ctx, tx, "endpoint_requeue_finished", endpoint, ids.Value, now, replay, postbox.HeaderReplay)
		if err != nil {
			return err
		}
		inserted, err = s.execN(ctx, tx, "endpoint_requeue_insert", endpoint, list.Value, now)
		return err
	})
	switch {
	case err != nil:
		return store.RequeueResult{}, fmt.Errorf("mysql: requeue to endpoint %s: %w", endpoint, err)
	case !found:
		return store.RequeueResult{}, fmt.Errorf("mysql: endpoint %s: %w", endpoint, store.ErrEndpointNotFound)
	}
	return store.RequeueResult{Requeued: int(requeued), Inserted: int(inserted), Skipped: dups + len(rows) - int(requeued) - int(inserted)}, nil
}
