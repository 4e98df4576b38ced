package inbox

import "errors"

// ErrRejected matches the errors of Reject: a handler refused an event for
// good, because no retry can make it acceptable (a payload that does not
// decode or breaks a business rule, an event type without a route). Every
// error matching it also matches ErrInvalidEvent, so code that handles
// ErrInvalidEvent (the webhook handler, broker consumers dropping a
// message) treats a rejection alike.
var ErrRejected = errors.New("inbox: event rejected")

// Reject returns an error that rejects the event for good; a ProcessFunc
// (or a route of a Router) returns it for an event that no retry could
// apply:
//
//	if p.Amount <= 0 {
//		return inbox.Reject(fmt.Errorf("amount %d is not positive", p.Amount))
//	}
//
// The error matches ErrRejected, ErrInvalidEvent and cause with errors.Is
// and errors.As. What follows is what happens to any failed handler, with
// the answer of an invalid event:
//
//   - The handler's transaction rolls back: nothing of its work stays.
//   - The event's inbox row is recorded failed, with the attempt counted and
//     the error's text as its last error, for inspection (Inbox.Get).
//     Retention never deletes failed rows.
//   - Inbox.Process returns the error, wrapped.
//   - The webhook handler answers 400 {"status":"bad_request"}. A postbox
//     relay counts a 4xx other than 410 and 429 as a rejection: it delivers
//     the event at most relay.Config.RejectedAttempts times in all (5 by
//     default), each delivery rejected alike, then moves it to failed, its
//     dead-letter state, with the answer as its last error; there it waits
//     to be retried by hand once the consumer accepts it.
//   - A broker consumer drops the message or sends it to a dead-letter
//     queue, as for ErrInvalidEvent (see the package documentation).
//
// For a failure that a later delivery may not meet (a lock timeout, a
// service down), return the error itself instead: it is answered 500 and
// retried through the sender's whole backoff schedule.
//
// A nil cause rejects with no further reason.
func Reject(cause error) error {
	return &rejectError{cause: cause}
}

// rejectError is the error of Reject.
type rejectError struct {
	cause error
}

// Error returns "rejected: " and the cause.
func (e *rejectError) Error() string {
	if e.cause == nil {
		return "rejected"
	}
	return "rejected: " + e.cause.Error()
}

// Unwrap returns ErrRejected, ErrInvalidEvent and the cause, if any.
func (e *rejectError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrRejected, ErrInvalidEvent}
	}
	return []error{ErrRejected, ErrInvalidEvent, e.cause}
}
