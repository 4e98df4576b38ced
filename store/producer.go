package store

import (
	"context"

	"github.com/postbox-go/postbox"
)

// Producer writes events in the caller's own transaction, the one call
// shape of every store: what a producer's code depends on, whatever the
// database. TTx is the transaction type: pgx.Tx for *postgres.Store,
// *sql.Tx for *sqlite.Store and for (*postgres.Store).DatabaseSQL(). Code
// written against Producer[*sql.Tx] moves between SQLite and PostgreSQL
// (through database/sql) unchanged.
//
// EnqueueTx writes events in tx. An event whose DedupKey is already in the
// outbox, or held after the delivery of an event that had it
// (SettleParams.DedupWindow), is skipped and reported by a
// *postbox.DuplicateError
// (errors.Is(err, postbox.ErrDuplicate)); the transaction stays usable and
// the other events are written, so the caller decides whether to commit.
// After any other error, roll back: committing would commit the business
// change without its events. Events without an ID get a UUIDv7.
type Producer[TTx any] interface {
	EnqueueTx(ctx context.Context, tx TTx, events ...postbox.Event) error
}
