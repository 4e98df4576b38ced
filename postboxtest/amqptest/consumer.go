package amqptest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store/postgres"
)

// Applied is a consumer's database for tests through a broker: an inbox on
// a fresh PostgreSQL schema, and a business table that records every
// applied event without a unique key, so that a duplicate effect shows as a
// second row.
type Applied struct {
	Store *postgres.Store
	Inbox *inbox.Inbox[pgx.Tx]
	// Table is the business table, quoted.
	Table string
}

// NewApplied makes the database; its schema is dropped when the test ends.
func NewApplied(t testing.TB) *Applied {
	t.Helper()
	s := pgtest.Store(t)
	a := &Applied{Store: s, Inbox: inbox.New(s.Driver()), Table: s.Table("applied")}
	if _, err := s.Pool().Exec(context.Background(), "create table "+a.Table+" (event_id uuid not null)"); err != nil {
		t.Fatal(err)
	}
	return a
}

// Apply is a handler: it records ev in the inbox's transaction.
func (a *Applied) Apply(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
	_, err := tx.Exec(ctx, "insert into "+a.Table+" (event_id) values ($1)", ev.ID)
	return err
}

// Counts returns how many rows each applied event id has.
func (a *Applied) Counts(t testing.TB) map[uuid.UUID]int {
	t.Helper()
	rows, err := a.Store.Pool().Query(context.Background(), "select event_id, count(*) from "+a.Table+" group by event_id")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct {
		id uuid.UUID
		n  int
	}, error) {
		var r struct {
			id uuid.UUID
			n  int
		}
		err := row.Scan(&r.id, &r.n)
		return r, err
	})
	if err != nil {
		t.Fatal(err)
	}
	counts := make(map[uuid.UUID]int, len(out))
	for _, r := range out {
		counts[r.id] = r.n
	}
	return counts
}

// Logs is a log that a test reads while the code under test writes it.
type Logs = logbuf.Buffer

// NewLogs returns a text logger writing to a new Logs.
func NewLogs() (*slog.Logger, *Logs) {
	l := &Logs{}
	return slog.New(slog.NewTextHandler(l, nil)), l
}
