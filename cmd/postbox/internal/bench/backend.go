package bench

import (
	"context"
	"fmt"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/store"
)

// backend is the database a run works in: PostgreSQL, SQLite, or MariaDB
// and MySQL.
type backend interface {
	// kind is "postgres", "sqlite" or "mysql".
	kind() string
	// info describes the server (or library) and the settings that matter.
	info(ctx context.Context) (version string, settings map[string]string)
	// newScratch creates and migrates a fresh outbox named after label.
	newScratch(ctx context.Context, label string) (scratch, error)
	// dropAll drops every scratch outbox of the run that is left.
	dropAll(ctx context.Context) error
	// leftovers lists the scratch outboxes of the run that still exist.
	leftovers(ctx context.Context) ([]string, error)
	close()
}

// scratch is one fresh, migrated outbox of its own.
type scratch interface {
	// name is the PostgreSQL schema, the SQLite file or the MySQL
	// database.
	name() string
	// outbox is the store of the relays the bench runs in process, and of
	// the Stats that tell when a backlog is drained.
	outbox() store.Outbox
	// enqueue writes one event in a transaction of its own, as a producer.
	enqueue(ctx context.Context, e postbox.Event) error
	// fill writes the events from..to (inclusive) of a backlog in one
	// statement, spread round-robin over aggregates aggregates (event g's
	// is order-(g mod aggregates)); 0: each event its own aggregate.
	fill(ctx context.Context, from, to, aggregates int) error
	// migrateOrdered makes the outbox ready for ordered claims, as
	// `postbox migrate --ordered` does after Migrate: on PostgreSQL the
	// store's MigrateOrdered (the index of ordered claims); nothing on
	// SQLite.
	migrateOrdered(ctx context.Context) error
	// prepare vacuums and analyzes the tables and checkpoints, so every
	// measure starts alike.
	prepare(ctx context.Context) error
	// rawBatch runs one statement of a raw-SQL drain and reports the rows
	// it took.
	rawBatch(ctx context.Context, q rawQuery) (int64, error)
	// createOrders creates the business table.
	createOrders(ctx context.Context) error
	// order commits one business transaction: one order row, and one
	// event about it written as mode says.
	order(ctx context.Context, amount int64, mode orderMode) error
	// relayFlags are the flags of `postbox relay` that open this outbox.
	relayFlags() []string
	// drop removes the outbox and what it holds.
	drop(ctx context.Context) error
}

// orderMode is how a business transaction of write-overhead writes its
// event.
type orderMode int

const (
	// orderPlain writes no event.
	orderPlain orderMode = iota
	// orderEnqueueTx writes it with EnqueueTx, in a round trip of its own
	// before the COMMIT.
	orderEnqueueTx
	// orderTransact writes it with the PostgreSQL store's Transact, in the
	// round trip of the COMMIT. SQLite, which has no round trips to save,
	// uses EnqueueTx.
	orderTransact
)

// rawQuery names a raw-SQL drain.
type rawQuery int

const (
	rawDelete rawQuery = iota
	rawUpdate
)

func (q rawQuery) String() string {
	if q == rawDelete {
		return "raw DELETE"
	}
	return "raw UPDATE to done"
}

// openBackend connects to the database of url for the run named run.
func openBackend(ctx context.Context, url, run string) (backend, error) {
	if dburl.IsPostgres(url) {
		return openPostgres(ctx, url, run)
	}
	if dburl.IsMySQL(url) {
		return openMySQL(ctx, url, run)
	}
	if path, ok := dburl.SQLitePath(url); ok {
		return openSQLite(path, run)
	}
	return nil, fmt.Errorf("bench: database URL %q: %w", dburl.Redact(url), dburl.ErrUnknownScheme)
}

// orderEvent is the event of one order, with a payload the size of the
// backlog's.
func orderEvent(orderID int64) postbox.Event {
	return postbox.Event{
		ID:            postbox.NewID(),
		AggregateType: "order",
		AggregateID:   fmt.Sprintf("order-%d", orderID),
		EventType:     "order.created",
		Payload: fmt.Appendf(nil,
			`{"items": %d, "channel": "web", "currency": "EUR", "order_id": %d, "customer_id": "customer-%d", "amount_cents": %d}`,
			1+orderID%5, orderID, orderID%9973, orderID*7919%100000),
	}
}
