package inbox

import (
	"errors"
	"fmt"
)

// Errors of the inbox; they are wrapped with details, so compare them with
// errors.Is. The HTTP handler maps each to its answer.
var (
	// ErrInvalidEvent is returned for an event no store would take: a zero
	// id, a payload that is not JSON, a negative sequence number. Retrying
	// does not help (HTTP 400).
	ErrInvalidEvent = errors.New("inbox: invalid event")
	// ErrDuplicate is returned by Claim for an event that was processed
	// before. Answer it as a success (HTTP 200), as Process's Duplicate.
	ErrDuplicate = errors.New("inbox: event already processed")
	// ErrInProgress is returned when another claim holds a live lease on
	// the event: its work is under way. Retry later (HTTP 503).
	ErrInProgress = errors.New("inbox: event in progress")
	// ErrOutOfOrder is returned for an ordered event whose predecessor in
	// its aggregate has not been applied. Nothing was stored: retry later,
	// after the predecessor (HTTP 503 with Retry-After).
	ErrOutOfOrder = errors.New("inbox: event out of order")
	// ErrSequenceApplied is returned for an ordered event whose sequence
	// number was already applied in its aggregate by another event id. The
	// sender numbered two events alike; retrying does not help (HTTP 409).
	ErrSequenceApplied = errors.New("inbox: sequence number already applied")
	// ErrLeaseLost is returned by Complete and Fail when the claim's lease
	// expired and another claim took the event over.
	ErrLeaseLost = errors.New("inbox: claim lost")
)

// OrderError details ErrOutOfOrder and ErrSequenceApplied, which it
// matches with errors.Is.
type OrderError struct {
	// Err is ErrOutOfOrder or ErrSequenceApplied.
	Err           error
	AggregateType string
	AggregateID   string
	// Seq is the refused event's sequence number.
	Seq int64
	// LastApplied is the aggregate's last applied sequence number when the
	// event was refused (0: none).
	LastApplied int64
}

// Error describes the refusal.
func (e *OrderError) Error() string {
	return fmt.Sprintf("%v: aggregate %s/%s: event %d, last applied %d", e.Err, e.AggregateType, e.AggregateID, e.Seq, e.LastApplied)
}

// Unwrap returns Err.
func (e *OrderError) Unwrap() error { return e.Err }
