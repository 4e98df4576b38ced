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
	// disabled by package endpoint: deliveries are still written for them,
	// and wait until they are enabled.
	EndpointAutoDisabled = "auto_disabled"
)

// StatusDropped is the final status of a shadow endpoint's delivery that
// used all its attempts: it is not a dead letter, only counted.
const StatusDropped = "dropped"

// ErrEndpointNotFound is returned when an endpoint id is not in the store.
var ErrEndpointNotFound = errors.New("store: endpoint not found")

// ErrEndpointChanged is returned by EndpointSeal when the endpoint's sealed
// secrets are no longer those the caller read (another rotation or rekey
// changed them first), by EndpointUpdate when the endpoint changed since
// the caller read it (its UpdatedAt is no longer the one given), and by
// EndpointRotateSecret when the endpoint's secrets are sealed: nothing was
// changed; read the endpoint again.
var ErrEndpointChanged = errors.New("store: endpoint changed")

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
	// Secret and PreviousSecret are the clear secrets of an endpoint whose
	// secrets are not sealed (a row written before migration 0014, until
	// postbox endpoints rekey seals it); they are "" for a sealed one,
	// whose secrets are in Sealed. PreviousSecretUntil, a clear column,
	// ends the grace period of a sealed endpoint's previous secret too.
	Secret              string
	PreviousSecret      string
	PreviousSecretUntil time.Time
	// Sealed are the endpoint's secrets as package endpoint sealed them
	// (Sealed.Data nil: not sealed, see Secret).
	Sealed SealedSecrets
	// Filter is a CEL expression on the event that selects, beside Types,
	// the events the endpoint receives (package endpoint/filter compiles
	// it; the store keeps its text); "" is no filter.
	Filter string
	// Envelope names the envelope deliveries are wrapped in: "" is the
	// raw payload; the others ("standard", "cloudevents",
	// "cloudevents-binary", ...) are package sink/envelope's. The store
	// keeps the name.
	Envelope string
	// Signature is the spec of the profile that signs deliveries ("" the
	// standard one; package signature parses it, the store keeps it).
	Signature string
	// RatePerSecond bounds the deliveries started per second (0: no bound).
	RatePerSecond float64
	// Concurrency bounds the deliveries in flight at once.
	Concurrency int
	// Shadow endpoints receive a copy of the traffic; their failures are
	// never dead letters (StatusDropped).
	Shadow bool
	// AllowPrivate lets deliveries to this endpoint reach loopback,
	// private and link-local addresses, which the SSRF guard refuses
	// otherwise (at registration and at every connection).
	AllowPrivate bool
	// State is EndpointEnabled, EndpointDisabled or EndpointAutoDisabled.
	State string
	// FailingSince is when the endpoint's current run of failures began;
	// zero when its last attempt succeeded.
	FailingSince time.Time
	// BreakerOpenUntil is when the circuit breaker of the endpoint's lane
	// lets its next probe through, as the relay running the lane last
	// recorded it (EndpointBreaker); zero while the breaker is closed. The
	// breaker lives in that relay's memory: this is what other processes
	// (postbox status) see of it. A relay that stopped leaves the last
	// value it recorded, which its time dates; the endpoint's next lane
	// clears it.
	BreakerOpenUntil time.Time
	CreatedAt        time.Time
	// UpdatedAt is when the endpoint's settings, secrets or state last
	// changed: what EndpointUpdate compares to the row's (see
	// Endpoints.EndpointUpdate).
	UpdatedAt time.Time
}

// SealedSecrets are an endpoint's secrets (signing secrets, auth
// credentials, secret header values, a broker URL's password) as package
// endpoint seals them with the operator's key: the store keeps them as
// given and never sees them in clear.
type SealedSecrets struct {
	// Data is the sealed blob, kept byte for byte. Nil (or empty): the
	// endpoint's secrets are not sealed: Secret and PreviousSecret hold
	// them in clear (a row written before migration 0014).
	Data []byte
	// Key is the id of the key that sealed Data (keyring's key id), so
	// that a rekey finds the rows sealed by an old key.
	Key string
	// Fingerprint is the fingerprints of the signing secrets, for listing
	// endpoints without the key (not secret).
	Fingerprint string
	// Auth is what the sealed credentials authenticate with, for display:
	// "basic", "bearer", "oauth2", "mtls", "headers", joined by "+"; ""
	// for none (not secret).
	Auth string
}

// Secrets are the clear secrets that sign a delivery made at now: the
// current one, and the previous one during its grace period. They are
// those of an endpoint whose secrets are not sealed: a sealed endpoint's
// are in Sealed, which package endpoint opens.
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
	// other reads, the attempts made so far, that of a processing
	// delivery (in flight) included.
	Attempt     int
	AvailableAt time.Time
	LastError   string
	CreatedAt   time.Time
}

// DeliveryCounts counts one endpoint's deliveries by status.
type DeliveryCounts struct {
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Done       int64 `json:"done"`
	Failed     int64 `json:"failed"`
	Dropped    int64 `json:"dropped"`
	// OldestPendingAge is the age of the oldest pending delivery (due or
	// waiting for a retry); zero when there is none.
	OldestPendingAge time.Duration `json:"-"`
}

// AttemptSummary counts one endpoint's attempts over a period (see
// Endpoints.AttemptSummary): what a success rate is computed from.
type AttemptSummary struct {
	EndpointID uuid.UUID `json:"endpoint_id"`
	// Attempts is how many attempts were made; Succeeded how many of them
	// succeeded (no Attempt.Error).
	Attempts  int64 `json:"attempts"`
	Succeeded int64 `json:"succeeded"`
	// Last is when the last of them was made; zero when none of them has
	// a time the store can read (see Endpoints.AttemptSummary).
	Last time.Time `json:"last"`
}

// Route is one event and the endpoints it goes to: what the fan-out
// writes deliveries for.
type Route struct {
	Event     postbox.Event
	Endpoints []uuid.UUID
	// Tried, when not nil, holds one entry per endpoint of Endpoints (same
	// index): what the fan-out's own attempt at that endpoint left, before
	// any delivery was written (package endpoint offers an event to an
	// idle endpoint's lane directly, and writes a delivery only when that
	// attempt did not deliver it). The zero Tried is an endpoint not
	// tried: a pending delivery, due when the event is, as without Tried.
	Tried []Tried
}

// Tried is what an attempt made before its delivery was written left: the
// delivery is written as the lane's settle of that attempt would have left
// it.
type Tried struct {
	// Attempts is how many attempts ended (0: not tried, or tried and
	// released without counting, as when the endpoint was unreachable).
	Attempts int
	// Status is StatusPending (due again at RetryAt, or when the event is
	// if RetryAt is zero), StatusFailed or StatusDropped (finished, with
	// LastError, processed now), or StatusDone (delivered: written only
	// when delivered deliveries are kept). Empty means StatusPending.
	Status    string
	RetryAt   time.Time
	LastError string
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
// stores implement it on their drivers ((*postgres.Store).Driver(); the
// store itself holds the administration: create, update, list, delete,
// rotate, seal, the deliveries' counts and lists, the attempts' list and
// summary), and pass postboxtest/storetest's suites of endpoints and lanes.
//
// Deliveries are delivered by package relay, one relay per enabled
// endpoint, each draining the endpoint's lane (EndpointLane): the same
// claims, leases, settles, retries and dead letters as the outbox's.
type Endpoints interface {
	// EndpointCreate writes a new endpoint (e.ID, when zero, is chosen)
	// and returns it as stored: its settings, Filter, Envelope,
	// Signature, and its secrets: Sealed when Sealed.Data is set (the
	// clear column then holds "": an e that has both Sealed.Data and a
	// Secret is refused), Secret otherwise (an unsealed endpoint, as
	// before migration 0014). PreviousSecret and PreviousSecretUntil are
	// not written (a new endpoint has no rotation). Filter, Envelope,
	// Signature and Sealed's Key, Fingerprint and Auth must be valid UTF-8
	// without NUL, or e is refused (an error that names the field, never
	// its value) and nothing is written.
	EndpointCreate(ctx context.Context, e Endpoint) (Endpoint, error)
	// EndpointUpdate changes an endpoint's Name, URL, Types,
	// RatePerSecond, Concurrency, Shadow, AllowPrivate, Filter, Envelope
	// and Signature to those of e (its secrets, sealed or not, and its
	// state are changed by their own methods), and returns it as stored
	// (its new UpdatedAt included), or ErrEndpointNotFound. Filter,
	// Envelope and Signature are checked as EndpointCreate checks them.
	//
	// It writes every one of those settings, so it is a compare-and-swap
	// on UpdatedAt: when e.UpdatedAt is not zero, the endpoint is changed
	// only if its UpdatedAt is still e.UpdatedAt, exactly as EndpointGet,
	// EndpointList, EndpointCreate or EndpointUpdate returned it (both
	// stores keep microseconds: a time with a fraction of one never
	// matches); otherwise nothing is written and it returns
	// ErrEndpointChanged (ErrEndpointNotFound when the endpoint is gone),
	// and the caller reads the endpoint again and redoes its change on
	// what it reads. So two read-modify-write updates never lose one
	// another's change, and an update never writes back a URL that an
	// EndpointSeal moved, with the credentials for the new one, after the
	// update read it. EndpointUpdate, EndpointSetState,
	// EndpointRotateSecret and EndpointSeal each change UpdatedAt (to now,
	// or past its value when the clock is behind it: never to a value it
	// had), so that any of them between the read and the update makes the
	// update fail; EndpointFailing, EndpointRecovered and EndpointBreaker,
	// which record the relay's view of the endpoint and none of what an
	// update writes, leave it. A zero e.UpdatedAt writes e's settings
	// whatever the endpoint's UpdatedAt (the unconditional write of a
	// caller that did not read the endpoint, or that means to override
	// it).
	EndpointUpdate(ctx context.Context, e Endpoint) (Endpoint, error)
	// EndpointGet returns one endpoint, its sealed secrets included, or
	// ErrEndpointNotFound.
	EndpointGet(ctx context.Context, id uuid.UUID) (Endpoint, error)
	// EndpointList returns every endpoint, its sealed secrets included,
	// oldest first.
	EndpointList(ctx context.Context) ([]Endpoint, error)
	// EndpointSetState changes an endpoint's state. Enabling clears
	// FailingSince and makes its pending deliveries due at once.
	EndpointSetState(ctx context.Context, id uuid.UUID, state string) error
	// EndpointDelete removes an endpoint with its deliveries and attempts.
	EndpointDelete(ctx context.Context, id uuid.UUID) error
	// EndpointRotateSecret makes secret the current one; the current one
	// keeps signing until graceUntil. It rotates the clear secrets of an
	// endpoint that is not sealed: on a sealed one it changes nothing and
	// returns ErrEndpointChanged (a sealed endpoint rotates with
	// EndpointSeal), and ErrEndpointNotFound when there is no endpoint id.
	EndpointRotateSecret(ctx context.Context, id uuid.UUID, secret string, graceUntil time.Time) error
	// EndpointSeal replaces the sealed secrets of endpoint id with sealed,
	// sets PreviousSecretUntil to previousUntil (zero: none), clears the
	// clear secrets (Secret "", no PreviousSecret) and bumps UpdatedAt, in
	// one statement, only if the endpoint's sealed data is still was
	// (byte for byte; nil or empty was: the endpoint is not sealed yet):
	// a compare-and-swap, so that two rotations, or a rotation and a
	// rekey, never lose one another. It returns ErrEndpointChanged, having
	// changed nothing, when the endpoint's sealed data is not was, and
	// ErrEndpointNotFound when there is no endpoint id. sealed.Data must
	// not be empty (that would drop the endpoint's secrets), and its texts
	// are checked as EndpointCreate checks them. A url that is not empty
	// becomes the endpoint's URL in the same statement: the URL whose
	// credentials sealed holds (a URL's user information moved into the
	// sealed credentials, or a URL changed with the credentials for it),
	// so that no reader ever sees one endpoint's credentials beside
	// another URL.
	EndpointSeal(ctx context.Context, id uuid.UUID, sealed SealedSecrets, previousUntil time.Time, url string, was []byte) error
	// EndpointFailing records that the endpoint failed at now: it sets
	// FailingSince unless already set, and returns it. EndpointRecovered
	// clears it.
	EndpointFailing(ctx context.Context, id uuid.UUID, now time.Time) (time.Time, error)
	EndpointRecovered(ctx context.Context, id uuid.UUID) error
	// EndpointBreaker records the state of the endpoint's circuit breaker
	// (Endpoint.BreakerOpenUntil): open until openUntil, or closed when
	// openUntil is zero. It returns ErrEndpointNotFound when the endpoint
	// is not in the store.
	EndpointBreaker(ctx context.Context, id uuid.UUID, openUntil time.Time) error

	// EndpointLane returns the Source of e's deliveries, which a relay
	// drains to deliver them (see package endpoint). Its claims lease
	// deliveries as the outbox's do: one lease per claim (ClaimedEvent.Lease is
	// the claim's lease id), the deliveries themselves left pending, and a
	// claim skips those a lease of e lists. It differs from an outbox's
	// Source in these ways:
	//   - Claim takes only due pending deliveries of e, and none while e
	//     is not enabled in the store. ClaimedEvent.Attempt is the attempts
	//     ended so far plus one; ClaimedEvent.Event is the delivery's copy of
	//     the event, OutboxSeq the delivery's own sequence number (the
	//     order the fan-out wrote them in). Ordered claims keep each
	//     aggregate's deliveries to e in that order: a leased head, or one
	//     waiting for a retry, holds its successors back.
	//   - Settle: Done deliveries are marked done with the time (KeepDone)
	//     or deleted; Retry and Failed count the attempt, and Failed ones
	//     become StatusDropped when e is a shadow endpoint; Ended drops the
	//     claims' leases. DedupWindow is ignored (dedup keys are the
	//     outbox's).
	//   - ReclaimExpired counts a failed attempt for each delivery still
	//     pending that an expired lease of e lists, and drops the lease.
	//   - Expire deletes e's finished (done or dropped) deliveries, and
	//     e's attempts, older than p.Before; a p.Keep is refused
	//     (ErrKeepUnsupported): the outbox keeps the events.
	//   - Listen returns ErrCannotListen: package endpoint wakes the lanes
	//     itself (its fan-out, and one poll for all lanes: DeliveryDue).
	// Deliveries that a lease lists (until it ends or is reclaimed) are
	// StatusProcessing to DeliveryCounts and DeliveryList, which count their
	// attempt in flight; no row holds that status.
	// Only e.ID, e.Name and e.Shadow are read.
	EndpointLane(e Endpoint) Source

	// EndpointRequeue sends events to one endpoint (again) as replays, in
	// one transaction: a delivery of (event, endpoint) that is finished
	// (done or dropped) becomes pending again, due at once, its attempts
	// from 1; an absent one is written, pending (a backfill of a new
	// endpoint, or a delivery whose row is gone); one still pending,
	// leased or failed is left alone (Skipped). Each carries the header
	// postbox.HeaderReplay with the value replay; the event id stays the
	// event's. Which events the endpoint wants (its types, its filter) is
	// the caller's choice. An endpoint not in the store is
	// ErrEndpointNotFound.
	EndpointRequeue(ctx context.Context, endpoint uuid.UUID, events []HistoryEvent, replay string) (RequeueResult, error)

	// DeliveryInsert writes one delivery of each route's event for each of
	// its endpoints (those still in the store): pending, due when the event
	// is (its AvailableAt; at once when zero), or as Route.Tried says,
	// idempotently: a delivery of the same (event, endpoint) already
	// written is left as it is. Deliveries are numbered in the order of
	// routes, in one statement. It returns how many it wrote. A Tried
	// whose Status is not one of those it names is refused with an error,
	// and nothing is written.
	DeliveryInsert(ctx context.Context, routes []Route) (int, error)
	// DeliveryPending returns the endpoints, among those given, that have a
	// pending delivery, due or not, leased or not: one index probe per
	// endpoint. The fan-out offers an event directly only to an endpoint
	// with none, so that nothing it delivers overtakes a delivery already
	// queued (in ordered mode, one of the same aggregate).
	DeliveryPending(ctx context.Context, endpoints []uuid.UUID) ([]uuid.UUID, error)
	// DeliveryDue returns the endpoints, among those given, that have
	// deliveries due now (pending, available, not leased): one index probe
	// per endpoint, what package endpoint polls instead of claiming for
	// each.
	DeliveryDue(ctx context.Context, endpoints []uuid.UUID) ([]uuid.UUID, error)
	// DeliveryCounts counts one endpoint's deliveries by status.
	DeliveryCounts(ctx context.Context, endpointID uuid.UUID) (DeliveryCounts, error)
	// DeliveryCountsAll counts every endpoint's deliveries by status, in
	// one query: the map has an entry for each endpoint in the store
	// (zero counts for one without deliveries), each what DeliveryCounts
	// returns for it (leased deliveries are StatusProcessing, see
	// EndpointLane; OldestPendingAge as of the query).
	DeliveryCountsAll(ctx context.Context) (map[uuid.UUID]DeliveryCounts, error)
	// DeliveryList returns up to limit deliveries of one endpoint with
	// the given status ("" for any), oldest first.
	DeliveryList(ctx context.Context, endpointID uuid.UUID, status string, limit int) ([]EndpointDelivery, error)

	// AttemptInsert writes a batch of attempts in one statement.
	AttemptInsert(ctx context.Context, attempts []Attempt) error
	// AttemptList returns up to limit attempts of one endpoint, the most
	// recent first.
	AttemptList(ctx context.Context, endpointID uuid.UUID, limit int) ([]Attempt, error)
	// AttemptSummary counts the attempts of every endpoint since since (at
	// or after it): per endpoint that has any, how many were made, how
	// many succeeded (no error), and when the last one was; endpoints
	// without attempts since then are absent. The summaries are in the
	// order of EndpointList. One query: one index range of the attempts
	// per endpoint. A zero since, or one before year 1, counts every
	// attempt; one after year 9999 counts as the start of year 10000 (only
	// attempts the store holds beyond year 9999 count). An attempt whose
	// time is not one of years 1 to 9999 (a row written by hand, a clock
	// gone wrong) is counted as the store orders it against since
	// (PostgreSQL's infinity, SQLite's text after every since), but never
	// is Last: Last is the latest time of years 1 to 9999 among them (zero
	// when there is none).
	AttemptSummary(ctx context.Context, since time.Time) ([]AttemptSummary, error)
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
