// Package store defines what the relay and the inbox need of a database: the
// Outbox and Inbox interfaces, their parameter types and capabilities.
//
// Every implementation (store/postgres, store/sqlite) passes the shared
// conformance suite in store/storetest. Implementations never import the
// relay, the inbox or each other.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
)

// Status words of outbox rows, as in the article's schema.
const (
	StatusPending    = "pending"
	StatusProcessing = "processing"
	StatusDone       = "done"
	StatusFailed     = "failed"
)

// ErrNotFound is returned when an event id is not in the store.
var ErrNotFound = errors.New("store: event not found")

// Delivery is an event claimed by a relay: the relay holds its lease until it
// settles, extends or releases it.
type Delivery struct {
	ID            uuid.UUID
	Seq           int64
	AggregateType string
	AggregateID   string
	EventType     string
	Payload       []byte
	Headers       map[string]string
	// Attempt is the number of this delivery attempt, starting at 1.
	Attempt   int
	CreatedAt time.Time
}

// ClaimParams selects the events a relay takes.
type ClaimParams struct {
	// Owner identifies the relay instance; only it may settle its claims.
	Owner string
	// Limit is the largest number of events claimed.
	Limit int
	// Lease is how long the claim holds before another relay may reclaim it.
	Lease time.Duration
	// Ordered restricts the claim to the oldest unfinished event of each
	// aggregate, and only when no other event of that aggregate is being
	// delivered: one aggregate's events go one at a time, in sequence order.
	Ordered bool
}

// Retry schedules another attempt of a claimed event.
type Retry struct {
	ID          uuid.UUID
	AvailableAt time.Time
	LastError   string
}

// Failure moves a claimed event to the dead-letter state.
type Failure struct {
	ID        uuid.UUID
	LastError string
}

// SettleParams records the outcome of a batch of deliveries in one statement.
type SettleParams struct {
	Owner  string
	Done   []uuid.UUID
	Retry  []Retry
	Failed []Failure
	// KeepDone keeps delivered events, marked done, until PurgeDone removes
	// them; otherwise they are deleted at once.
	KeepDone bool
}

// ReclaimParams returns the events of crashed relays (expired leases) to the
// queue. An expired lease counts as a failed attempt, so an event that kills
// every relay that takes it still ends up failed after MaxAttempts.
type ReclaimParams struct {
	MaxAttempts int
}

// Stats are the counts by status and the age of the oldest pending event.
type Stats struct {
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Done       int64 `json:"done"`
	Failed     int64 `json:"failed"`
	// OldestPendingAge is zero when nothing is pending.
	OldestPendingAge time.Duration `json:"-"`
}

// Record is the full state of one outbox row.
type Record struct {
	postbox.Event
	Seq int64
	// Status is what the event is going through: "processing" while a relay
	// holds a lease on it, whatever the row's own status column says.
	Status string
	// Retries counts failed attempts (an expired lease counts as one).
	Retries int
	// Attempts counts the attempts made or in progress.
	Attempts int
	// LastError is the error of the last failed attempt.
	LastError string
	// LeaseOwner and LeaseExpiresAt name the relay delivering the event and
	// when its lease ends; empty and zero when none does.
	LeaseOwner     string
	LeaseExpiresAt time.Time
	CreatedAt      time.Time
	// ProcessedAt is when the event was delivered (kept done) or failed.
	ProcessedAt time.Time
}

// ListParams selects outbox rows for inspection and the dead-letter tools.
type ListParams struct {
	Status string
	Limit  int
}

// Capabilities tell the relay what a store can do, so it can adapt.
type Capabilities struct {
	// ConcurrentClaimers is true when several relays may claim at once
	// without blocking each other (FOR UPDATE SKIP LOCKED). When false,
	// claims take turns: they still never share an event.
	ConcurrentClaimers bool
	// Listen is true when the store implements Listener.
	Listen bool
}

// Outbox is what the relay needs of a store.
type Outbox interface {
	// Capabilities reports what this store supports.
	Capabilities() Capabilities
	// Enqueue writes events in a transaction of the store's own. Producers
	// that write business rows use the store's transaction-bound calls.
	Enqueue(ctx context.Context, events ...postbox.Event) error
	// Claim leases due events to p.Owner and returns them in sequence order.
	Claim(ctx context.Context, p ClaimParams) ([]Delivery, error)
	// Settle records delivered, retried and failed events atomically (one
	// statement where the database allows), and ends p.Owner's lease on
	// them. Done ids are deleted (or marked done, with KeepDone) whoever
	// holds them; retries and failures apply only to events still leased to
	// p.Owner.
	Settle(ctx context.Context, p SettleParams) error
	// ExtendLease renews the lease of events still leased to owner.
	ExtendLease(ctx context.Context, owner string, ids []uuid.UUID, lease time.Duration) error
	// Release gives events leased to owner back to the queue at once,
	// without counting the attempt (graceful shutdown).
	Release(ctx context.Context, owner string, ids []uuid.UUID) error
	// ReclaimExpired returns events whose lease expired to the queue, or
	// fails them when they have used all attempts; it reports how many.
	ReclaimExpired(ctx context.Context, p ReclaimParams) (int, error)
	// PurgeDone deletes up to limit delivered events processed before the
	// given time and reports how many it deleted.
	PurgeDone(ctx context.Context, before time.Time, limit int) (int, error)
	// Stats counts events by status.
	Stats(ctx context.Context) (Stats, error)
	// Get returns one event's record, or ErrNotFound.
	Get(ctx context.Context, id uuid.UUID) (Record, error)
	// List returns records with the given status, oldest first.
	List(ctx context.Context, p ListParams) ([]Record, error)
}

// Listener is implemented by stores that can wake the relay as soon as new
// events are committed (PostgreSQL LISTEN/NOTIFY, or an in-process signal).
type Listener interface {
	// Listen calls notify whenever new events may be available. It blocks
	// until ctx is done (returning nil) or the listening connection fails.
	// ready is called once the store listens, before any notify.
	Listen(ctx context.Context, ready, notify func()) error
}

// A Dozer is one listening connection's way to tell producers whether its
// relay waits for notifications. A relay that keeps finding events claims
// again on its own and needs none: producers notify only relays that doze.
// The relay calls its methods from one goroutine, never concurrently; an
// error means the listening connection is down (poll until it is back).
type Dozer interface {
	// Doze tells producers that the relay is about to wait (its last claim
	// found nothing): they notify it from now on. It reports true once every
	// transaction that wrote events without notifying has ended, so a claim
	// made after it sees them all and the relay may then wait; false means
	// such a transaction is still committing: claim again shortly (producers
	// notify meanwhile) and doze again, or Wake to stop their notifications.
	Doze(ctx context.Context) (bool, error)
	// Wake tells producers that the relay claims on its own (events keep
	// coming): they stop notifying it.
	Wake(ctx context.Context) error
}

// ErrOrderedNotReady is wrapped by the error a store returns when ordered
// claims need a step that was not taken (the PostgreSQL store's
// MigrateOrdered); the relay refuses to start in ordered mode then.
var ErrOrderedNotReady = errors.New("store: ordered claims are not ready")

// DozeListener is a Listener whose producers notify only while some relay
// dozes: a relay that is busy claiming costs them no notification.
type DozeListener interface {
	Listener
	// ListenDozing is Listen for a relay that dozes: ready receives the
	// Dozer of this connection, valid until ListenDozing returns. The
	// connection starts awake (producers do not notify it).
	ListenDozing(ctx context.Context, ready func(Dozer), notify func()) error
}
