package inbox

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/inbox/inboxstore"
)

// Store is what the inbox needs of a database. TTx is the store's
// transaction type, which handlers receive (pgx.Tx for store/postgres).
// Every implementation passes the conformance suite in inbox/inboxtest.
//
// The table is the article's inbox_events: one row per event id, with a
// handler_status of pending, done or failed. A row is "free" when it is
// failed, or pending with an expired lease or none; free rows are taken
// over by the next delivery.
type Store[TTx any] interface {
	// InboxProcess runs, in one transaction: take the event's row (insert
	// it as done, or take a free row over and make it done, counting the
	// attempt); for an ordered event (Seq > 0), advance its aggregate's
	// last applied sequence number from Seq-1 to Seq; run fn; commit.
	//
	// A done row reports Done and a pending row with a live lease
	// InProgress, without running fn. A sequence that cannot advance
	// reports OutOfOrder or SeqApplied with the last applied number and
	// stores nothing. When fn fails, or the commit does, everything rolls
	// back; the store then records the failure (the row free and failed,
	// the attempt counted, the error kept) and returns fn's error, still
	// matching with errors.Is.
	//
	// Deliveries of one id running at once must serialise on the row: a
	// second one waits for the first transaction, then reports Done if it
	// committed, and takes the row if it rolled back. fn never runs twice
	// for one event unless the first run rolled back.
	InboxProcess(ctx context.Context, ev *inboxstore.Event, fn func(ctx context.Context, tx TTx) error) (inboxstore.Result, error)

	// InboxClaim takes the event's row, as InboxProcess does, but leaves it
	// pending and leased to p.Owner for p.Lease, and commits at once. An
	// ordered event whose predecessor is not applied reports OutOfOrder or
	// SeqApplied and stores nothing.
	InboxClaim(ctx context.Context, p *inboxstore.ClaimParams) (inboxstore.Result, error)

	// InboxComplete runs, in one transaction: mark the row done if it is
	// pending and leased to p.Owner (LeaseLost otherwise); advance the
	// aggregate's sequence as InboxProcess does; run fn, which may be nil;
	// commit, and report Taken. When fn fails, everything rolls back and
	// its error is returned. An expired lease that nobody took over still
	// completes.
	InboxComplete(ctx context.Context, p *inboxstore.CompleteParams, fn func(ctx context.Context, tx TTx) error) (inboxstore.Result, error)

	// InboxFail makes the row failed, free for the next delivery, with
	// p.Error as its last error, and reports Taken, if the row is pending
	// and leased to p.Owner (LeaseLost otherwise).
	InboxFail(ctx context.Context, p *inboxstore.FailParams) (inboxstore.Result, error)

	// InboxGet returns one row, or an error matching store.ErrNotFound.
	InboxGet(ctx context.Context, id uuid.UUID) (inboxstore.Record, error)

	// InboxDeleteProcessedBefore deletes up to limit done rows processed
	// before the given time, oldest first, and reports how many it
	// deleted. Pending and failed rows are kept.
	InboxDeleteProcessedBefore(ctx context.Context, before time.Time, limit int) (int, error)
}
