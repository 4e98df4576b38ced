package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

//go:embed endpoints.sql
var endpointsSQL string

var _ store.Endpoints = (*Store)(nil)

// EndpointCreate writes a new endpoint (see store.Endpoints).
func (s *Store) EndpointCreate(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	e = sqlstore.NewEndpoint(e)
	now := time.Now().Truncate(time.Microsecond)
	_, err := s.exec(ctx, "endpoint_create", e.ID, e.Name, e.URL, strings.Join(e.Types, ","),
		e.Secret, e.RatePerSecond, e.Concurrency, e.Shadow, e.State, now.UnixMicro())
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
	rows, err := s.db.QueryContext(ctx, s.sql.Get("endpoint_columns")+tail, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Endpoint
	for rows.Next() {
		var e store.Endpoint
		var types string
		// Times as any: see scanRecords.
		var prevUntil, failing, created, updated any
		if err := rows.Scan(&e.ID, &e.Name, &e.URL, &types, &e.Secret, &e.PreviousSecret, &prevUntil,
			&e.RatePerSecond, &e.Concurrency, &e.Shadow, &e.State, &failing, &created, &updated); err != nil {
			return nil, err
		}
		e.Types = store.SplitTypes(types)
		e.PreviousSecretUntil, e.FailingSince = anyTime(prevUntil), anyTime(failing)
		e.CreatedAt, e.UpdatedAt = anyTime(created), anyTime(updated)
		out = append(out, e)
	}
	return out, rows.Err()
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

// EndpointRotateSecret makes secret the current one (see store.Endpoints).
func (s *Store) EndpointRotateSecret(ctx context.Context, id uuid.UUID, secret string, graceUntil time.Time) error {
	n, err := s.exec(ctx, "endpoint_rotate_secret", id, secret, graceUntil.UnixMicro(), time.Now().UnixMicro())
	return endpointChanged("rotate the secret of", id, n, err)
}

// EndpointFailing sets FailingSince unless set, and returns it.
func (s *Store) EndpointFailing(ctx context.Context, id uuid.UUID, now time.Time) (time.Time, error) {
	var since sql.NullInt64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, s.sql.Get("endpoint_failing"), id, now.UnixMicro()).Scan(&since)
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
func (s *Store) EndpointRecovered(ctx context.Context, id uuid.UUID) error {
	if _, err := s.exec(ctx, "endpoint_recovered", id); err != nil {
		return fmt.Errorf("sqlite: endpoint recovered: %w", err)
	}
	return nil
}

// DeliveryInsert writes one delivery of ev per endpoint, idempotently.
func (s *Store) DeliveryInsert(ctx context.Context, routes []store.Route) (int, error) {
	total := 0
	for _, r := range routes {
		n, err := s.deliveryInsertOne(ctx, r.Event, r.Endpoints)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

func (s *Store) deliveryInsertOne(ctx context.Context, ev postbox.Event, endpoints []uuid.UUID) (int, error) {
	headers := []byte("{}")
	if len(ev.Headers) > 0 {
		headers, _ = json.Marshal(ev.Headers) // a map of strings: cannot fail
	}
	ids, _ := json.Marshal(endpoints) // uuid.UUID marshals as a string: cannot fail
	now := time.Now().UnixMicro()
	available := now
	if !ev.AvailableAt.IsZero() {
		available = ev.AvailableAt.UnixMicro()
	}
	n, err := s.exec(ctx, "delivery_insert", ev.ID, ev.AggregateType, ev.AggregateID, ev.EventType,
		string(ev.Payload), string(headers), available, string(ids), now)
	if err != nil {
		return 0, fmt.Errorf("sqlite: insert deliveries: %w", err)
	}
	return n, nil
}

// DeliveryClaim leases due deliveries of one endpoint (see store.Endpoints).
func (s *Store) DeliveryClaim(ctx context.Context, p store.DeliveryClaimParams) ([]store.EndpointDelivery, error) {
	var out []store.EndpointDelivery
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanDeliveries(tx.QueryContext(ctx, s.sql.Get("delivery_claim"),
			p.EndpointID, p.Limit, p.Owner, time.Now().UnixMicro(), p.Lease.Microseconds()))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim deliveries: %w", err)
	}
	return out, nil
}

// scanDeliveries reads the rows of delivery_claim and delivery_list, in
// seq order, and closes them.
func scanDeliveries(rows *sql.Rows, err error) ([]store.EndpointDelivery, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type seqDelivery struct {
		seq int64
		d   store.EndpointDelivery
	}
	var all []seqDelivery
	for rows.Next() {
		var r seqDelivery
		var payload, headers string
		// Integers and times as any: see scanRecords.
		var attempt, available, created any
		if err := rows.Scan(&r.d.ID, &r.d.AggregateType, &r.d.AggregateID, &r.d.EventType, &payload, &headers,
			&r.d.EndpointID, &r.d.Status, &attempt, &available, &r.d.LastError, &created, &r.seq); err != nil {
			return nil, err
		}
		r.d.Payload = []byte(payload)
		r.d.Headers, _ = sqlstore.DecodeHeaders([]byte(headers))
		n, _ := integerValue(attempt)
		r.d.Attempt = int(min(max(n, 0), sqlstore.RetriesMax+1))
		r.d.AvailableAt, r.d.CreatedAt = anyTime(available), anyTime(created)
		all = append(all, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// UPDATE ... RETURNING gives no order.
	for i := 1; i < len(all); i++ {
		for j := i; j > 0 && all[j].seq < all[j-1].seq; j-- {
			all[j], all[j-1] = all[j-1], all[j]
		}
	}
	out := make([]store.EndpointDelivery, len(all))
	for i, r := range all {
		out[i] = r.d
	}
	return out, nil
}

// DeliverySettle records the outcomes of deliveries leased to owner.
func (s *Store) DeliverySettle(ctx context.Context, owner string, outcomes []store.DeliveryOutcome) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := time.Now().UnixMicro()
		for _, o := range outcomes {
			var available any
			if !o.AvailableAt.IsZero() {
				available = o.AvailableAt.UnixMicro()
			}
			if _, err := tx.ExecContext(ctx, s.sql.Get("delivery_settle"), o.EventID, o.EndpointID, owner, o.Status,
				available, store.ErrorText(o.LastError, sqlstore.ErrorTextMax), now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: settle deliveries: %w", err)
	}
	return nil
}

// DeliveryReclaim returns expired leases' deliveries to pending, or fails
// them.
func (s *Store) DeliveryReclaim(ctx context.Context, maxAttempts int) (int, error) {
	n, err := s.exec(ctx, "delivery_reclaim", maxAttempts, time.Now().UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("sqlite: reclaim deliveries: %w", err)
	}
	return n, nil
}

// DeliveryRetryFailed sends failed deliveries back to the queue.
func (s *Store) DeliveryRetryFailed(ctx context.Context, endpointID uuid.UUID, limit int) (int, error) {
	n, err := s.exec(ctx, "delivery_retry_failed", endpointID, limit, time.Now().UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("sqlite: retry failed deliveries: %w", err)
	}
	return n, nil
}

// DeliveryDue returns the endpoints among those given with due deliveries.
func (s *Store) DeliveryDue(ctx context.Context, endpoints []uuid.UUID) ([]uuid.UUID, error) {
	ids, _ := json.Marshal(endpoints) // uuid.UUID marshals as a string: cannot fail
	out, err := sqlstore.CollectRows[uuid.UUID](s.db.QueryContext(ctx, s.sql.Get("delivery_due"), string(ids), time.Now().UnixMicro()))
	if err != nil {
		return nil, fmt.Errorf("sqlite: due deliveries: %w", err)
	}
	return out, nil
}

// DeliveryCounts counts one endpoint's deliveries by status.
func (s *Store) DeliveryCounts(ctx context.Context, endpointID uuid.UUID) (store.DeliveryCounts, error) {
	var c store.DeliveryCounts
	err := s.db.QueryRowContext(ctx, s.sql.Get("delivery_counts"), endpointID).Scan(&c.Pending, &c.Processing, &c.Done, &c.Failed, &c.Dropped)
	if err != nil {
		return c, fmt.Errorf("sqlite: count deliveries: %w", err)
	}
	return c, nil
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
func (s *Store) AttemptInsert(ctx context.Context, attempts []store.Attempt) error {
	rows := make([]attemptRow, len(attempts))
	for i, a := range attempts {
		response, errText := sqlstore.AttemptText(a)
		rows[i] = attemptRow{a.EndpointID, a.EventID, a.EventType, a.Attempt, a.StatusCode, a.Duration.Microseconds(),
			response, errText, a.At.UnixMicro()}
	}
	b, err := json.Marshal(rows)
	if err == nil {
		_, err = s.exec(ctx, "attempt_insert", string(b))
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

// EndpointsPurge deletes old attempts and finished deliveries.
func (s *Store) EndpointsPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	total := 0
	for _, q := range []string{"attempt_purge", "delivery_purge"} {
		n, err := s.exec(ctx, q, before.UnixMicro(), limit)
		if err != nil {
			return total, fmt.Errorf("sqlite: purge endpoints' rows: %w", err)
		}
		total += int(n)
	}
	return total, nil
}

// EndpointUpdate is not written yet (see store.Endpoints).
func (s *Store) EndpointUpdate(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	return store.Endpoint{}, errors.New("not implemented yet")
}

// EndpointLane is not written yet (see store.Endpoints).
func (s *Store) EndpointLane(e store.Endpoint) store.Source { return nil }
