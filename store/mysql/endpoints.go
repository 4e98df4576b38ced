package mysql

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

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

//go:embed endpoints.sql
var endpointsSQL string

// EndpointCreate writes a new endpoint (see store.Endpoints).
func (s *Store) EndpointCreate(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	if err := sqlstore.CheckEndpoint(e); err != nil {
		return e, fmt.Errorf("mysql: create endpoint: %w", err)
	}
	e = sqlstore.NewEndpoint(e)
	now := time.Now().UTC().Truncate(time.Microsecond)
	_, err := s.exec(ctx, "endpoint_create", e.ID, e.Name, e.URL, strings.Join(e.Types, ","),
		e.Secret, e.RatePerSecond, e.Concurrency, e.Shadow, e.State, now, e.AllowPrivate,
		sqlstore.SealedArg(e.Sealed.Data), e.Sealed.Key, e.Sealed.Fingerprint, e.Sealed.Auth,
		e.Filter, e.Envelope, e.Signature)
	if err != nil {
		return e, fmt.Errorf("mysql: create endpoint: %w", err)
	}
	e.CreatedAt, e.UpdatedAt = now, now
	return e, nil
}

// EndpointGet returns one endpoint, or store.ErrEndpointNotFound.
func (s *Store) EndpointGet(ctx context.Context, id uuid.UUID) (store.Endpoint, error) {
	all, err := s.endpoints(ctx, " where id = ?1", id)
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("mysql: get endpoint: %w", err)
	}
	if len(all) == 0 {
		return store.Endpoint{}, fmt.Errorf("mysql: endpoint %s: %w", id, store.ErrEndpointNotFound)
	}
	return all[0], nil
}

// EndpointList returns every endpoint, oldest first.
func (s *Store) EndpointList(ctx context.Context) ([]store.Endpoint, error) {
	all, err := s.endpoints(ctx, " order by created_at, id")
	if err != nil {
		return nil, fmt.Errorf("mysql: list endpoints: %w", err)
	}
	return all, nil
}

func (s *Store) endpoints(ctx context.Context, tail string, args ...any) ([]store.Endpoint, error) {
	st := compile(s.sql.Get("endpoint_columns") + tail)
	return scanEndpoints(s.db.QueryContext(ctx, st.text, st.args(args)...))
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
		var prevUntil, failing, breaker, created, updated sql.NullTime
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
// store.Endpoints), in a transaction: when it changes no row,
// endpoint_exists tells an endpoint that changed from one not there.
func (s *Store) EndpointUpdate(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	if err := sqlstore.CheckSettings(e); err != nil {
		return store.Endpoint{}, fmt.Errorf("mysql: update endpoint %s: %w", e.ID, err)
	}
	was := sql.NullTime{Time: e.UpdatedAt.UTC(), Valid: !e.UpdatedAt.IsZero()}
	var got []store.Endpoint
	var found bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if was.Valid && sqlstore.Unmatchable(e.UpdatedAt) {
			return s.queryRow(ctx, tx, "endpoint_exists", e.ID).Scan(&found)
		}
		n, err := s.execN(ctx, tx, "endpoint_update", e.ID, e.Name, e.URL, strings.Join(e.Types, ","),
			e.RatePerSecond, e.Concurrency, e.Shadow, e.AllowPrivate, time.Now().UTC(), e.Filter, e.Envelope, e.Signature, was)
		if err != nil {
			return err
		}
		if n > 0 {
			st := compile(s.sql.Get("endpoint_columns") + " where id = ?1")
			got, err = scanEndpoints(tx.QueryContext(ctx, st.text, st.args([]any{e.ID})...))
			return err
		}
		return s.queryRow(ctx, tx, "endpoint_exists", e.ID).Scan(&found)
	})
	switch {
	case err != nil:
		return store.Endpoint{}, fmt.Errorf("mysql: update endpoint %s: %w", e.ID, err)
	case len(got) > 0:
		return got[0], nil
	case found:
		return store.Endpoint{}, fmt.Errorf("mysql: update endpoint %s: %w", e.ID, store.ErrEndpointChanged)
	}
	return store.Endpoint{}, fmt.Errorf("mysql: endpoint %s: %w", e.ID, store.ErrEndpointNotFound)
}

// EndpointSetState changes an endpoint's state (see store.Endpoints).
func (s *Store) EndpointSetState(ctx context.Context, id uuid.UUID, state string) error {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := time.Now().UTC()
		var err error
		n, err = s.execN(ctx, tx, "endpoint_set_state", id, state, now)
		if err == nil && state == store.EndpointEnabled {
			_, err = s.execN(ctx, tx, "endpoint_wake_pending", id, now)
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
		return fmt.Errorf("mysql: %s endpoint %s: %w", what, id, err)
	case n == 0:
		return fmt.Errorf("mysql: endpoint %s: %w", id, store.ErrEndpointNotFound)
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
	return s.swap(ctx, "rotate the secret of", id, "endpoint_rotate_secret", id, secret, graceUntil.UTC(), time.Now().UTC())
}

// EndpointSeal replaces the endpoint's sealed secrets if they are still
// was (endpoint_seal; see store.Endpoints).
func (s *Store) EndpointSeal(ctx context.Context, id uuid.UUID, sealed store.SealedSecrets, previousUntil time.Time, url string, was []byte) error {
	if err := sqlstore.CheckSealed(sealed); err != nil {
		return fmt.Errorf("mysql: seal endpoint %s: %w", id, err)
	}
	until := sql.NullTime{Time: previousUntil.UTC(), Valid: !previousUntil.IsZero()}
	return s.swap(ctx, "seal", id, "endpoint_seal", id, sealed.Data, sealed.Key, sealed.Fingerprint, sealed.Auth,
		until, sqlstore.SealedArg(was), time.Now().UTC(), url)
}

// swap runs query, a conditional change of endpoint id (what names it),
// in a transaction: when it changes no row, it tells an endpoint
// whose condition failed (store.ErrEndpointChanged) from one not there
// (endpoint_exists).
func (s *Store) swap(ctx context.Context, what string, id uuid.UUID, query string, args ...any) error {
	var n int64
	var found bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if n, err = s.execN(ctx, tx, query, args...); err != nil || n > 0 {
			return err
		}
		return s.queryRow(ctx, tx, "endpoint_exists", id).Scan(&found)
	})
	if err == nil && n == 0 && found {
		return fmt.Errorf("mysql: %s endpoint %s: %w", what, id, store.ErrEndpointChanged)
	}
	return endpointChanged(what, id, int(n), err)
}

// EndpointFailing sets FailingSince unless set, and returns it.
func (d *Driver) EndpointFailing(ctx context.Context, id uuid.UUID, now time.Time) (time.Time, error) {
	var since sql.NullTime
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := d.execN(ctx, tx, "endpoint_failing", id, now.UTC()); err != nil {
			return err
		}
		return d.queryRow(ctx, tx, "endpoint_failing_since", id).Scan(&since)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("mysql: endpoint %s: %w", id, store.ErrEndpointNotFound)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("mysql: endpoint failing: %w", err)
	}
	return anyTime(since), nil
}

// EndpointRecovered clears FailingSince.
func (d *Driver) EndpointRecovered(ctx context.Context, id uuid.UUID) error {
	if _, err := d.exec(ctx, "endpoint_recovered", id); err != nil {
		return fmt.Errorf("mysql: endpoint recovered: %w", err)
	}
	return nil
}

// EndpointBreaker records the state of the endpoint's breaker: open until
// openUntil, closed (null) when it is zero.
func (d *Driver) EndpointBreaker(ctx context.Context, id uuid.UUID, openUntil time.Time) error {
	until := sql.NullTime{Time: openUntil.UTC(), Valid: !openUntil.IsZero()}
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
	AvailableAt   string    `json:"available_at"`
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
		return 0, fmt.Errorf("mysql: insert deliveries: %w", err)
	}
	var rows []deliveryRow
	now := time.Now().UTC()
	for _, r := range routes {
		ev := r.Event
		headers := []byte("{}")
		if len(ev.Headers) > 0 {
			headers, _ = json.Marshal(ev.Headers) // a map of strings: cannot fail
		}
		available := jsonTime(now)
		if !ev.AvailableAt.IsZero() {
			available = jsonTime(ev.AvailableAt)
		}
		for i, id := range r.Endpoints {
			row := deliveryRow{ev.ID, id, ev.AggregateType, ev.AggregateID, ev.EventType,
				string(ev.Payload), string(headers), available, "", 0, ""}
			if r.Tried != nil {
				t := r.Tried[i]
				row.Status, row.Attempts, row.LastError = sqlstore.TriedStatus(t), sqlstore.TriedAttempts(t), sqlstore.TriedError(t)
				if row.Status == store.StatusPending && !t.RetryAt.IsZero() {
					row.AvailableAt = jsonTime(t.RetryAt)
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
		return 0, fmt.Errorf("mysql: insert deliveries: %w", err)
	}
	n, err := d.exec(ctx, "delivery_insert", string(b), now)
	if err != nil {
		return 0, fmt.Errorf("mysql: insert deliveries: %w", err)
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
		var aggType, aggID, eventType, payload, headers []byte
		var n int64
		var available, created sql.NullTime
		if err := rows.Scan(&d.ID, &aggType, &aggID, &eventType, &payload, &headers,
			&d.EndpointID, &d.Status, &n, &available, &d.LastError, &created); err != nil {
			return nil, err
		}
		d.AggregateType, d.AggregateID, d.EventType = string(aggType), string(aggID), string(eventType)
		d.Payload = payload
		d.Headers, _ = sqlstore.DecodeHeaders(headers)
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
	out, err := sqlstore.CollectRows[uuid.UUID](d.query(ctx, d.db, "delivery_pending", string(ids)))
	if err != nil {
		return nil, fmt.Errorf("mysql: pending deliveries: %w", err)
	}
	return out, nil
}

// DeliveryDue returns the endpoints among those given with due deliveries.
func (d *Driver) DeliveryDue(ctx context.Context, endpoints []uuid.UUID) ([]uuid.UUID, error) {
	ids, _ := json.Marshal(endpoints) // uuid.UUID marshals as a string: cannot fail
	out, err := sqlstore.CollectRows[uuid.UUID](d.query(ctx, d.db, "delivery_due", string(ids), time.Now().UTC()))
	if err != nil {
		return nil, fmt.Errorf("mysql: due deliveries: %w", err)
	}
	return out, nil
}

// DeliveryCounts counts one endpoint's deliveries by status.
func (s *Store) DeliveryCounts(ctx context.Context, endpointID uuid.UUID) (store.DeliveryCounts, error) {
	var c store.DeliveryCounts
	var oldest sql.NullTime
	err := s.queryRow(ctx, s.db, "delivery_counts", endpointID).Scan(&c.Pending, &c.Processing, &c.Done, &c.Failed, &c.Dropped, &oldest)
	if err != nil {
		return c, fmt.Errorf("mysql: count deliveries: %w", err)
	}
	if t := anyTime(oldest); !t.IsZero() {
		c.OldestPendingAge = max(0, time.Since(t))
	}
	return c, nil
}

// DeliveryCountsAll counts every endpoint's deliveries by status in one
// query (delivery_counts_all).
func (s *Store) DeliveryCountsAll(ctx context.Context) (map[uuid.UUID]store.DeliveryCounts, error) {
	rows, err := s.query(ctx, s.db, "delivery_counts_all")
	if err != nil {
		return nil, fmt.Errorf("mysql: count deliveries of every endpoint: %w", err)
	}
	defer rows.Close()
	now := time.Now()
	out := map[uuid.UUID]store.DeliveryCounts{}
	for rows.Next() {
		var id uuid.UUID
		var c store.DeliveryCounts
		var oldest sql.NullTime
		if err := rows.Scan(&id, &c.Pending, &c.Processing, &c.Done, &c.Failed, &c.Dropped, &oldest); err != nil {
			return nil, fmt.Errorf("mysql: count deliveries of every endpoint: %w", err)
		}
		if t := anyTime(oldest); !t.IsZero() {
			c.OldestPendingAge = max(0, now.Sub(t))
		}
		out[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: count deliveries of every endpoint: %w", err)
	}
	return out, nil
}

// DeliveryList returns deliveries of one endpoint, oldest first.
func (s *Store) DeliveryList(ctx context.Context, endpointID uuid.UUID, status string, limit int) ([]store.EndpointDelivery, error) {
	out, err := scanDeliveries(s.query(ctx, s.db, "delivery_list", endpointID, status, limit))
	if err != nil {
		return nil, fmt.Errorf("mysql: list deliveries: %w", err)
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
	At         string    `json:"at"`
	AtRange    int       `json:"at_range"`
}

// AttemptInsert writes a batch of attempts in one statement.
func (d *Driver) AttemptInsert(ctx context.Context, attempts []store.Attempt) error {
	rows := make([]attemptRow, len(attempts))
	for i, a := range attempts {
		response, errText := sqlstore.AttemptText(a)
		rows[i] = attemptRow{a.EndpointID, a.EventID, a.EventType, a.Attempt, a.StatusCode, a.Duration.Microseconds(),
			response, errText, "", 0}
		rows[i].At, rows[i].AtRange = attemptTime(a.At)
	}
	b, err := json.Marshal(rows)
	if err == nil {
		_, err = d.exec(ctx, "attempt_insert", string(b))
	}
	if err != nil {
		return fmt.Errorf("mysql: write attempts: %w", err)
	}
	return nil
}

// attemptTime is at as endpoint_attempts holds it: the time (as JSON
// text), and where it was when DATETIME cannot hold it (see migration
// 0006): -1 before year 1, 1 after year 9999, the first or last time held
// in its place.
func attemptTime(at time.Time) (string, int) {
	switch {
	case at.Before(timeMin):
		return jsonTime(timeMin), -1
	case at.After(timeMax):
		return jsonTime(timeMax), 1
	}
	return jsonTime(at), 0
}

// AttemptList returns attempts of one endpoint, the most recent first.
func (s *Store) AttemptList(ctx context.Context, endpointID uuid.UUID, limit int) ([]store.Attempt, error) {
	rows, err := s.query(ctx, s.db, "attempt_list", endpointID, limit)
	if err != nil {
		return nil, fmt.Errorf("mysql: list attempts: %w", err)
	}
	defer rows.Close()
	var out []store.Attempt
	for rows.Next() {
		var a store.Attempt
		var us int64
		var eventType []byte
		var at sql.NullTime
		if err := rows.Scan(&a.EndpointID, &a.EventID, &eventType, &a.Attempt, &a.StatusCode, &us, &a.Response, &a.Error, &at); err != nil {
			return nil, fmt.Errorf("mysql: list attempts: %w", err)
		}
		a.EventType, a.Duration, a.At = string(eventType), time.Duration(us)*time.Microsecond, anyTime(at)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: list attempts: %w", err)
	}
	return out, nil
}

// AttemptSummary counts every endpoint's attempts at or after since, in
// one query (attempt_summary; see store.Endpoints).
func (s *Store) AttemptSummary(ctx context.Context, since time.Time) ([]store.AttemptSummary, error) {
	st := sqlstore.SummarySince(since)
	beyond := st.From.After(timeMax) // only the attempts after year 9999
	from := timeMin
	if !st.Unbounded && !beyond {
		from = st.From.UTC()
	}
	rows, err := s.query(ctx, s.db, "attempt_summary", st.Unbounded, from, beyond)
	if err != nil {
		return nil, fmt.Errorf("mysql: summarize attempts: %w", err)
	}
	defer rows.Close()
	var out []store.AttemptSummary
	for rows.Next() {
		var a store.AttemptSummary
		var last sql.NullTime // null when no time is readable
		if err := rows.Scan(&a.EndpointID, &a.Attempts, &a.Succeeded, &last); err != nil {
			return nil, fmt.Errorf("mysql: summarize attempts: %w", err)
		}
		a.Last = anyTime(last)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: summarize attempts: %w", err)
	}
	return out, nil
}
