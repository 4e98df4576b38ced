package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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
	err := s.pool.QueryRow(ctx, s.sql.Get("endpoint_create"), e.ID, e.Name, e.URL, strings.Join(e.Types, ","),
		e.Secret, e.RatePerSecond, e.Concurrency, e.Shadow, e.State).Scan(&e.CreatedAt, &e.UpdatedAt)
	if err != nil {
		return e, fmt.Errorf("postgres: create endpoint: %w", err)
	}
	return e, nil
}

// EndpointGet returns one endpoint, or store.ErrEndpointNotFound.
func (s *Store) EndpointGet(ctx context.Context, id uuid.UUID) (store.Endpoint, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("endpoint_columns")+" where id = $1", id)
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("postgres: get endpoint: %w", err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanEndpoint)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("postgres: endpoint %s: %w", id, store.ErrEndpointNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("postgres: get endpoint: %w", err)
	}
	return e, nil
}

// EndpointList returns every endpoint, oldest first.
func (s *Store) EndpointList(ctx context.Context) ([]store.Endpoint, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("endpoint_columns")+" order by created_at, id")
	if err != nil {
		return nil, fmt.Errorf("postgres: list endpoints: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanEndpoint)
	if err != nil {
		return nil, fmt.Errorf("postgres: list endpoints: %w", err)
	}
	return out, nil
}

func scanEndpoint(row pgx.CollectableRow) (store.Endpoint, error) {
	var e store.Endpoint
	var types string
	// Times that take every value: an infinity reads as the zero time.
	var prevUntil, failing, created, updated pgtype.Timestamptz
	err := row.Scan(&e.ID, &e.Name, &e.URL, &types, &e.Secret, &e.PreviousSecret, &prevUntil,
		&e.RatePerSecond, &e.Concurrency, &e.Shadow, &e.State, &failing, &created, &updated)
	e.Types = store.SplitTypes(types)
	e.PreviousSecretUntil, e.FailingSince = finiteTime(prevUntil), finiteTime(failing)
	e.CreatedAt, e.UpdatedAt = finiteTime(created), finiteTime(updated)
	return e, err
}

// EndpointSetState changes an endpoint's state (see store.Endpoints).
func (s *Store) EndpointSetState(ctx context.Context, id uuid.UUID, state string) error {
	return s.endpointTx(ctx, "set the state of", id, func(tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, s.sql.Get("endpoint_set_state"), id, state)
		if err == nil && state == store.EndpointEnabled {
			_, err = tx.Exec(ctx, s.sql.Get("endpoint_wake_pending"), id)
		}
		return tag.RowsAffected(), err
	})
}

// EndpointDelete removes an endpoint, its deliveries and its attempts.
func (s *Store) EndpointDelete(ctx context.Context, id uuid.UUID) error {
	return s.endpointTx(ctx, "remove", id, func(tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, s.sql.Get("endpoint_delete"), id)
		return tag.RowsAffected(), err
	})
}

// EndpointRotateSecret makes secret the current one (see store.Endpoints).
func (s *Store) EndpointRotateSecret(ctx context.Context, id uuid.UUID, secret string, graceUntil time.Time) error {
	return s.endpointTx(ctx, "rotate the secret of", id, func(tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, s.sql.Get("endpoint_rotate_secret"), id, secret, graceUntil)
		return tag.RowsAffected(), err
	})
}

// endpointTx runs fn, which changes endpoint id and reports how many rows
// it changed, in a transaction: none means the endpoint is not there.
func (s *Store) endpointTx(ctx context.Context, what string, id uuid.UUID, fn func(pgx.Tx) (int64, error)) error {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		n, err = fn(tx)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("postgres: %s endpoint %s: %w", what, id, err)
	case n == 0:
		return fmt.Errorf("postgres: endpoint %s: %w", id, store.ErrEndpointNotFound)
	}
	return nil
}

// EndpointFailing sets FailingSince unless set, and returns it.
func (s *Store) EndpointFailing(ctx context.Context, id uuid.UUID, now time.Time) (time.Time, error) {
	var since time.Time
	err := s.pool.QueryRow(ctx, s.sql.Get("endpoint_failing"), id, now).Scan(&since)
	if errors.Is(err, pgx.ErrNoRows) {
		return since, fmt.Errorf("postgres: endpoint %s: %w", id, store.ErrEndpointNotFound)
	}
	if err != nil {
		return since, fmt.Errorf("postgres: endpoint failing: %w", err)
	}
	return since, nil
}

// EndpointRecovered clears FailingSince.
func (s *Store) EndpointRecovered(ctx context.Context, id uuid.UUID) error {
	if _, err := s.pool.Exec(ctx, s.sql.Get("endpoint_recovered"), id); err != nil {
		return fmt.Errorf("postgres: endpoint recovered: %w", err)
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
	headers := ev.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	tag, err := s.pool.Exec(ctx, s.sql.Get("delivery_insert"), ev.ID, ev.AggregateType, ev.AggregateID,
		ev.EventType, string(ev.Payload), headers, nullTime(ev.AvailableAt), rawIDs(endpoints))
	if err != nil {
		return 0, fmt.Errorf("postgres: insert deliveries: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// DeliveryClaim leases due deliveries of one endpoint (see store.Endpoints).
func (s *Store) DeliveryClaim(ctx context.Context, p store.DeliveryClaimParams) ([]store.EndpointDelivery, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("delivery_claim"), p.EndpointID, p.Limit, p.Owner, p.Lease.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("postgres: claim deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim deliveries: %w", err)
	}
	return out, nil
}

func scanDelivery(row pgx.CollectableRow) (store.EndpointDelivery, error) {
	var d store.EndpointDelivery
	var payload string
	// Headers and times that take every value (see scanRecord).
	var headers []byte
	var available, created pgtype.Timestamptz
	err := row.Scan(&d.ID, &d.AggregateType, &d.AggregateID, &d.EventType, &payload, &headers,
		&d.EndpointID, &d.Status, &d.Attempt, &available, &d.LastError, &created)
	d.Payload = []byte(payload)
	d.Headers, _ = sqlstore.DecodeHeaders(headers)
	d.AvailableAt, d.CreatedAt = finiteTime(available), finiteTime(created)
	return d, err
}

// DeliverySettle records the outcomes of deliveries leased to owner.
func (s *Store) DeliverySettle(ctx context.Context, owner string, outcomes []store.DeliveryOutcome) error {
	var b pgx.Batch
	for _, o := range outcomes {
		b.Queue(s.sql.Get("delivery_settle"), o.EventID, o.EndpointID, owner, o.Status,
			nullTime(o.AvailableAt), store.ErrorText(o.LastError, sqlstore.ErrorTextMax))
	}
	if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("postgres: settle deliveries: %w", err)
	}
	return nil
}

// DeliveryReclaim returns expired leases' deliveries to pending, or fails
// them.
func (s *Store) DeliveryReclaim(ctx context.Context, maxAttempts int) (int, error) {
	tag, err := s.pool.Exec(ctx, s.sql.Get("delivery_reclaim"), maxAttempts)
	if err != nil {
		return 0, fmt.Errorf("postgres: reclaim deliveries: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// DeliveryRetryFailed sends failed deliveries back to the queue.
func (s *Store) DeliveryRetryFailed(ctx context.Context, endpointID uuid.UUID, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, s.sql.Get("delivery_retry_failed"), endpointID, limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: retry failed deliveries: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// DeliveryDue returns the endpoints among those given with due deliveries.
func (s *Store) DeliveryDue(ctx context.Context, endpoints []uuid.UUID) ([]uuid.UUID, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("delivery_due"), rawIDs(endpoints))
	if err != nil {
		return nil, fmt.Errorf("postgres: due deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("postgres: due deliveries: %w", err)
	}
	return out, nil
}

// DeliveryCounts counts one endpoint's deliveries by status.
func (s *Store) DeliveryCounts(ctx context.Context, endpointID uuid.UUID) (store.DeliveryCounts, error) {
	var c store.DeliveryCounts
	err := s.pool.QueryRow(ctx, s.sql.Get("delivery_counts"), endpointID).Scan(&c.Pending, &c.Processing, &c.Done, &c.Failed, &c.Dropped)
	if err != nil {
		return c, fmt.Errorf("postgres: count deliveries: %w", err)
	}
	return c, nil
}

// DeliveryList returns deliveries of one endpoint, oldest first.
func (s *Store) DeliveryList(ctx context.Context, endpointID uuid.UUID, status string, limit int) ([]store.EndpointDelivery, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("delivery_list"), endpointID, status, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("postgres: list deliveries: %w", err)
	}
	return out, nil
}

// AttemptInsert writes a batch of attempts in one statement.
func (s *Store) AttemptInsert(ctx context.Context, attempts []store.Attempt) error {
	n := len(attempts)
	endpoints, events := make([]uuid.UUID, n), make([]uuid.UUID, n)
	types, responses, errs := make([]string, n), make([]string, n), make([]string, n)
	nums, codes := make([]int32, n), make([]int32, n)
	durations, at := make([]int64, n), make([]time.Time, n)
	for i, a := range attempts {
		endpoints[i], events[i], types[i] = a.EndpointID, a.EventID, a.EventType
		nums[i], codes[i], durations[i], at[i] = int32(a.Attempt), int32(a.StatusCode), a.Duration.Microseconds(), a.At
		responses[i], errs[i] = sqlstore.AttemptText(a)
	}
	_, err := s.pool.Exec(ctx, s.sql.Get("attempt_insert"), rawIDs(endpoints), rawIDs(events), types, nums, codes, durations, responses, errs, at)
	if err != nil {
		return fmt.Errorf("postgres: write attempts: %w", err)
	}
	return nil
}

// AttemptList returns attempts of one endpoint, the most recent first.
func (s *Store) AttemptList(ctx context.Context, endpointID uuid.UUID, limit int) ([]store.Attempt, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("attempt_list"), endpointID, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list attempts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Attempt, error) {
		var a store.Attempt
		var us int64
		var at pgtype.Timestamptz
		err := row.Scan(&a.EndpointID, &a.EventID, &a.EventType, &a.Attempt, &a.StatusCode, &us, &a.Response, &a.Error, &at)
		a.Duration = time.Duration(us) * time.Microsecond
		a.At = finiteTime(at)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list attempts: %w", err)
	}
	return out, nil
}

// EndpointsPurge deletes old attempts and finished deliveries.
func (s *Store) EndpointsPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	total := 0
	for _, q := range []string{"attempt_purge", "delivery_purge"} {
		tag, err := s.pool.Exec(ctx, s.sql.Get(q), before, limit)
		if err != nil {
			return total, fmt.Errorf("postgres: purge endpoints' rows: %w", err)
		}
		total += int(tag.RowsAffected())
	}
	return total, nil
}

// EndpointUpdate is not written yet (see store.Endpoints).
func (s *Store) EndpointUpdate(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	return store.Endpoint{}, errors.New("not implemented yet")
}

// EndpointLane is not written yet (see store.Endpoints).
func (s *Store) EndpointLane(e store.Endpoint) store.Source { return nil }
