package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

//go:embed endpoints.sql
var endpointsSQL string

// EndpointCreate writes a new endpoint (see store.Endpoints).
func (s *Store) EndpointCreate(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	if err := sqlstore.CheckEndpoint(e); err != nil {
		return e, fmt.Errorf("sqlite: create endpoint: %w", err)
	}
	e = sqlstore.NewEndpoint(e)
	now := time.Now().Truncate(time.Microsecond)
	_, err := s.exec(ctx, "endpoint_create", e.ID, e.Name, e.URL, strings.Join(e.Types, ","),
		e.Secret, e.RatePerSecond, e.Concurrency, e.Shadow, e.State, now.UnixMicro(), e.AllowPrivate,
		sqlstore.SealedArg(e.Sealed.Data), e.Sealed.Key, e.Sealed.Fingerprint, e.Sealed.Auth,
		e.Filter, e.Envelope, e.Signature)
	if err != nil {
		return e, fmt.Errorf("sqlite: create endpoint: %w", err)
	}
	e.CreatedAt, e.UpdatedAt = now, now
	return e, nil
}

// EndpointGet returns one endpoint, or store.ErrEndpointNotFound.
func (s *Store) EndpointGet(ctx context.Context, id uuid.UUID) (store.Endpoint, error) {
	all, err := s.endpoints(ctx, " where id = ?1", id)
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("sqlite: get endpoint: %w", err)
	}
	if len(all) == 0 {
		return store.Endpoint{}, fmt.Errorf("sqlite: endpoint %s: %w", id, store.ErrEndpointNotFound)
	}
	return all[0], nil
}

// EndpointList returns every endpoint, oldest first.
func (s *Store) EndpointList(ctx context.Context) ([]store.Endpoint, error) {
	all, err := s.endpoints(ctx, " order by created_at, id")
	if err != nil {
		return nil, fmt.Errorf("sqlite: list endpoints: %w", err)
	}
	return all, nil
}

func (s *Store) endpoints(ctx context.Context, tail string, args ...any) ([]store.Endpoint, error) {
	return scanEndpoints(s.db.QueryContext(ctx, s.sql.Get("endpoint_columns")+tail, args...))
}

// scanEndpoints reads the rows of endpoint_columns or endpoint_update, and
// closes them.
func scanEndpoints(rows *sql.Rows, err error) ([]store.Endpoint, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Endpoint
	for rows.Next() {
		var e store.Endpoint
		var types string
		// Times as any: see scanRecords.
		var prevUntil, failing, breaker, created, updated any
		if err := rows.Scan(&e.ID, &e.Name, &e.URL, &types, &e.Secret, &e.PreviousSecret, &prevUntil,
			&e.RatePerSecond, &e.Concurrency, &e.Shadow, &e.AllowPrivate, &e.State, &failing, &breaker, &created, &updated,
			&e.Sealed.Data, &e.Sealed.Key, &e.Sealed.Fingerprint, &e.Sealed.Auth, &e.Filter, &e.Envelope, &e.Signature); err != nil {
			return nil, err
		}
		e.Sealed.Data = sqlstore.SealedRead(e.Sealed.Data)
		e.Types = store.SplitTypes(types)
		e.PreviousSecretUntil, e.FailingSince = anyTime(prevUntil), anyTime(failing)
		e.BreakerOpenUntil = anyTime(breaker)
		e.CreatedAt, e.UpdatedAt = anyTime(created), anyTime(updated)
		out = append(out, e)
	}
	return out, rows.Err()
}

// EndpointUpdate changes an endpoint's settings, only if its updated_at is
// still e.UpdatedAt when that is not zero (endpoint_update; see
// store.Endpoints), in a write transaction: when it changes no row,
// endpoint_exists tells an endpoint that changed from one not there.
func (s *Store) EndpointUpdate(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	if err := sqlstore.CheckSettings(e); err != nil {
		return store.Endpoint{}, fmt.Errorf("sqlite: update endpoint %s: %w", e.ID, err)
	}
	was := sql.NullInt64{Int64: e.UpdatedAt.UnixMicro(), Valid: !e.UpdatedAt.IsZero()}
	var got []store.Endpoint
	var found bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if was.Valid && sqlstore.Unmatchable(e.UpdatedAt) {
			return tx.QueryRowContext(ctx, s.sql.Get("endpoint_exists"), e.ID).Scan(&found)
		}
		var err error
		got, err = scanEndpoints(tx.QueryContext(ctx, s.sql.Get("endpoint_update"), e.ID, e.Name, e.URL, strings.Join(e.Types, ","),
			e.RatePerSecond, e.Concurrency, e.Shadow, e.AllowPrivate, time.Now().UnixMicro(), e.Filter, e.Envelope, e.Signature, was))
		if err != nil || len(got) > 0 {
			return err
		}
		return tx.QueryRowContext(ctx, s.sql.Get("endpoint_exists"), e.ID).Scan(&found)
	})
	switch {
	case err != nil:
		return store.Endpoint{}, fmt.Errorf("sqlite: update endpoint %s: %w", e.ID, err)
	case len(got) > 0:
		return got[0], nil
	case found:
		return store.Endpoint{}, fmt.Errorf("sqlite: update endpoint %s: %w", e.ID, store.ErrEndpointChanged)
	}
	return store.Endpoint{}, fmt.Errorf("sqlite: endpoint %s: %w", e.ID, store.ErrEndpointNotFound)
}

// EndpointSetState changes an endpoint's state (see store.Endpoints).
func (s *Store) EndpointSetState(ctx context.Context, id uuid.UUID, state string) error {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := time.Now().UnixMicro()
		var err error
		n, err = rowsAffected(tx.ExecContext(ctx, s.sql.Get("endpoint_set_state"), id, state, now))
		if err == nil && state == store.EndpointEnabled {
			_, err = tx.ExecContext(ctx, s.sql.Get("endpoint_wake_pending"), id, now)
		}
		return err
	})
	return endpointChanged("set the state of", id, int(n), err)
}

// endpointChanged is the error of a change of endpoint id that changed n
// rows: none means the endpoint is not there.
func endpointChanged(what string, id uuid.UUID, n int, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("sqlite: %s endpoint %s: %w", what, id, err)
	case n == 0:
		return fmt.Errorf("sqlite: endpoint %s: %w", id, store.ErrEndpointNotFound)
	}
	return nil
}

// EndpointDelete removes an endpoint, its deliveries and its attempts.
func (s *Store) EndpointDelete(ctx context.Context, id uuid.UUID) error {
	n, err := s.exec(ctx, "endpoint_delete", id)
	return endpointChanged("remove", id, n, err)
}

// EndpointRotateSecret makes secret the current one of an unsealed
// endpoint (see store.Endpoints).
func (s *Store) EndpointRotateSecret(ctx context.Context, id uuid.UUID, secret string, graceUntil time.Time) error {
	return s.swap(ctx, "rotate the secret of", id, "endpoint_rotate_secret", id, secret, graceUntil.UnixMicro(), time.Now().UnixMicro())
}

// EndpointSeal replaces the endpoint's sealed secrets if they are still
// was (endpoint_seal; see store.Endpoints).
func (s *Store) EndpointSeal(ctx context.Context, id uuid.UUID, sealed store.SealedSecrets, previousUntil time.Time, url string, was []byte) error {
	if err := sqlstore.CheckSealed(sealed); err != nil {
		return fmt.Errorf("sqlite: seal endpoint %s: %w", id, err)
	}
	until := sql.NullInt64{Int64: previousUntil.UnixMicro(), Valid: !previousUntil.IsZero()}
	return s.swap(ctx, "seal", id, "endpoint_seal", id, sealed.Data, sealed.Key, sealed.Fingerprint, sealed.Auth,
		until, sqlstore.SealedArg(was), time.Now().UnixMicro(), url)
}

// swap runs query, a conditional change of endpoint id (what names it),
// in a write transaction: when it changes no row, it tells an endpoint
// whose condition failed (store.ErrEndpointChanged) from one not there
// (endpoint_exists).
func (s *Store) swap(ctx context.Context, what string, id uuid.UUID, query string, args ...any) error {
	var n int64
	var found bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if n, err = rowsAffected(tx.ExecContext(ctx, s.sql.Get(query), args...)); err != nil || n > 0 {
			return err
		}
		return tx.QueryRowContext(ctx, s.sql.Get("endpoint_exists"), id).Scan(&found)
	})
	if err == nil && n == 0 && found {
		return fmt.Errorf("sqlite: %s endpoint %s: %w", what, id, store.ErrEndpointChanged)
	}
	return endpointChanged(what, id, int(n), err)
}

// EndpointFailing sets FailingSince unless set, and returns it.
func (d *Driver) EndpointFailing(ctx context.Context, id uuid.UUID, now time.Time) (time.Time, error) {
	var since sql.NullInt64
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, d.sql.Get("endpoint_failing"), id, now.UnixMicro()).Scan(&since)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("sqlite: endpoint %s: %w", id, store.ErrEndpointNotFound)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlite: endpoint failing: %w", err)
	}
	return microTime(since), nil
}

// EndpointRecovered clears FailingSince.
func (d *Driver) EndpointRecovered(ctx context.Context, id uuid.UUID) error {
	if _, err := d.exec(ctx, "endpoint_recovered", id); err != nil {
		return fmt.Errorf("sqlite: endpoint recovered: %w", err)
	}
	return nil
}

// EndpointBreaker records the state of the endpoint's breaker: open until
// openUntil, closed (null) when it is zero.
func (d *Driver) EndpointBreaker(ctx context.Context, id uuid.UUID, openUntil time.Time) error {
	until := sql.NullInt64{Int64: openUntil.UnixMicro(), Valid: !openUntil.IsZero()}
	n, err := d.exec(ctx, "endpoint_breaker", id, until)
	return endpointChanged("record the breaker of", id, n, err)
}

// deliveryRow is one delivery as delivery_insert reads it from JSON. The
// fields of a tried endpoint (store.Route.Tried) are left out of an
// untried one's object: delivery_insert reads their absence as a pending
// delivery never attempted.
type deliveryRow struct {
	EventID       uuid.UUID `json:"event_id"`
	EndpointID    uuid.UUID `json:"endpoint_id"`
	AggregateType string    `json:"aggregate_type"`
	AggregateID   string    `json:"aggregate_id"`
	EventType     string    `json:"event_type"`
	Payload       string    `json:"payload"`
	Headers       string    `json:"headers"`
	AvailableAt   int64     `json:"available_at"`
	Status        string    `json:"status,omitempty"`
	Attempts      int32     `json:"attempts,omitempty"`
	LastError     string    `json:"last_error,omitempty"`
}

// DeliveryInsert writes the deliveries of a batch of routes in one
// statement, numbered in the routes' order (see store.Endpoints); a tried
// endpoint's is written as its store.Tried says (available_at: its RetryAt
// when pending and not zero). A batch with a Tried that
// sqlstore.CheckRoutes refuses writes nothing.
func (d *Driver) DeliveryInsert(ctx context.Context, routes []store.Route) (int, error) {
	if _, err := sqlstore.CheckRoutes(routes); err != nil {
		return 0, fmt.Errorf("sqlite: insert deliveries: %w", err)
	}
	var rows []deliveryRow
	now := time.Now().UnixMicro()
	for _, r := range routes {
		ev := r.Event
		headers := []byte("{}")
		if len(ev.Headers) > 0 {
			headers, _ = json.Marshal(ev.Headers) // a map of strings: cannot fail
		}
		available := now
		if !ev.AvailableAt.IsZero() {
			available = ev.AvailableAt.UnixMicro()
		}
		for i, id := range r.Endpoints {
			row := deliveryRow{ev.ID, id, ev.AggregateType, ev.AggregateID, ev.EventType,
				string(ev.Payload), string(headers), available, "", 0, ""}
			if r.Tried != nil {
				t := r.Tried[i]
				row.Status, row.Attempts, row.LastError = sqlstore.TriedStatus(t), sqlstore.TriedAttempts(t), sqlstore.TriedError(t)
				if row.Status == store.StatusPending && !t.RetryAt.IsZero() {
					row.AvailableAt = t.RetryAt.UnixMicro()
				}
			}
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return 0, nil
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return 0, fmt.Errorf("sqlite: insert deliveries: %w", err)
	}
	n, err := d.exec(ctx, "delivery_insert", string(b), now)
	if err != nil {
		return 0, fmt.Errorf("sqlite: insert deliveries: %w", err)
	}
	return n, nil
}

// scanDeliveries reads the rows of delivery_list and closes them.
func scanDeliveries(rows *sql.Rows, err error) ([]store.EndpointDelivery, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.EndpointDelivery
	for rows.Next() {
		var d store.EndpointDelivery
		var payload, headers string
		// Integers and times as any: see scanRecords.
		var attempt, available, created any
		if err := rows.Scan(&d.ID, &d.AggregateType, &d.AggregateID, &d.EventType, &payload, &headers,
			&d.EndpointID, &d.Status, &attempt, &available, &d.LastError, &created); err != nil {
			return nil, err
		}
		d.Payload = []byte(payload)
		d.Headers, _ = sqlstore.DecodeHeaders([]byte(headers))
		n, _ := integerValue(attempt)
		d.Attempt = int(min(max(n, 0), sqlstore.RetriesMax+1))
		d.AvailableAt, d.CreatedAt = anyTime(available), anyTime(created)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// DeliveryPending returns the endpoints among those given with pending
// deliveries (delivery_pending: one index probe each).
func (d *Driver) DeliveryPending(ctx context.Context, endpoints []uuid.UUID) ([]uuid.UUID, error) {
	ids, _ := json.Marshal(endpoints) // uuid.UUID marshals as a string: cannot fail
	out, err := sqlstore.CollectRows[uuid.UUID](d.db.QueryContext(ctx, d.sql.Get("delivery_pending"), string(ids)))
	if err != nil {
		return nil, fmt.Errorf("sqlite: pending deliveries: %w", err)
	}
	return out, nil
}

// DeliveryDue returns the endpoints among those given with due deliveries.
func (d *Driver) DeliveryDue(ctx context.Context, endpoints []uuid.UUID) ([]uuid.UUID, error) {
	ids, _ := json.Marshal(endpoints) // uuid.UUID marshals as a string: cannot fail
	out, err := sqlstore.CollectRows[uuid.UUID](d.db.QueryContext(ctx, d.sql.Get("delivery_due"), string(ids), time.Now().UnixMicro()))
	if err != nil {
		return nil, fmt.Errorf("sqlite: due deliveries: %w", err)
	}
	return out, nil
}

// DeliveryCounts counts one endpoint's deliveries by status.
func (s *Store) DeliveryCounts(ctx context.Context, endpointID uuid.UUID) (store.DeliveryCounts, error) {
	var c store.DeliveryCounts
	var oldest any // see scanRecords
	err := s.db.QueryRowContext(ctx, s.sql.Get("delivery_counts"), endpointID).Scan(&c.Pending, &c.Processing, &c.Done, &c.Failed, &c.Dropped, &oldest)
	if err != nil {
		return c, fmt.Errorf("sqlite: count deliveries: %w", err)
	}
	if t, problem := timeValue(oldest); oldest != nil && problem == "" {
		c.OldestPendingAge = max(0, time.Since(t))
	}
	return c, nil
}

// DeliveryCountsAll counts every endpoint's deliveries by status in one
// query (delivery_counts_all).
func (s *Store) DeliveryCountsAll(ctx context.Context) (map[uuid.UUID]store.DeliveryCounts, error) {
	rows, err := s.db.QueryContext(ctx, s.sql.Get("delivery_counts_all"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: count deliveries of every endpoint: %w", err)
	}
	defer rows.Close()
	now := time.Now()
	out := map[uuid.UUID]store.DeliveryCounts{}
	for rows.Next() {
		var id uuid.UUID
		var c store.DeliveryCounts
		var oldest any // see scanRecords
		if err := rows.Scan(&id, &c.Pending, &c.Processing, &c.Done, &c.Failed, &c.Dropped, &oldest); err != nil {
			return nil, fmt.Errorf("sqlite: count deliveries of every endpoint: %w", err)
		}
		if t, problem := timeValue(oldest); oldest != nil && problem == "" {
			c.OldestPendingAge = max(0, now.Sub(t))
		}
		out[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: count deliveries of every endpoint: %w", err)
	}
	return out, nil
}

// DeliveryList returns deliveries of one endpoint, oldest first.
func (s *Store) DeliveryList(ctx context.Context, endpointID uuid.UUID, status string, limit int) ([]store.EndpointDelivery, error) {
	out, err := scanDeliveries(s.db.QueryContext(ctx, s.sql.Get("delivery_list"), endpointID, status, limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list deliveries: %w", err)
	}
	return out, nil
}

// attemptRow is one attempt as attempt_insert reads it from JSON.
type attemptRow struct {
	EndpointID uuid.UUID `json:"endpoint_id"`
	EventID    uuid.UUID `json:"event_id"`
	EventType  string    `json:"event_type"`
	Attempt    int       `json:"attempt"`
	StatusCode int       `json:"status_code"`
	DurationUS int64     `json:"duration_us"`
	Response   string    `json:"response"`
	Error      string    `json:"error"`
	At         int64     `json:"at"`
}

// AttemptInsert writes a batch of attempts in one statement.
func (d *Driver) AttemptInsert(ctx context.Context, attempts []store.Attempt) error {
	rows := make([]attemptRow, len(attempts))
	for i, a := range attempts {
		response, errText := sqlstore.AttemptText(a)
		rows[i] = attemptRow{a.EndpointID, a.EventID, a.EventType, a.Attempt, a.StatusCode, a.Duration.Microseconds(),
			response, errText, a.At.UnixMicro()}
	}
	b, err := json.Marshal(rows)
	if err == nil {
		_, err = d.exec(ctx, "attempt_insert", string(b))
	}
	if err != nil {
		return fmt.Errorf("sqlite: write attempts: %w", err)
	}
	return nil
}

// AttemptList returns attempts of one endpoint, the most recent first.
func (s *Store) AttemptList(ctx context.Context, endpointID uuid.UUID, limit int) ([]store.Attempt, error) {
	rows, err := s.db.QueryContext(ctx, s.sql.Get("attempt_list"), endpointID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list attempts: %w", err)
	}
	defer rows.Close()
	var out []store.Attempt
	for rows.Next() {
		var a store.Attempt
		var us int64
		var at any // see scanRecords
		if err := rows.Scan(&a.EndpointID, &a.EventID, &a.EventType, &a.Attempt, &a.StatusCode, &us, &a.Response, &a.Error, &at); err != nil {
			return nil, fmt.Errorf("sqlite: list attempts: %w", err)
		}
		a.Duration, a.At = time.Duration(us)*time.Microsecond, anyTime(at)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list attempts: %w", err)
	}
	return out, nil
}

// AttemptSummary counts every endpoint's attempts at or after since, in
// one query (attempt_summary; see store.Endpoints).
func (s *Store) AttemptSummary(ctx context.Context, since time.Time) ([]store.AttemptSummary, error) {
	st := sqlstore.SummarySince(since)
	from := int64(math.MinInt64) // before every attempt
	if !st.Unbounded {
		from = st.From.UnixMicro()
	}
	rows, err := s.db.QueryContext(ctx, s.sql.Get("attempt_summary"), from, st.Min.UnixMicro(), st.End.UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("sqlite: summarize attempts: %w", err)
	}
	defer rows.Close()
	var out []store.AttemptSummary
	for rows.Next() {
		var a store.AttemptSummary
		var last any // see scanRecords; null when no time is readable
		if err := rows.Scan(&a.EndpointID, &a.Attempts, &a.Succeeded, &last); err != nil {
			return nil, fmt.Errorf("sqlite: summarize attempts: %w", err)
		}
		a.Last = anyTime(last)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: summarize attempts: %w", err)
	}
	return out, nil
}

// EndpointLane returns the Source of e's deliveries (see store.Endpoints):
// its claims lease deliveries with one endpoint_leases row each (see
// endpoints.sql), in write transactions that run one at a time.
func (d *Driver) EndpointLane(e store.Endpoint) store.Source {
	return &lane{s: d.Store, e: store.Endpoint{ID: e.ID, Name: e.Name, Shadow: e.Shadow}}
}

// lane is one endpoint's deliveries as a store.Source.
type lane struct {
	s *Store
	e store.Endpoint // ID, Name and Shadow only
	// walkedTo is the last aggregate an ordered claim's walk for heads
	// took: the next walk starts after it (nil: at the first aggregate).
	walkedTo atomic.Pointer[aggregateKey]
}

// aggregateKey names one aggregate.
type aggregateKey struct{ typ, id string }

// String names the store's file and the endpoint (name and id).
func (l *lane) String() string { return l.s.String() + " " + sqlstore.LaneName(l.e) }

// CheckSchema checks the store's migrations: ordered claims need nothing
// more than them (the index of migration 0009).
func (l *lane) CheckSchema(ctx context.Context, _ store.SchemaParams) error {
	return l.s.CheckSchema(ctx, store.SchemaParams{})
}

// Listen returns an error wrapping store.ErrCannotListen: package endpoint
// wakes its lanes itself.
func (l *lane) Listen(context.Context, func(store.Listening), func()) error {
	return sqlstore.LaneCannotListen("sqlite", l.e)
}

// Claim leases due deliveries of the endpoint in one write transaction and
// returns them in sequence order: it reads them (lane_claim) and writes
// their lease (lane_lease). An ordered claim takes the heads of the
// oldest due deliveries (lane_window_heads), walks the endpoint's
// aggregates for more only when that window was full of deliveries queued
// behind their heads (lane_walk_heads), and reads what it found
// (lane_take).
func (l *lane) Claim(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error) {
	if err := checkLimit("claim", p.Limit); err != nil || p.Limit == 0 {
		return nil, err
	}
	now := time.Now()
	args := []any{
		sql.Named("endpoint", l.e.ID),
		sql.Named("owner", p.Owner),
		sql.Named("limit", p.Limit),
		sql.Named("now", now.UnixMicro()),
		sql.Named("lease_until", now.Add(p.Lease).UnixMicro()),
		sql.Named("max_bytes", p.MaxBytes),
	}
	var out []store.ClaimedEvent
	var walkedTo *aggregateKey
	err := l.s.inTx(ctx, func(tx *sql.Tx) error {
		out, walkedTo = nil, nil
		query, queryArgs := l.s.sql.Get("lane_claim"), slices.Clip(args)
		if p.Ordered {
			seqs, to, err := l.heads(ctx, tx, p.Limit, queryArgs)
			if err != nil || len(seqs) == 0 {
				walkedTo = to
				return err
			}
			list, _ := json.Marshal(seqs) // integers: cannot fail
			query, queryArgs, walkedTo = l.s.sql.Get("lane_take"), append(queryArgs, sql.Named("seqs", string(list))), to
		} else {
			afterAt := int64(math.MinInt64) // before every delivery
			if !p.After.IsZero() {
				afterAt = p.After.AvailableAt.UnixMicro()
			}
			queryArgs = append(queryArgs, sql.Named("after_at", afterAt), sql.Named("after_seq", p.After.Seq))
		}
		rows, err := tx.QueryContext(ctx, query, queryArgs...)
		if err != nil {
			return err
		}
		// Each row scans into values of any type, as the outbox's claim
		// does: a row the store cannot read is returned with
		// ClaimedEvent.Invalid, never failing the claim.
		var r claimedRow
		dest := []any{&r.d.ID, &r.d.OutboxSeq, &r.aggregateType, &r.aggregateID, &r.eventType, &r.payload, &r.headers, &r.attempts, &r.created, &r.available}
		for rows.Next() {
			r = claimedRow{}
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return err
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
		var lease int64
		err = tx.QueryRowContext(ctx, l.s.sql.Get("lane_lease"), append(slices.Clip(args), idList(ids))...).Scan(&lease)
		for i := range out {
			out[i].Lease = lease
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim deliveries of %s: %w", sqlstore.LaneName(l.e), err)
	}
	if p.Ordered {
		l.walkedTo.Store(walkedTo)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OutboxSeq < out[j].OutboxSeq })
	return out, nil
}

// heads finds up to limit heads for an ordered claim, in tx: those of the
// window, then those of the walk when it is needed. It returns where the
// next walk starts: after the last aggregate this walk took, at the first
// aggregate (nil) when it walked past the last one, and where the last
// walk left it when no walk was needed.
func (l *lane) heads(ctx context.Context, tx *sql.Tx, limit int, args []any) ([]int64, *aggregateKey, error) {
	window := sqlstore.LaneWindow * limit
	args = slices.Clip(args)
	rows, err := tx.QueryContext(ctx, l.s.sql.Get("lane_window_heads"), append(args, sql.Named("window", window))...)
	if err != nil {
		return nil, nil, err
	}
	var heads []int64
	seen := 0
	for rows.Next() {
		var seq int64
		var head bool
		if err := rows.Scan(&seq, &head); err != nil {
			rows.Close()
			return nil, nil, err
		}
		seen++
		if head && len(heads) < limit {
			heads = append(heads, seq)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	from := l.walkedTo.Load()
	if seen < window || len(heads) >= limit {
		return heads, from, nil
	}
	start := aggregateKey{}
	if from != nil {
		start = *from
	}
	rows, err = tx.QueryContext(ctx, l.s.sql.Get("lane_walk_heads"), append(args, sql.Named("from_start", from == nil),
		sql.Named("walk_type", start.typ), sql.Named("walk_id", start.id))...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	found := map[int64]bool{}
	for _, seq := range heads {
		found[seq] = true
	}
	var to *aggregateKey
	for rows.Next() && len(heads) < limit {
		var seq int64
		var key aggregateKey
		if err := rows.Scan(&seq, &key.typ, &key.id); err != nil {
			return nil, nil, err
		}
		to = &key
		if !found[seq] {
			heads = append(heads, seq)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(heads) < limit {
		to = nil // walked past the last aggregate: start again at the first
	}
	return heads, to, nil
}

// Settle records a batch of outcomes in one write transaction (see
// store.Source); error texts are cleaned and cut (store.ErrorText).
func (l *lane) Settle(ctx context.Context, p store.SettleParams) error {
	if len(p.Done) == 0 && len(p.Retry) == 0 && len(p.Failed) == 0 && len(p.Release) == 0 && len(p.Ended) == 0 {
		return nil
	}
	endpoint := sql.Named("endpoint", l.e.ID)
	owner := sql.Named("owner", p.Owner)
	now := sql.Named("now", time.Now().UnixMicro())
	var steps []func(tx *sql.Tx) error
	step := func(query string, args ...any) {
		steps = append(steps, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, l.s.sql.Get(query), append(args, endpoint)...)
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
			rs[i] = settleRetry{ID: r.ID, At: r.AvailableAt.UnixMicro(), Error: store.ErrorText(r.LastError, sqlstore.ErrorTextMax)}
		}
		b, _ := json.Marshal(rs) // ids, integers and valid text: cannot fail
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
	var leaving []leavingLease
	for _, r := range p.Retry {
		leaving = append(leaving, leavingLease{r.ID, r.Lease})
	}
	for _, f := range p.Failed {
		leaving = append(leaving, leavingLease{f.ID, f.Lease})
	}
	for _, r := range p.Release {
		leaving = append(leaving, leavingLease{r.ID, r.Lease})
	}
	ended, _ := json.Marshal(append([]int64{}, p.Ended...)) // integers: cannot fail
	endedArg := sql.Named("ended", string(ended))
	if len(leaving) > 0 {
		b, _ := json.Marshal(leaving) // ids and integers: cannot fail
		step("lane_leave", sql.Named("leaving", string(b)), owner, endedArg)
	}
	step("lane_end", owner, endedArg)
	err := l.s.inTx(ctx, func(tx *sql.Tx) error {
		for _, run := range steps {
			if err := run(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: settle deliveries of %s: %w", sqlstore.LaneName(l.e), err)
	}
	return nil
}

// leavingLease is one delivery leaving its lease (lane_leave), as JSON.
type leavingLease struct {
	ID    uuid.UUID `json:"id"`
	Lease int64     `json:"lease"`
}

// ExtendLease renews owner's leases that list any of ids (lane_extend_lease),
// and returns those of ids still held (lane_held), in the order of ids.
func (l *lane) ExtendLease(ctx context.Context, owner string, ids []uuid.UUID, lease time.Duration) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var renewed []uuid.UUID
	err := l.s.inTx(ctx, func(tx *sql.Tx) error {
		args := []any{idList(ids), sql.Named("endpoint", l.e.ID), sql.Named("owner", owner)}
		_, err := tx.ExecContext(ctx, l.s.sql.Get("lane_extend_lease"), append(args, sql.Named("lease_until", time.Now().Add(lease).UnixMicro()))...)
		if err != nil {
			return err
		}
		renewed, err = sqlstore.CollectRows[uuid.UUID](tx.QueryContext(ctx, l.s.sql.Get("lane_held"), args...))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: extend leases on %s: %w", sqlstore.LaneName(l.e), err)
	}
	return sqlstore.HeldInOrder(ids, renewed), nil
}

// ReclaimExpired returns the deliveries of the endpoint's expired leases to
// the queue, or fails (drops) those that used p.MaxAttempts, and deletes
// those leases.
func (l *lane) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]store.Reclaimed, error) {
	var out []store.Reclaimed
	endpoint := sql.Named("endpoint", l.e.ID)
	now := sql.Named("now", time.Now().UnixMicro())
	err := l.s.inTx(ctx, func(tx *sql.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, l.s.sql.Get("lane_expired_owners"), endpoint, now)
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
		_, err = tx.ExecContext(ctx, l.s.sql.Get("lane_reclaim_expired"), endpoint, now,
			sql.Named("max_attempts", p.MaxAttempts), sql.Named("shadow", l.e.Shadow))
		if err == nil {
			_, err = tx.ExecContext(ctx, l.s.sql.Get("lane_reclaim_leases"), endpoint, now)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: reclaim expired leases on %s: %w", sqlstore.LaneName(l.e), err)
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
		return store.ExpireResult{}, fmt.Errorf("sqlite: %s: %w", sqlstore.LaneName(l.e), err)
	}
	n, err := l.purgeDone(ctx, p.Before, p.Limit)
	return store.ExpireResult{Events: n, More: n >= p.Limit}, err
}

// purgeDone is Expire's deletion.
func (l *lane) purgeDone(ctx context.Context, before time.Time, limit int) (int, error) {
	var total int64
	err := l.s.inTx(ctx, func(tx *sql.Tx) error {
		total = 0
		for _, query := range []string{"lane_purge_deliveries", "lane_purge_attempts"} {
			n, err := rowsAffected(tx.ExecContext(ctx, l.s.sql.Get(query), sql.Named("endpoint", l.e.ID),
				sql.Named("before", before.UnixMicro()), sql.Named("limit", limit)))
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge finished deliveries of %s: %w", sqlstore.LaneName(l.e), err)
	}
	return int(total), nil
}
