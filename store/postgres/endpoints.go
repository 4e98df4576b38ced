package postgres

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

//go:embed endpoints.sql
var endpointsSQL string

// EndpointCreate writes a new endpoint (see store.Endpoints).
func (s *Store) EndpointCreate(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	if err := sqlstore.CheckEndpoint(e); err != nil {
		return e, fmt.Errorf("postgres: create endpoint: %w", err)
	}
	e = sqlstore.NewEndpoint(e)
	err := s.pool.QueryRow(ctx, s.sql.Get("endpoint_create"), e.ID, e.Name, e.URL, strings.Join(e.Types, ","),
		e.Secret, e.RatePerSecond, e.Concurrency, e.Shadow, e.State, e.AllowPrivate,
		sqlstore.SealedArg(e.Sealed.Data), e.Sealed.Key, e.Sealed.Fingerprint, e.Sealed.Auth,
		e.Filter, e.Envelope, e.Signature).Scan(&e.CreatedAt, &e.UpdatedAt)
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
	var prevUntil, failing, breaker, created, updated pgtype.Timestamptz
	err := row.Scan(&e.ID, &e.Name, &e.URL, &types, &e.Secret, &e.PreviousSecret, &prevUntil,
		&e.RatePerSecond, &e.Concurrency, &e.Shadow, &e.AllowPrivate, &e.State, &failing, &breaker, &created, &updated,
		&e.Sealed.Data, &e.Sealed.Key, &e.Sealed.Fingerprint, &e.Sealed.Auth, &e.Filter, &e.Envelope, &e.Signature)
	e.Sealed.Data = sqlstore.SealedRead(e.Sealed.Data)
	e.Types = store.SplitTypes(types)
	e.PreviousSecretUntil, e.FailingSince = finiteTime(prevUntil), finiteTime(failing)
	e.BreakerOpenUntil = finiteTime(breaker)
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

// EndpointRotateSecret makes secret the current one of an unsealed
// endpoint (see store.Endpoints).
func (s *Store) EndpointRotateSecret(ctx context.Context, id uuid.UUID, secret string, graceUntil time.Time) error {
	var rotated, found bool
	err := s.pool.QueryRow(ctx, s.sql.Get("endpoint_rotate_secret"), id, secret, graceUntil).Scan(&rotated, &found)
	return swapped("rotate the secret of", id, rotated, found, err)
}

// EndpointSeal replaces the endpoint's sealed secrets if they are still
// was, in one statement (endpoint_seal; see store.Endpoints).
func (s *Store) EndpointSeal(ctx context.Context, id uuid.UUID, sealed store.SealedSecrets, previousUntil time.Time, url string, was []byte) error {
	if err := sqlstore.CheckSealed(sealed); err != nil {
		return fmt.Errorf("postgres: seal endpoint %s: %w", id, err)
	}
	until := pgtype.Timestamptz{Time: previousUntil, Valid: !previousUntil.IsZero()}
	var done, found bool
	err := s.pool.QueryRow(ctx, s.sql.Get("endpoint_seal"), id, sealed.Data, sealed.Key, sealed.Fingerprint, sealed.Auth,
		until, sqlstore.SealedArg(was), url).Scan(&done, &found)
	return swapped("seal", id, done, found, err)
}

// swapped is the error of a conditional change of endpoint id (what names
// it), which was made (done) or not, of an endpoint that is there (found)
// or not.
func swapped(what string, id uuid.UUID, done, found bool, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("postgres: %s endpoint %s: %w", what, id, err)
	case !found:
		return fmt.Errorf("postgres: endpoint %s: %w", id, store.ErrEndpointNotFound)
	case !done:
		return fmt.Errorf("postgres: %s endpoint %s: %w", what, id, store.ErrEndpointChanged)
	}
	return nil
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
func (d *Driver) EndpointFailing(ctx context.Context, id uuid.UUID, now time.Time) (time.Time, error) {
	var since time.Time
	err := d.pool.QueryRow(ctx, d.sql.Get("endpoint_failing"), id, now).Scan(&since)
	if errors.Is(err, pgx.ErrNoRows) {
		return since, fmt.Errorf("postgres: endpoint %s: %w", id, store.ErrEndpointNotFound)
	}
	if err != nil {
		return since, fmt.Errorf("postgres: endpoint failing: %w", err)
	}
	return since, nil
}

// EndpointRecovered clears FailingSince.
func (d *Driver) EndpointRecovered(ctx context.Context, id uuid.UUID) error {
	if _, err := d.pool.Exec(ctx, d.sql.Get("endpoint_recovered"), id); err != nil {
		return fmt.Errorf("postgres: endpoint recovered: %w", err)
	}
	return nil
}

// EndpointBreaker records the state of the endpoint's breaker: open until
// openUntil, closed (null) when it is zero.
func (d *Driver) EndpointBreaker(ctx context.Context, id uuid.UUID, openUntil time.Time) error {
	until := pgtype.Timestamptz{Time: openUntil, Valid: !openUntil.IsZero()}
	tag, err := d.pool.Exec(ctx, d.sql.Get("endpoint_breaker"), id, until)
	switch {
	case err != nil:
		return fmt.Errorf("postgres: record the breaker of endpoint %s: %w", id, err)
	case tag.RowsAffected() == 0:
		return fmt.Errorf("postgres: endpoint %s: %w", id, store.ErrEndpointNotFound)
	}
	return nil
}

// DeliveryInsert writes the deliveries of a batch of routes in one
// statement, numbered in the routes' order (see store.Endpoints): a batch
// whose routes were all untried (no Route.Tried, or only zero ones) with
// delivery_insert, one with tried endpoints with delivery_insert_tried,
// which takes four arrays more. A batch with a Tried that
// sqlstore.CheckRoutes refuses writes nothing.
func (d *Driver) DeliveryInsert(ctx context.Context, routes []store.Route) (int, error) {
	tried, err := sqlstore.CheckRoutes(routes)
	if err != nil {
		return 0, fmt.Errorf("postgres: insert deliveries: %w", err)
	}
	var n int
	for _, r := range routes {
		n += len(r.Endpoints)
	}
	if n == 0 {
		return 0, nil
	}
	events, endpoints := make([][16]byte, 0, n), make([][16]byte, 0, n)
	aggTypes, aggIDs, types := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	payloads, headers := make([]string, 0, n), make([]string, 0, n)
	available := make([]pgtype.Timestamptz, 0, n)
	for _, r := range routes {
		ev := r.Event
		h := "{}"
		if len(ev.Headers) > 0 {
			b, _ := json.Marshal(ev.Headers) // a map of strings always encodes
			h = string(b)
		}
		at := pgtype.Timestamptz{Time: ev.AvailableAt, Valid: !ev.AvailableAt.IsZero()}
		for _, id := range r.Endpoints {
			events, endpoints = append(events, ev.ID), append(endpoints, id)
			aggTypes, aggIDs, types = append(aggTypes, ev.AggregateType), append(aggIDs, ev.AggregateID), append(types, ev.EventType)
			payloads, headers, available = append(payloads, string(ev.Payload)), append(headers, h), append(available, at)
		}
	}
	query, args := "delivery_insert", []any{events, endpoints, aggTypes, aggIDs, types, payloads, headers, available}
	if tried {
		query, args = "delivery_insert_tried", append(args, triedArrays(routes, n)...)
	}
	tag, err := d.pool.Exec(ctx, d.sql.Get(query), args...)
	if err != nil {
		return 0, fmt.Errorf("postgres: insert deliveries: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// triedArrays are the arrays that delivery_insert_tried takes beside
// delivery_insert's, for the n deliveries of routes (checked by
// sqlstore.CheckRoutes): status, attempts, retry time (null: the event's)
// and last error (null: none), as the sqlstore.Tried functions write them.
func triedArrays(routes []store.Route, n int) []any {
	statuses, attempts := make([]string, 0, n), make([]int32, 0, n)
	retryAt, lastErrors := make([]pgtype.Timestamptz, 0, n), make([]pgtype.Text, 0, n)
	for _, r := range routes {
		for i := range r.Endpoints {
			var t store.Tried
			if r.Tried != nil {
				t = r.Tried[i]
			}
			status, text := sqlstore.TriedStatus(t), sqlstore.TriedError(t)
			statuses, attempts = append(statuses, status), append(attempts, sqlstore.TriedAttempts(t))
			retryAt = append(retryAt, pgtype.Timestamptz{Time: t.RetryAt, Valid: status == store.StatusPending && !t.RetryAt.IsZero()})
			lastErrors = append(lastErrors, pgtype.Text{String: text, Valid: text != ""})
		}
	}
	return []any{statuses, attempts, retryAt, lastErrors}
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

// DeliveryPending returns the endpoints among those given with pending
// deliveries (delivery_pending: one index probe each).
func (d *Driver) DeliveryPending(ctx context.Context, endpoints []uuid.UUID) ([]uuid.UUID, error) {
	return d.someEndpoints(ctx, "delivery_pending", "pending deliveries", endpoints)
}

// DeliveryDue returns the endpoints among those given with due deliveries.
func (d *Driver) DeliveryDue(ctx context.Context, endpoints []uuid.UUID) ([]uuid.UUID, error) {
	return d.someEndpoints(ctx, "delivery_due", "due deliveries", endpoints)
}

// someEndpoints runs the named query, which returns some of the endpoints
// it is given; what names it in an error.
func (s *Store) someEndpoints(ctx context.Context, query, what string, endpoints []uuid.UUID) ([]uuid.UUID, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get(query), rawIDs(endpoints))
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", what, err)
	}
	return out, nil
}

// DeliveryCounts counts one endpoint's deliveries by status.
func (s *Store) DeliveryCounts(ctx context.Context, endpointID uuid.UUID) (store.DeliveryCounts, error) {
	var c store.DeliveryCounts
	var age float64
	err := s.pool.QueryRow(ctx, s.sql.Get("delivery_counts"), endpointID).Scan(&c.Pending, &c.Processing, &c.Done, &c.Failed, &c.Dropped, &age)
	if err != nil {
		return c, fmt.Errorf("postgres: count deliveries: %w", err)
	}
	c.OldestPendingAge = time.Duration(age * float64(time.Second))
	return c, nil
}

// DeliveryCountsAll counts every endpoint's deliveries by status in one
// query (delivery_counts_all).
func (s *Store) DeliveryCountsAll(ctx context.Context) (map[uuid.UUID]store.DeliveryCounts, error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("delivery_counts_all"))
	if err != nil {
		return nil, fmt.Errorf("postgres: count deliveries of every endpoint: %w", err)
	}
	out := map[uuid.UUID]store.DeliveryCounts{}
	var id uuid.UUID
	var c store.DeliveryCounts
	var age float64
	_, err = pgx.ForEachRow(rows, []any{&id, &c.Pending, &c.Processing, &c.Done, &c.Failed, &c.Dropped, &age}, func() error {
		c.OldestPendingAge = time.Duration(age * float64(time.Second))
		out[id] = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: count deliveries of every endpoint: %w", err)
	}
	return out, nil
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
func (d *Driver) AttemptInsert(ctx context.Context, attempts []store.Attempt) error {
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
	_, err := d.pool.Exec(ctx, d.sql.Get("attempt_insert"), rawIDs(endpoints), rawIDs(events), types, nums, codes, durations, responses, errs, at)
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

// AttemptSummary counts every endpoint's attempts at or after since, in
// one query (attempt_summary; see store.Endpoints).
func (s *Store) AttemptSummary(ctx context.Context, since time.Time) ([]store.AttemptSummary, error) {
	st := sqlstore.SummarySince(since)
	from := pgtype.Timestamptz{Time: st.From, Valid: true}
	if st.Unbounded {
		from = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	}
	rows, err := s.pool.Query(ctx, s.sql.Get("attempt_summary"), from, st.Min, st.End)
	if err != nil {
		return nil, fmt.Errorf("postgres: summarize attempts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.AttemptSummary, error) {
		var a store.AttemptSummary
		var last pgtype.Timestamptz
		err := row.Scan(&a.EndpointID, &a.Attempts, &a.Succeeded, &last)
		a.Last = finiteTime(last)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: summarize attempts: %w", err)
	}
	return out, nil
}

// EndpointUpdate changes an endpoint's settings, only if its updated_at is
// still e.UpdatedAt when that is not zero (endpoint_update; see
// store.Endpoints). When it changes no row, endpoint_exists tells an
// endpoint that changed from one not there.
func (s *Store) EndpointUpdate(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	if err := sqlstore.CheckSettings(e); err != nil {
		return store.Endpoint{}, fmt.Errorf("postgres: update endpoint %s: %w", e.ID, err)
	}
	if e.UpdatedAt.IsZero() || !sqlstore.Unmatchable(e.UpdatedAt) {
		was := pgtype.Timestamptz{Time: e.UpdatedAt, Valid: !e.UpdatedAt.IsZero()}
		rows, err := s.pool.Query(ctx, s.sql.Get("endpoint_update"), e.ID, e.Name, e.URL, strings.Join(e.Types, ","),
			e.RatePerSecond, e.Concurrency, e.Shadow, e.AllowPrivate, e.Filter, e.Envelope, e.Signature, was)
		if err != nil {
			return store.Endpoint{}, fmt.Errorf("postgres: update endpoint %s: %w", e.ID, err)
		}
		got, err := pgx.CollectExactlyOneRow(rows, scanEndpoint)
		if !errors.Is(err, pgx.ErrNoRows) {
			if err != nil {
				return store.Endpoint{}, fmt.Errorf("postgres: update endpoint %s: %w", e.ID, err)
			}
			return got, nil
		}
	}
	var found bool
	err := s.pool.QueryRow(ctx, s.sql.Get("endpoint_exists"), e.ID).Scan(&found)
	return store.Endpoint{}, swapped("update", e.ID, false, found, err)
}

// EndpointLane returns the Source of e's deliveries (see store.Endpoints):
// its claims lease deliveries as the outbox's lease events, one
// endpoint_leases row per claim (see endpoints.sql).
func (d *Driver) EndpointLane(e store.Endpoint) store.Source {
	return &lane{s: d.Store, id: e.ID, name: e.Name, shadow: e.Shadow}
}

// lane is one endpoint's deliveries as a store.Source.
type lane struct {
	s      *Store
	id     uuid.UUID
	name   string
	shadow bool
	// walkedTo is the last aggregate an ordered claim's walk for heads
	// took: the next walk starts after it (nil: at the first aggregate).
	walkedTo atomic.Pointer[aggregateKey]
}

// endpoint is what the lane knows of its endpoint.
func (l *lane) endpoint() store.Endpoint {
	return store.Endpoint{ID: l.id, Name: l.name, Shadow: l.shadow}
}

// String names the store, its schema and the endpoint (name and id).
func (l *lane) String() string {
	return l.s.String() + " " + sqlstore.LaneName(l.endpoint())
}

// CheckSchema checks the store's migrations: ordered claims need nothing
// more than them (the index of migration 0009).
func (l *lane) CheckSchema(ctx context.Context, _ store.SchemaParams) error {
	return l.s.CheckSchema(ctx, store.SchemaParams{})
}

// Listen returns an error wrapping store.ErrCannotListen: package endpoint
// wakes its lanes itself.
func (l *lane) Listen(context.Context, func(store.Listening), func()) error {
	return sqlstore.LaneCannotListen("postgres", l.endpoint())
}

// Claim leases due deliveries of the endpoint (lane_claim,
// lane_claim_ordered) in the lane's claims' turn (lane_claim_lock),
// committed asynchronously as the outbox's claims are, and returns them in
// sequence order.
func (l *lane) Claim(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error) {
	batch := &pgx.Batch{}
	batch.Queue(l.s.sql.Get("relay_async_commit"))
	batch.Queue(l.s.sql.Get("lane_claim_lock"), l.id)
	if p.Ordered {
		from := l.walkedTo.Load()
		start := aggregateKey{}
		if from != nil {
			start = *from
		}
		batch.Queue(l.s.sql.Get("lane_claim_ordered"), l.id, p.Limit, p.Owner, p.Lease.Milliseconds(), start.typ, start.id, p.MaxBytes, from == nil)
	} else {
		after := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
		if !p.After.IsZero() {
			after = pgtype.Timestamptz{Time: p.After.AvailableAt, Valid: true}
		}
		batch.Queue(l.s.sql.Get("lane_claim"), l.id, p.Limit, p.Owner, p.Lease.Milliseconds(), after, p.After.Seq, p.MaxBytes)
	}
	results := l.s.pool.SendBatch(ctx, batch)
	defer results.Close()
	for range 2 {
		if _, err := results.Exec(); err != nil {
			return nil, fmt.Errorf("postgres: claim deliveries of endpoint %s: %w", l.id, err)
		}
	}
	rows, err := results.Query()
	if err != nil {
		return nil, fmt.Errorf("postgres: claim deliveries of endpoint %s: %w", l.id, err)
	}
	// Each row scans into r, in types that take every value the columns
	// hold: a row the store cannot read is returned with ClaimedEvent.Invalid,
	// never failing the claim, which has leased it.
	var (
		r       laneRow
		walkEnd bool
		to      *aggregateKey
	)
	dest := []any{(*[16]byte)(&r.d.ID), &r.d.OutboxSeq, &r.d.AggregateType, &r.d.AggregateID, &r.d.EventType, &r.d.Payload, &r.headers, &r.attempts, &r.created, &r.available, &r.d.Lease}
	if p.Ordered {
		dest = append(dest, &walkEnd)
	}
	out, err := pgx.AppendRows(make([]store.ClaimedEvent, 0, min(p.Limit, claimPresize)), rows, func(row pgx.CollectableRow) (store.ClaimedEvent, error) {
		r = laneRow{}
		if err := row.Scan(dest...); err != nil {
			return r.d, err
		}
		if walkEnd {
			to = &aggregateKey{r.d.AggregateType, r.d.AggregateID}
		}
		return r.delivery(), nil
	})
	if err == nil {
		err = results.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: claim deliveries of endpoint %s: %w", l.id, err)
	}
	if p.Ordered {
		// A walk that took the aggregate of to goes on after it; a claim
		// that found fewer heads than it asked for walked to the last
		// aggregate (or needed no walk): the next walk starts at the first.
		switch {
		case to != nil && len(out) >= p.Limit:
			l.walkedTo.Store(to)
		case len(out) < p.Limit:
			l.walkedTo.Store(nil)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OutboxSeq < out[j].OutboxSeq })
	return out, nil
}

// laneRow is one row of a lane's claim as scanned: the columns that may
// hold values no delivery has in types that take them.
type laneRow struct {
	d                  store.ClaimedEvent
	headers            []byte
	attempts           int64 // the attempts that ended before the claim
	created, available pgtype.Timestamptz
}

// delivery is the row as a delivery, its problems in Invalid (the fields
// they name left zero).
func (r *laneRow) delivery() store.ClaimedEvent {
	d := r.d
	var bad sqlstore.Problems
	var problem string
	d.Attempt, problem = sqlstore.Attempt(r.attempts)
	bad.Add("attempts", problem)
	d.CreatedAt, problem = readTime(r.created)
	bad.Add("created_at", problem)
	d.AvailableAt, problem = readTime(r.available)
	bad.Add("available_at", problem)
	bad.Add("event_type", sqlstore.EventTypeProblem(d.EventType))
	d.Headers, problem = sqlstore.DecodeHeaders(r.headers)
	bad.Add("headers", problem)
	if bad != nil {
		d.Invalid = bad.String()
	}
	return d
}

// Settle records a batch of outcomes in one statement (lane_settle), under
// the owner's lease lock, committed asynchronously unless it releases
// deliveries (as the outbox's Settle). Error texts are cleaned and cut
// (store.ErrorText).
func (l *lane) Settle(ctx context.Context, p store.SettleParams) error {
	retryIDs := make([][16]byte, len(p.Retry))
	retryAt := make([]time.Time, len(p.Retry))
	retryErr := make([]string, len(p.Retry))
	// The deliveries that leave their lease, and the claim of each (0: any).
	leaving := make([][16]byte, 0, len(p.Retry)+len(p.Failed)+len(p.Release))
	leavingClaims := make([]int64, 0, cap(leaving))
	for i, r := range p.Retry {
		retryIDs[i], retryAt[i], retryErr[i] = r.ID, r.AvailableAt, store.ErrorText(r.LastError, sqlstore.ErrorTextMax)
		leaving, leavingClaims = append(leaving, r.ID), append(leavingClaims, r.Lease)
	}
	failIDs := make([][16]byte, len(p.Failed))
	failErr := make([]string, len(p.Failed))
	for i, f := range p.Failed {
		failIDs[i], failErr[i] = f.ID, store.ErrorText(f.LastError, sqlstore.ErrorTextMax)
		leaving, leavingClaims = append(leaving, f.ID), append(leavingClaims, f.Lease)
	}
	for _, r := range p.Release {
		leaving, leavingClaims = append(leaving, r.ID), append(leavingClaims, r.Lease)
	}
	ended := p.Ended
	if ended == nil {
		ended = []int64{}
	}
	batch := &pgx.Batch{}
	if len(p.Release) == 0 {
		batch.Queue(l.s.sql.Get("relay_async_commit"))
	}
	batch.Queue(l.s.sql.Get("lane_lease_lock"), l.id, p.Owner)
	batch.Queue(l.s.sql.Get("lane_settle"), l.id, p.Owner, rawIDs(p.Done), p.KeepDone, retryIDs, retryAt, retryErr,
		failIDs, failErr, l.shadow, leaving, leavingClaims, ended)
	if err := l.s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("postgres: settle deliveries of endpoint %s: %w", l.id, err)
	}
	return nil
}

// ExtendLease renews owner's leases that list any of ids, under its lease
// lock (one round trip), and returns those of ids still held, in the order
// of ids.
func (l *lane) ExtendLease(ctx context.Context, owner string, ids []uuid.UUID, lease time.Duration) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	batch := &pgx.Batch{}
	batch.Queue(l.s.sql.Get("lane_lease_lock"), l.id, owner)
	batch.Queue(l.s.sql.Get("lane_extend_lease"), l.id, owner, rawIDs(ids), lease.Milliseconds())
	results := l.s.pool.SendBatch(ctx, batch)
	defer results.Close()
	var renewed []uuid.UUID
	_, err := results.Exec()
	if err == nil {
		var rows pgx.Rows
		if rows, err = results.Query(); err == nil {
			renewed, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		}
	}
	if err == nil {
		err = results.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: extend leases on endpoint %s: %w", l.id, err)
	}
	return sqlstore.HeldInOrder(ids, renewed), nil
}

// ReclaimExpired returns the endpoint's deliveries whose lease expired to
// the queue, or fails (drops) those that used p.MaxAttempts. It takes the
// lease lock of each expired relay first, in one order, in a transaction
// of its own (two round trips; it runs a few times per lease period).
func (l *lane) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]store.Reclaimed, error) {
	var out []store.Reclaimed
	err := pgx.BeginFunc(ctx, l.s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, l.s.sql.Get("lane_reclaim_lock"), l.id)
		if err != nil {
			return err
		}
		owners, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(owners) == 0 {
			return err
		}
		rows, err = tx.Query(ctx, l.s.sql.Get("lane_reclaim_expired"), l.id, p.MaxAttempts, l.shadow, owners)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Reclaimed, error) {
			var r store.Reclaimed
			err := row.Scan(&r.Owner, &r.Events)
			return r, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: reclaim expired leases on endpoint %s: %w", l.id, err)
	}
	return out, nil
}

// Expire deletes up to p.Limit of the endpoint's finished (done or
// dropped) deliveries processed before p.Before, and up to p.Limit of its
// attempts made before it; Events counts both. Limit is from 1 to
// store.HistoryBatchMax, as the outbox's. On a partitioned attempts log or
// partitioned deliveries (Partition), their partitions are dropped instead
// (expireDelivered).
func (l *lane) Expire(ctx context.Context, p store.ExpireParams) (store.ExpireResult, error) {
	if p.Keep != nil {
		return store.ExpireResult{}, store.ErrKeepUnsupported
	}
	if err := sqlstore.CheckExpireLimit(p.Limit); err != nil {
		return store.ExpireResult{}, fmt.Errorf("postgres: endpoint %s: %w", l.id, err)
	}
	attempts, err := l.s.deliveredKind(ctx, attemptsTable)
	if err != nil {
		return store.ExpireResult{}, err
	}
	deliveries, err := l.s.deliveredKind(ctx, deliveriesTable)
	if err != nil {
		return store.ExpireResult{}, err
	}
	if attempts == "p" || deliveries == "p" {
		return l.expireDelivered(ctx, p, deliveries, attempts)
	}
	var n int
	if err := l.s.pool.QueryRow(ctx, l.s.sql.Get("lane_purge_done"), l.id, p.Before, p.Limit).Scan(&n); err != nil {
		return store.ExpireResult{}, fmt.Errorf("postgres: purge finished deliveries of endpoint %s: %w", l.id, err)
	}
	return store.ExpireResult{Events: n, More: n >= p.Limit}, nil
}
