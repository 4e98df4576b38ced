// Package store holds the contracts between postbox and a database, and
// what every store shares:
//
//   - Producer, generic over the store's transaction type: the one call
//     producers make (EnqueueTx), whatever the store.
//   - Inspector, what status tools read (Stats, StatsByType, Get, List,
//     GetByDedupKey, Relays, LastSeq).
//   - DeadLetters, the dead-letter operations (list, group, retry and
//     purge failed events), and their parameter types (Failed*).
//   - Source, the relay's driver interface: claim, settle, leases,
//     reclaim, purge, and the capabilities a store may lack (Listen,
//     Dozer); its parameter and result types (ClaimParams, Delivery,
//     ...). An outbox is a Source, and so is each webhook endpoint's
//     lane of deliveries (Endpoints.EndpointLane). Applications do not
//     call its methods.
//   - Outbox, a store's outbox: its Source, Inspector, DeadLetters and
//     Enqueue.
//   - Inbox, generic over the store's transaction type, what package inbox
//     needs (package inbox calls it Store); its types are the Inbox*
//     ones (InboxEvent, InboxResult, InboxRecord, ...).
//   - Endpoints, the webhook endpoints of package endpoint: the endpoints,
//     their deliveries (one per event and endpoint), each endpoint's lane
//     (a Source over its deliveries) and the attempts log; its types are
//     Endpoint, Route, EndpointDelivery, DeliveryCounts, Attempt.
//   - Migration, ReadMigrations and CheckApplied: the numbered, embedded
//     migrations every store ships, and the verdict of CheckSchema.
//   - The status words, the errors stores wrap (ErrNotFound,
//     ErrNotMigrated, ErrCannotListen, ErrOrderedNotReady) and
//     CleanErrorText, through which stores write every error text.
//
// A store splits its methods in two. The store itself holds what
// applications call: Producer, Inspector, DeadLetters, PresenceReader,
// InboxReader, the endpoints' administration. Its driver (the store's
// Driver method: (*postgres.Store).Driver(), (*sqlite.Store).Driver())
// embeds it and adds the engine's methods, so that the driver is the
// whole of Outbox, Endpoints, Presence and Inbox: applications hand it to
// packages relay, endpoint, relay/presence and inbox, and never call it.
//
// Every implementation passes the shared conformance suites, which
// postboxtest/storetest's Exercise runs (postboxtest/inboxtest's for the
// inbox among them).
// Implementations never import the relay, package inbox or each other.
package store

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

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

// ClaimedEvent is an event claimed by a relay: the relay holds its lease until it
// settles, extends or releases it.
type ClaimedEvent struct {
	// Event is the event as the producer wrote it (DedupKey is not read
	// back); AvailableAt is when this attempt fell due: the first
	// delivery's time or the retry's.
	postbox.Event
	// OutboxSeq is the event's place in the outbox (its seq column): the
	// order events committed in, across aggregates.
	OutboxSeq int64
	// Attempt is the number of this delivery attempt, starting at 1.
	Attempt   int
	CreatedAt time.Time
	// Lease names the claim that leased the event, on a store that keeps
	// one lease per claim (PostgreSQL: its outbox_leases row); zero on a
	// store that does not. A relay ends a claim once every event it leased
	// is settled (SettleParams.Ended).
	Lease int64
	// Invalid, when not empty, says why the store could not read this row
	// as an event (the column and the value's problem, e.g. "created_at:
	// infinity is not a time"): the relay fails it at once, without
	// sending it and without counting it against any other event. The
	// fields it names hold zero values; ID, OutboxSeq and Lease are always
	// set.
	Invalid string
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
	// AggregateRun, with Ordered and when above 1, lets the claim take
	// with each aggregate's head up to AggregateRun-1 of its successors: a
	// run of consecutive events of the aggregate in sequence order, each
	// due and not leased, which the relay delivers one after the other
	// (stopping at the first that is not delivered). Every head found is
	// taken before any successor, within Limit and MaxBytes. A store may
	// take heads only (SQLite does): runs are an optimization, not a
	// contract of order, which holds either way.
	AggregateRun int
	// After, when not zero, restricts the claim to events after it in
	// claim order. A relay draining a backlog passes the position of the
	// last event it claimed, so that each claim starts where the last one
	// ended instead of reading again past the events it still holds (and,
	// on PostgreSQL, past the index entries of the events it deleted).
	// Events behind it (released, expired leases, committed late) are left
	// to the next claim without After. Ordered claims ignore it.
	After ClaimPosition
	// MaxBytes, when positive, bounds the claim by the payload bytes it
	// takes as well as by Limit: the claim stops before the event that
	// would take its payloads past MaxBytes, but always takes at least one
	// event (so an event larger than MaxBytes is still claimed, alone). A
	// payload's size is that of its JSON text as stored (PostgreSQL: the
	// text of the jsonb, which the server computes for each event the
	// claim reads, up to Limit).
	MaxBytes int64
}

// ClaimPosition is a place in claim order: events are claimed by when they
// fall due (AvailableAt), then by their place in the outbox (Seq).
type ClaimPosition struct {
	AvailableAt time.Time
	Seq         int64
}

// IsZero reports whether p is the zero position: before every event.
func (p ClaimPosition) IsZero() bool { return p.AvailableAt.IsZero() && p.Seq == 0 }

// PositionOf is d's place in claim order.
func PositionOf(d ClaimedEvent) ClaimPosition {
	return ClaimPosition{AvailableAt: d.AvailableAt, Seq: d.OutboxSeq}
}

// Less reports whether p comes before q in claim order.
func (p ClaimPosition) Less(q ClaimPosition) bool {
	if !p.AvailableAt.Equal(q.AvailableAt) {
		return p.AvailableAt.Before(q.AvailableAt)
	}
	return p.Seq < q.Seq
}

// Retry schedules another attempt of a claimed event.
type Retry struct {
	ID          uuid.UUID
	AvailableAt time.Time
	LastError   string
	// Lease is the claim the attempt came from (ClaimedEvent.Lease): see
	// Released.Lease.
	Lease int64
}

// Failure moves a claimed event to the dead-letter state.
type Failure struct {
	ID        uuid.UUID
	LastError string
	// Lease is the claim the attempt came from (ClaimedEvent.Lease): see
	// Released.Lease.
	Lease int64
}

// Released gives a claimed event back to the queue.
type Released struct {
	ID uuid.UUID
	// Lease is the claim (ClaimedEvent.Lease) whose lease the event leaves.
	// An outcome of an earlier claim (its lease lost, the event claimed
	// again since by the same relay) then leaves the newer claim alone.
	// Zero: every lease of the owner.
	Lease int64
}

// SettleParams records the outcome of a batch of deliveries in one statement.
type SettleParams struct {
	Owner  string
	Done   []uuid.UUID
	Retry  []Retry
	Failed []Failure
	// Release gives these events back to the queue at once, without
	// counting an attempt (as Outbox.Release does).
	Release []Released
	// Ended lists the claims (ClaimedEvent.Lease) of Owner that this settle
	// ends: every event they leased is settled or released, by this call or
	// an earlier one. A store that keeps one lease per claim drops them. A
	// claim not ended keeps listing its delivered events until it ends or
	// its lease expires; they hold nothing back (they are no longer
	// pending), but every claim reads past them. Retried, failed and
	// released events leave their claim at once.
	Ended []int64
	// KeepDone keeps delivered events, marked done, until Expire removes
	// them; otherwise they are deleted at once.
	KeepDone bool
	// DedupWindow, when positive, keeps the dedup_key of each event this
	// settle delivers (Done) refused for that long after the delivery,
	// whether the row is deleted at once or kept until Expire: a
	// producer that writes the same key again in that time gets the
	// duplicate-key error, from EnqueueTx and from plain SQL alike. Zero:
	// the key is free again once its row is gone.
	DedupWindow time.Duration
}

// ReclaimParams returns the events of crashed relays (expired leases) to the
// queue. An expired lease counts as a failed attempt, so an event that kills
// every relay that takes it still ends up failed after MaxAttempts.
type ReclaimParams struct {
	MaxAttempts int
}

// StatusCounts are the counts by status and the age of the oldest pending event.
type StatusCounts struct {
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Done       int64 `json:"done"`
	Failed     int64 `json:"failed"`
	// OldestPendingAge is the age of the oldest event waiting to be
	// claimed (pending and not leased); zero when there is none.
	OldestPendingAge time.Duration `json:"-"`
}

// TypeStats are the counts of one event type's unfinished events.
type TypeStats struct {
	EventType  string `json:"event_type"`
	Pending    int64  `json:"pending"`
	Processing int64  `json:"processing"`
	Failed     int64  `json:"failed"`
}

// Total is the type's pending, processing and failed events together.
func (t TypeStats) Total() int64 { return t.Pending + t.Processing + t.Failed }

// Record is the full state of one outbox row, or of one webhook endpoint's
// delivery of an event.
type Record struct {
	postbox.Event
	// Endpoint is the webhook endpoint of a delivery's record (dead
	// letters of endpoints mode: FailedFilter.Endpoint); zero for an
	// outbox event's.
	Endpoint uuid.UUID
	// OutboxSeq is the event's place in the outbox (its seq column).
	OutboxSeq int64
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

// ListParams selects outbox rows for inspection.
type ListParams struct {
	Status string
	Limit  int
}

// SchemaParams says what a relay will ask of the tables.
type SchemaParams struct {
	// Ordered: the relay claims in per-aggregate order.
	Ordered bool
}

// Reclaimed is what ReclaimExpired did to the events of one relay whose
// lease expired.
type Reclaimed struct {
	// Owner is the relay that held the expired lease.
	Owner string
	// Events is how many of its events went back to the queue or failed.
	Events int
}

// Listening is what a store tells the relay once it listens.
type Listening struct {
	// Channel names what the store listens on, for the relay's log (a
	// PostgreSQL channel, "in-process signal").
	Channel string
	// Dozer, when not nil, lets the relay tell producers when it waits:
	// they notify only then. Nil means producers always notify.
	Dozer Dozer
}

// ErrNotMigrated is wrapped by CheckSchema's error when the store's tables
// are missing or older than this code: run Migrate (postbox migrate).
var ErrNotMigrated = errors.New("store: not migrated")

// ErrCannotListen is wrapped by Listen's error when a store has no way to
// wake a relay: the relay polls.
var ErrCannotListen = errors.New("store: this store cannot notify relays")

// Inspector reads the outbox's state: what status tools, health checks and
// consoles call. Applications may depend on it alone.
type Inspector interface {
	// Stats counts events by status.
	Stats(ctx context.Context) (StatusCounts, error)
	// StatsUpTo is Stats at a cost bounded whatever the outbox holds, for
	// gauges sampled often: each count stops at limit (a count equal to
	// limit means at least that many), and OldestPendingAge is the age of
	// the event first in line (the first due in claim order that no relay
	// holds), read from the claim's index.
	StatsUpTo(ctx context.Context, limit int64) (StatusCounts, error)
	// StatsByType counts the pending, processing and failed events of
	// each event type that has any, the most numerous type first (then by
	// name). Delivered events are not counted: their number is Stats'. It
	// reads every unfinished event, so its cost grows with the backlog and
	// the dead letters, not with the delivered events kept.
	StatsByType(ctx context.Context) ([]TypeStats, error)
	// Get returns one event's record, or ErrNotFound.
	Get(ctx context.Context, id uuid.UUID) (Record, error)
	// List returns records with the given status, oldest first.
	List(ctx context.Context, p ListParams) ([]Record, error)
	// GetByDedupKey returns the record of the event written with this
	// dedup key, or ErrNotFound.
	GetByDedupKey(ctx context.Context, dedupKey string) (Record, error)
	// Relays reports the relays that hold leases, by owner name, with
	// their expired leases too (a relay that stopped without settling,
	// until ReclaimExpired runs).
	Relays(ctx context.Context) ([]RelayLeases, error)
	// LastSeq returns the sequence number (OutboxSeq) of the last event
	// written, zero before the first: with the counts of Stats, what a
	// console samples to chart the deliveries. On PostgreSQL it is the
	// sequence's value, which inserts that rolled back advanced too.
	LastSeq(ctx context.Context) (int64, error)
}

// RelayLeases is what one relay holds: the events it is delivering and
// when its leases end.
type RelayLeases struct {
	// Owner is the relay's name (ClaimParams.Owner).
	Owner string `json:"owner"`
	// Events is how many events its leases hold.
	Events int64 `json:"events"`
	// FirstExpiry and LastExpiry are when its leases end, the earliest and
	// the latest: a relay whose LastExpiry has passed has stopped renewing
	// them.
	FirstExpiry time.Time `json:"first_expiry"`
	LastExpiry  time.Time `json:"last_expiry"`
}

// Source is the relay's driver interface: what package relay calls to
// drain a queue of deliveries. An outbox is one (every Outbox is a Source:
// a store's driver, such as (*postgres.Store).Driver()); a webhook
// endpoint's deliveries are another (Endpoints.EndpointLane), so that one
// engine, package relay, drains both. Applications do not call these
// methods. Like River's driver interface it may change between minor
// versions; a store's own exported API does not.
//
// Every capability is a method of this interface, never an optional
// interface found by a type assertion: a wrapper that embeds a Source
// keeps them all, and a store that lacks one says so in its answer
// (ErrCannotListen).
type Source interface {
	// String names the source for logs: its kind and where its tables are
	// (a schema, a file; an endpoint's name), never credentials.
	String() string
	// CheckSchema returns nil when the tables are migrated for what p asks:
	// an error wrapping ErrNotMigrated when they are missing or older than
	// this code, ErrOrderedNotReady when ordered claims need a step that
	// was not taken; any other error means the database could not be
	// asked.
	CheckSchema(ctx context.Context, p SchemaParams) error
	// Listen calls notify whenever new events may be available, until ctx
	// is done (it then returns nil) or the listening connection fails. It
	// calls ready once, before any notify, when it has checked that
	// notifications reach it (PostgreSQL sends itself one). When ready
	// receives a Dozer, producers notify only while the caller dozes
	// (Dozer.Doze): a caller that ignores the Dozer is never notified. A
	// store that cannot listen, or whose notifications do not arrive,
	// returns an error wrapping ErrCannotListen (the relay then polls for
	// good).
	Listen(ctx context.Context, ready func(Listening), notify func()) error
	// Claim leases due events to p.Owner and returns them in sequence order.
	Claim(ctx context.Context, p ClaimParams) ([]ClaimedEvent, error)
	// Settle records delivered, retried and failed events atomically (one
	// statement where the database allows), and ends p.Owner's lease on
	// them. Done ids are deleted (or marked done, with KeepDone) whoever
	// holds them; retries and failures apply only to events still leased to
	// p.Owner. Error texts are stored as valid UTF-8 without NUL bytes,
	// whatever the sink reported (see CleanErrorText).
	Settle(ctx context.Context, p SettleParams) error
	// ExtendLease renews, until lease from now, the lease of those of ids
	// still leased to owner, and returns them: an id left out was lost
	// (reclaimed after its lease expired, or settled).
	ExtendLease(ctx context.Context, owner string, ids []uuid.UUID, lease time.Duration) ([]uuid.UUID, error)
	// ReclaimExpired returns events whose lease expired to the queue, or
	// fails them when they have used all attempts; it reports, for each
	// relay whose lease expired, how many of its events it changed.
	ReclaimExpired(ctx context.Context, p ReclaimParams) ([]Reclaimed, error)
	// Expire is retention, one step at a time: it removes delivered events
	// processed before p.Before (handing them to p.Keep first when set),
	// up to p.Limit of them in a plain table (a partitioned outbox drops
	// whole partitions, creating the next ones ahead), then up to p.Limit
	// dedup keys whose hold has ended (SettleParams.DedupWindow). A relay
	// calls it until ExpireResult.More is false, whether it keeps
	// delivered events or not.
	Expire(ctx context.Context, p ExpireParams) (ExpireResult, error)
}

// Outbox is a store's outbox: the relay's Source, with what status tools
// (Inspector) and dead-letter tools (DeadLetters) read and change, and
// Enqueue. A store's driver is one (the store itself holds the Inspector,
// DeadLetters and Enqueue, not the Source). Producers use the store's
// Producer (EnqueueTx) or Enqueue.
type Outbox interface {
	Source
	Inspector
	DeadLetters
	History
	// Enqueue writes events in a transaction of the store's own. Producers
	// that write business rows use the store's Producer (EnqueueTx).
	Enqueue(ctx context.Context, events ...postbox.Event) error
	// Release gives events leased to owner back to the queue at once,
	// without counting the attempt (graceful shutdown, a lost lease).
	Release(ctx context.Context, owner string, ids []uuid.UUID) error
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

// CleanErrorText returns s as a database text column can hold it: invalid
// UTF-8 and NUL bytes (a receiver's answer may hold anything) become
// U+FFFD. Stores apply it to every error text they write.
func CleanErrorText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// ErrorText is s cleaned (CleanErrorText), then cut to at most max bytes
// without splitting a character: the error text of an outbox or inbox row.
func ErrorText(s string, max int) string {
	s = CleanErrorText(s)
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}
