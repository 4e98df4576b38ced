package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Inbox is what package inbox needs of a database, implemented by the
// stores' drivers ((*postgres.Store).Driver()). TTx is the store's
// transaction type, which handlers receive (pgx.Tx for store/postgres,
// *sql.Tx for store/sqlite). Every implementation passes the conformance
// suite in postboxtest/inboxtest; applications use package inbox, whose
// Store is this interface.
//
// The table is the article's inbox_events: one row per event id, with a
// handler_status of pending, done or failed. A row is "free" when it is
// failed, or pending with an expired lease or none; free rows are taken
// over by the next delivery. Error texts are stored cleaned (see
// CleanErrorText) and bounded.
type Inbox[TTx any] interface {
	// InboxProcess runs, in one transaction: take the event's row (insert
	// it as done, or take a free row over and make it done, counting the
	// attempt); for an ordered event (Seq > 0), advance its aggregate's
	// last applied sequence number from Seq-1 to Seq; run fn; commit.
	//
	// A done row reports InboxDuplicate and a pending row with a live lease
	// InboxInProgress, without running fn. A sequence that cannot advance
	// reports InboxOutOfOrder or InboxSeqApplied with the last applied
	// number and stores nothing. When fn fails, or the commit does,
	// everything rolls back; the store then records the failure (the row
	// free and failed, the attempt counted, the error kept) and returns fn's
	// error, still matching with errors.Is.
	//
	// Deliveries of one id running at once must serialise on the row: a
	// second one waits for the first transaction, then reports InboxDuplicate if
	// it committed, and takes the row if it rolled back. fn never runs twice
	// for one event unless the first run rolled back.
	InboxProcess(ctx context.Context, ev *InboxEvent, fn func(ctx context.Context, tx TTx) error) (InboxResult, error)

	// InboxClaim takes the event's row, as InboxProcess does, but leaves it
	// pending and leased to p.Owner for p.Lease, and commits at once. An
	// ordered event whose predecessor is not applied reports
	// InboxOutOfOrder or InboxSeqApplied and stores nothing.
	InboxClaim(ctx context.Context, p *InboxClaimParams) (InboxResult, error)

	// InboxComplete runs, in one transaction: mark the row done if it is
	// pending and leased to p.Owner (InboxLeaseLost otherwise); advance the
	// aggregate's sequence as InboxProcess does; run fn, which may be nil;
	// commit, and report InboxTaken. When fn fails, everything rolls back
	// and its error is returned. An expired lease that nobody took over
	// still completes.
	InboxComplete(ctx context.Context, p *InboxCompleteParams, fn func(ctx context.Context, tx TTx) error) (InboxResult, error)

	// InboxFail makes the row failed, free for the next delivery, with
	// p.Error as its last error, and reports InboxTaken, if the row is
	// pending and leased to p.Owner (InboxLeaseLost otherwise).
	InboxFail(ctx context.Context, p *InboxFailParams) (InboxResult, error)

	// InboxGet returns one row, or an error matching ErrNotFound.
	InboxGet(ctx context.Context, id uuid.UUID) (InboxRecord, error)

	// InboxDeleteProcessedBefore deletes up to limit done rows processed
	// before the given time, oldest first, and reports how many it
	// deleted. Pending and failed rows are kept.
	InboxDeleteProcessedBefore(ctx context.Context, before time.Time, limit int) (int, error)
}

// InboxReader is what tools read of the inbox (a console): one row, or the
// most recent rows of a status. It is apart from Inbox, which writes.
type InboxReader interface {
	// InboxGet returns one row, or an error matching ErrNotFound.
	InboxGet(ctx context.Context, id uuid.UUID) (InboxRecord, error)
	// InboxList returns up to p.Limit rows with status p.Status, the most
	// recent first: done rows by the time they were processed, pending and
	// failed ones by the time they were received.
	InboxList(ctx context.Context, p InboxListParams) ([]InboxRecord, error)
}

// InboxListParams select inbox rows for InboxList.
type InboxListParams struct {
	// Status is StatusPending, StatusDone or StatusFailed.
	Status string
	// Limit is the most rows returned (1 to InboxListLimitMax).
	Limit int
}

// InboxListLimitMax is the largest InboxListParams.Limit.
const InboxListLimitMax = 10_000

// Check returns an error naming the field that is out of range.
func (p InboxListParams) Check() error {
	switch p.Status {
	case StatusPending, StatusDone, StatusFailed:
	default:
		return fmt.Errorf("inbox list: Status %q: want %s, %s or %s", p.Status, StatusPending, StatusDone, StatusFailed)
	}
	if p.Limit < 1 || p.Limit > InboxListLimitMax {
		return fmt.Errorf("inbox list: Limit %d: want 1 to %d", p.Limit, InboxListLimitMax)
	}
	return nil
}

// InboxEvent is one incoming event (inbox.Event is this type). The inbox
// validates it before a store sees it: ID is not zero, Payload is empty or
// valid JSON, Seq is not negative and the strings are UTF-8 without NUL
// bytes. Stores must not change it.
type InboxEvent struct {
	// ID is the stable event id: the producer's outbox row id, sent as the
	// webhook id or the broker message id. It is the inbox primary key.
	// Required.
	ID uuid.UUID
	// EventType is the event's name, such as "order.created". Optional.
	EventType string
	// AggregateType and AggregateID name the entity the event is about
	// ("order", "42"). Optional; with Seq they name the sequence the event
	// belongs to.
	AggregateType string
	AggregateID   string
	// Seq is the event's position among the events of its aggregate,
	// starting at 1, for consumer-side ordering: an event is applied only
	// after the event numbered Seq-1 of the same aggregate (see
	// inbox.ErrOutOfOrder). Zero means the event is not ordered.
	Seq int64
	// Payload is the event's JSON body, stored in the inbox row for audit;
	// empty stores SQL NULL, anything else must be valid JSON.
	Payload []byte
	// Signature is the signature header the event came with, stored for
	// audit; empty stores SQL NULL.
	Signature string
}

// InboxClaimParams take an event's row for non-transactional work: the row
// is written pending, leased to Owner until now + Lease.
type InboxClaimParams struct {
	Event InboxEvent
	Owner string
	Lease time.Duration
}

// InboxCompleteParams mark a claimed event done, if Owner still holds it.
// AggregateType, AggregateID and Seq are the claimed event's.
type InboxCompleteParams struct {
	ID            uuid.UUID
	Owner         string
	AggregateType string
	AggregateID   string
	Seq           int64
}

// InboxFailParams give a claimed event up: its row becomes failed with
// Error as its last error, if Owner still holds it.
type InboxFailParams struct {
	ID    uuid.UUID
	Owner string
	Error string
}

// InboxStatus is what a store found when it tried to take an event's row.
type InboxStatus int

const (
	// InboxTaken: the row was written or taken over (it was failed, or
	// pending with an expired lease or none), or, for a complete or fail,
	// settled; the work went ahead.
	InboxTaken InboxStatus = iota + 1
	// InboxDuplicate: the event was processed before; nothing was run or
	// changed.
	InboxDuplicate
	// InboxInProgress: another claim holds a live lease on the event;
	// nothing was run or changed.
	InboxInProgress
	// InboxOutOfOrder: the event's predecessor in its aggregate has not
	// been applied; nothing was run or stored.
	InboxOutOfOrder
	// InboxSeqApplied: another event already took this event's sequence
	// number in its aggregate; nothing was run or stored.
	InboxSeqApplied
	// InboxLeaseLost: the claim's lease was taken over by another claim, or
	// the row is no longer pending; nothing was run or changed.
	InboxLeaseLost
)

// String returns the status's name.
func (s InboxStatus) String() string {
	switch s {
	case InboxTaken:
		return "taken"
	case InboxDuplicate:
		return "duplicate"
	case InboxInProgress:
		return "in progress"
	case InboxOutOfOrder:
		return "out of order"
	case InboxSeqApplied:
		return "sequence applied"
	case InboxLeaseLost:
		return "lease lost"
	}
	return "unknown"
}

// InboxResult is the outcome of a store call that takes or settles a row.
type InboxResult struct {
	Status InboxStatus
	// Attempt counts the runs of the event's handler, or its claims,
	// including this one; set when Status is InboxTaken.
	Attempt int
	// LastSeq is the aggregate's last applied sequence number; set when
	// Status is InboxOutOfOrder or InboxSeqApplied.
	LastSeq int64
}

// InboxRecord is the full state of one inbox row.
type InboxRecord struct {
	ID            uuid.UUID
	EventType     string
	AggregateType string
	AggregateID   string
	Seq           int64
	Payload       []byte
	Signature     string
	// Status is StatusPending, StatusDone or StatusFailed.
	Status         string
	Attempts       int
	LastError      string
	LeaseOwner     string
	LeaseExpiresAt time.Time
	ReceivedAt     time.Time
	// ProcessedAt is zero until the event is done.
	ProcessedAt time.Time
}
