// Package inboxstore holds the plain types a database store exchanges with
// package inbox: the parameters of the inbox.Store methods and their results.
//
// It is a leaf package (it imports no other postbox package), so that a
// store such as store/postgres can implement inbox.Store without importing
// package inbox and its HTTP handler. Applications use package inbox and
// never need this one.
package inboxstore

import (
	"time"

	"github.com/google/uuid"
)

// Event is an incoming event as the inbox hands it to a store. The inbox has
// validated it: ID is not zero, Payload is empty or valid JSON, Seq is not
// negative and the strings hold no NUL bytes.
type Event struct {
	ID            uuid.UUID
	EventType     string
	AggregateType string
	AggregateID   string
	// Seq is the event's position in its aggregate, from 1; 0 means the
	// event is not ordered.
	Seq int64
	// Payload is stored as the row's payload; nil stores SQL NULL.
	Payload []byte
	// Signature is stored for audit; empty stores SQL NULL.
	Signature string
}

// ClaimParams take an event's row for non-transactional work: the row is
// written pending, leased to Owner until now + Lease.
type ClaimParams struct {
	Event Event
	Owner string
	Lease time.Duration
}

// CompleteParams mark a claimed event done, if Owner still holds it.
// AggregateType, AggregateID and Seq are the claimed event's.
type CompleteParams struct {
	ID            uuid.UUID
	Owner         string
	AggregateType string
	AggregateID   string
	Seq           int64
}

// FailParams give a claimed event up: its row becomes failed with Error as
// its last error, if Owner still holds it.
type FailParams struct {
	ID    uuid.UUID
	Owner string
	Error string
}

// Status is what a store found when it tried to take an event's row.
type Status int

const (
	// Taken: the row was written or taken over (it was failed, or pending
	// with an expired lease or none), or, for a complete or fail, settled;
	// the work went ahead.
	Taken Status = iota + 1
	// Done: the event was processed before; nothing was run or changed.
	Done
	// InProgress: another claim holds a live lease on the event; nothing
	// was run or changed.
	InProgress
	// OutOfOrder: the event's predecessor in its aggregate has not been
	// applied; nothing was run or stored.
	OutOfOrder
	// SeqApplied: another event already took this event's sequence number
	// in its aggregate; nothing was run or stored.
	SeqApplied
	// LeaseLost: the claim's lease was taken over by another claim, or the
	// row is no longer pending; nothing was run or changed.
	LeaseLost
)

// String returns the status's name.
func (s Status) String() string {
	switch s {
	case Taken:
		return "taken"
	case Done:
		return "done"
	case InProgress:
		return "in progress"
	case OutOfOrder:
		return "out of order"
	case SeqApplied:
		return "sequence applied"
	case LeaseLost:
		return "lease lost"
	}
	return "unknown"
}

// Result is the outcome of a store call that takes or settles a row.
type Result struct {
	Status Status
	// Attempt counts the runs of the event's handler, or its claims,
	// including this one; set when Status is Taken.
	Attempt int
	// LastSeq is the aggregate's last applied sequence number; set when
	// Status is OutOfOrder or SeqApplied.
	LastSeq int64
}

// Record is the full state of one inbox row.
type Record struct {
	ID            uuid.UUID
	EventType     string
	AggregateType string
	AggregateID   string
	Seq           int64
	Payload       []byte
	Signature     string
	// Status is store.StatusPending, store.StatusDone or store.StatusFailed.
	Status         string
	Attempts       int
	LastError      string
	LeaseOwner     string
	LeaseExpiresAt time.Time
	ReceivedAt     time.Time
	// ProcessedAt is zero until the event is done.
	ProcessedAt time.Time
}
