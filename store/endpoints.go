package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
)

// States of a webhook endpoint.
const (
	// EndpointEnabled endpoints receive their events.
	EndpointEnabled = "enabled"
	// EndpointDisabled endpoints were disabled by an operator: no
	// deliveries are made nor written for them until they are enabled.
	EndpointDisabled = "disabled"
	// EndpointAutoDisabled endpoints failed for too long and were
	// disabled by the dispatcher: deliveries are still written for them,
	// and wait until they are enabled.
	EndpointAutoDisabled = "auto_disabled"
)

// StatusDropped is the final status of a shadow endpoint's delivery that
// used all its attempts: it is not a dead letter, only counted.
const StatusDropped = "dropped"

// ErrEndpointNotFound is returned when an endpoint id is not in the store.
var ErrEndpointNotFound = errors.New("store: endpoint not found")

// Endpoint is one webhook endpoint: where its events go, which ones, and
// how fast.
type Endpoint struct {
	ID   uuid.UUID
	Name string
	URL  string
	// Types are globs on the event type (path.Match); empty: every event.
	Types []string
	// Secret signs every delivery. PreviousSecret, until
	// PreviousSecretUntil, signs them as well (a rotation's grace period).
	Secret              string
	PreviousSecret      string
	PreviousSecretUntil time.Time
	// RatePerSecond bounds the deliveries started per second (0: no bound).
	RatePerSecond float64
	// Concurrency bounds the deliveries in flight at once.
	Concurrency int
	// Shadow endpoints receive a copy of the traffic; their failures are
	// never dead letters (StatusDropped).
	Shadow bool
	// State is EndpointEnabled, EndpointDisabled or EndpointAutoDisabled.
	State string
	// FailingSince is when the endpoint's current run of failures began;
	// zero when its last attempt succeeded.
	FailingSince time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Secrets are the secrets that sign a delivery made at now: the current
// one, and the previous one during its grace period.
func (e Endpoint) Secrets(now time.Time) []string {
	if e.PreviousSecret != "" && now.Before(e.PreviousSecretUntil) {
		return []string{e.Secret, e.PreviousSecret}
	}
	return []string{e.Secret}
}

// EndpointDelivery is one event to deliver to one endpoint: a copy of the
// event (the outbox row may be gone) and the delivery's own state.
type EndpointDelivery struct {
	postbox.Event
	EndpointID uuid.UUID
	// Status is pending, processing, done, failed or dropped.
	Status string
	// Attempt is the number of the attempt a claim starts (from 1); in
	// other reads, the attempts made so far.
	Attempt     int
	AvailableAt time.Time
	LastError   string
	CreatedAt   time.Time
}

// DeliveryClaimParams selects the deliveries a dispatcher takes.
type DeliveryClaimParams struct {
	EndpointID uuid.UUID
	Owner      string
	Limit      int
	Lease      time.Duration
}

// DeliveryOutcome is how one claimed delivery ended.
type DeliveryOutcome struct {
	EventID    uuid.UUID
	EndpointID uuid.UUID
	// Status is StatusDone, StatusPending (retry at AvailableAt),
	// StatusFailed or StatusDropped.
	Status      string
	AvailableAt time.Time
	LastError   string
}

// DeliveryCounts counts one endpoint's deliveries by status.
type DeliveryCounts struct {
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Done       int64 `json:"done"`
	Failed     int64 `json:"failed"`
	Dropped    int64 `json:"dropped"`
}

// Attempt is one delivery attempt, as the attempts log keeps it.
type Attempt struct {
	EndpointID uuid.UUID `json:"endpoint_id"`
	EventID    uuid.UUID `json:"event_id"`
	EventType  string    `json:"event_type"`
	Attempt    int       `json:"attempt"`
	// StatusCode is the HTTP status of the answer, 0 when none came.
	StatusCode int           `json:"status_code"`
	Duration   time.Duration `json:"duration_ns"`
	// Response is the start of the response body (at most
	// AttemptResponseMax bytes).
	Response string `json:"response,omitempty"`
	// Error is why the attempt failed; empty when it succeeded.
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// AttemptResponseMax is how much of a response body the attempts log keeps.
const AttemptResponseMax = 1024

// Endpoints is the store of webhook endpoints, their deliveries and the
// attempts log: what package endpoint and postbox endpoints call. Both
// stores implement it, and pass store/storetest's RunEndpoints.
type Endpoints interface {
	// EndpointCreate writes a new endpoint (e.ID, when zero, is chosen)
	// and returns it as stored.
	EndpointCreate(ctx context.Context, e Endpoint) (Endpoint, error)
	// EndpointGet returns one endpoint, or ErrEndpointNotFound.
	EndpointGet(ctx context.Context, id uuid.UUID) (Endpoint, error)
	// EndpointList returns every endpoint, oldest first.
	EndpointList(ctx context.Context) ([]Endpoint, error)
	// EndpointSetState changes an endpoint's state. Enabling clears
	// FailingSince and makes its pending deliveries due at once.
	EndpointSetState(ctx context.Context, id uuid.UUID, state string) error
	// EndpointDelete removes an endpoint with its deliveries and attempts.
	EndpointDelete(ctx context.Context, id uuid.UUID) error
	// EndpointRotateSecret makes secret the current one; the current one
	// keeps signing until graceUntil.
	EndpointRotateSecret(ctx context.Context, id uuid.UUID, secret string, graceUntil time.Time) error
	// EndpointFailing records that the endpoint failed at now: it sets
	// FailingSince unless already set, and returns it. EndpointRecovered
	// clears it.
	EndpointFailing(ctx context.Context, id uuid.UUID, now time.Time) (time.Time, error)
	EndpointRecovered(ctx context.Context, id uuid.UUID) error

	// DeliveryInsert writes one pending delivery of ev for each of the
	// endpoints (those still in the store), idempotently: a delivery of
	// the same (event, endpoint) already written is left as it is. It
	// returns how many it wrote.
	DeliveryInsert(ctx context.Context, ev postbox.Event, endpoints []uuid.UUID) (int, error)
	// DeliveryClaim leases due pending deliveries of one endpoint to
	// p.Owner, oldest first, counting an attempt for each.
	DeliveryClaim(ctx context.Context, p DeliveryClaimParams) ([]EndpointDelivery, error)
	// DeliverySettle records the outcomes of deliveries leased to owner
	// (others are left alone) and ends their lease.
	DeliverySettle(ctx context.Context, owner string, outcomes []DeliveryOutcome) error
	// DeliveryReclaim returns deliveries whose lease expired to pending,
	// or fails those that made maxAttempts attempts, and reports how many.
	DeliveryReclaim(ctx context.Context, maxAttempts int) (int, error)
	// DeliveryRetryFailed sends up to limit failed deliveries of one
	// endpoint back to the queue, due now, as never attempted, and reports
	// how many; called again, it carries on with the rest.
	DeliveryRetryFailed(ctx context.Context, endpointID uuid.UUID, limit int) (int, error)
	// DeliveryDue returns the endpoints, among those given, that have
	// deliveries due now (pending, available): one index probe per
	// endpoint, what an idle dispatcher polls instead of claiming for each.
	DeliveryDue(ctx context.Context, endpoints []uuid.UUID) ([]uuid.UUID, error)
	// DeliveryCounts counts one endpoint's deliveries by status.
	DeliveryCounts(ctx context.Context, endpointID uuid.UUID) (DeliveryCounts, error)
	// DeliveryList returns up to limit deliveries of one endpoint with
	// the given status ("" for any), oldest first.
	DeliveryList(ctx context.Context, endpointID uuid.UUID, status string, limit int) ([]EndpointDelivery, error)

	// AttemptInsert writes a batch of attempts in one statement.
	AttemptInsert(ctx context.Context, attempts []Attempt) error
	// AttemptList returns up to limit attempts of one endpoint, the most
	// recent first.
	AttemptList(ctx context.Context, endpointID uuid.UUID, limit int) ([]Attempt, error)
	// EndpointsPurge deletes up to limit attempts, and up to limit
	// finished (done or dropped) deliveries, older than before, and
	// reports how many rows it deleted.
	EndpointsPurge(ctx context.Context, before time.Time, limit int) (int, error)
}

// SplitTypes reads a comma-separated list of event type globs, dropping
// blanks: what Endpoint.Types is stored as.
func SplitTypes(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}
