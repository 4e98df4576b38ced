package demo

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
	"github.com/postbox-go/postbox/store/sqlite"
)

// execer runs one statement in the consumer's inbox transaction.
type execer func(ctx context.Context, query string, args ...any) error

// backend is one database as the demo uses it: the outbox, the business
// tables of the producer and the consumer, and the inbox.
type backend struct {
	outbox store.Outbox
	// createOrder writes an order and its event in one transaction.
	createOrder func(ctx context.Context, o orderPayload, ev postbox.Event) error
	// process applies an event through the inbox; fn runs in its
	// transaction.
	process func(ctx context.Context, ev *inbox.Event, fn func(context.Context, execer, *inbox.Event) error) (inbox.Outcome, error)
	// query runs a reconciliation query returning one number.
	query func(ctx context.Context, q string) (int64, error)
	// orders and reservations are the quoted table names.
	orders, reservations string
	close                func()
}

// Business tables: reservations has no unique constraint, so an event
// applied twice would show as a second row.
const (
	createOrdersSQL       = `create table %s (id text primary key, user_id text not null, amount bigint not null)`
	createReservationsSQL = `create table %s (event_id text not null, order_id text not null, amount bigint not null)`
	insertOrderSQL        = `insert into %s (id, user_id, amount) values ($1, $2, $3)`
	insertReservationSQL  = `insert into %s (event_id, order_id, amount) values ($1, $2, $3)`
)

func openBackend(ctx context.Context, url, schema string) (*backend, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return openPostgres(ctx, url, schema)
	case strings.HasPrefix(url, "sqlite:"):
		return openSQLite(ctx, strings.TrimPrefix(url, "sqlite:"))
	case url == "":
		dir, err := os.MkdirTemp("", "postbox-demo-")
		if err != nil {
			return nil, err
		}
		b, err := openSQLite(ctx, filepath.Join(dir, "demo.db"))
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		closeDB := b.close
		b.close = func() { closeDB(); os.RemoveAll(dir) }
		return b, nil
	}
	return nil, fmt.Errorf("demo: --db %q: want postgres://... or sqlite:PATH", url)
}

func openPostgres(ctx context.Context, url, schema string) (*backend, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("demo: --db: %w", err)
	}
	fail := func(err error) (*backend, error) { pool.Close(); return nil, err }
	s, err := postgres.New(pool, postgres.Config{Schema: schema})
	if err != nil {
		return fail(err)
	}
	if _, err := pool.Exec(ctx, "drop schema if exists "+pgx.Identifier{schema}.Sanitize()+" cascade"); err != nil {
		return fail(fmt.Errorf("demo: cannot prepare schema %s: %w", schema, err))
	}
	if _, err := s.Migrate(ctx); err != nil {
		return fail(err)
	}
	b := &backend{outbox: s, orders: s.Table("demo_orders"), reservations: s.Table("demo_reservations"), close: pool.Close}
	for _, q := range []string{fmt.Sprintf(createOrdersSQL, b.orders), fmt.Sprintf(createReservationsSQL, b.reservations)} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fail(err)
		}
	}
	insertOrder := fmt.Sprintf(insertOrderSQL, b.orders)
	b.createOrder = func(ctx context.Context, o orderPayload, ev postbox.Event) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, insertOrder, o.OrderID, o.UserID, o.Amount); err != nil {
				return err
			}
			return s.EnqueueTx(ctx, tx, ev)
		})
	}
	ib := inbox.New[pgx.Tx](s)
	b.process = func(ctx context.Context, ev *inbox.Event, fn func(context.Context, execer, *inbox.Event) error) (inbox.Outcome, error) {
		return ib.Process(ctx, ev, func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
			return fn(ctx, func(ctx context.Context, q string, args ...any) error {
				_, err := tx.Exec(ctx, q, args...)
				return err
			}, ev)
		})
	}
	b.query = func(ctx context.Context, q string) (n int64, err error) {
		err = pool.QueryRow(ctx, q).Scan(&n)
		return n, err
	}
	return b, nil
}

func openSQLite(ctx context.Context, path string) (*backend, error) {
	if _, err := os.Stat(path); err == nil {
		return nil, fmt.Errorf("demo: %s exists: the demo needs a new file, so that its reconciliation counts only its own orders", path)
	}
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*backend, error) { s.Close(); return nil, err }
	if _, err := s.Migrate(ctx); err != nil {
		return fail(err)
	}
	db := s.DB()
	b := &backend{outbox: s, orders: s.Table("demo_orders"), reservations: s.Table("demo_reservations"), close: func() { s.Close() }}
	for _, q := range []string{fmt.Sprintf(createOrdersSQL, b.orders), fmt.Sprintf(createReservationsSQL, b.reservations)} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fail(err)
		}
	}
	insertOrder := fmt.Sprintf(insertOrderSQL, b.orders)
	b.createOrder = func(ctx context.Context, o orderPayload, ev postbox.Event) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, insertOrder, o.OrderID, o.UserID, o.Amount); err != nil {
			return err
		}
		if err := s.EnqueueTx(ctx, tx, ev); err != nil {
			return err
		}
		return tx.Commit()
	}
	ib := inbox.New[*sql.Tx](s)
	b.process = func(ctx context.Context, ev *inbox.Event, fn func(context.Context, execer, *inbox.Event) error) (inbox.Outcome, error) {
		return ib.Process(ctx, ev, func(ctx context.Context, tx *sql.Tx, ev *inbox.Event) error {
			return fn(ctx, func(ctx context.Context, q string, args ...any) error {
				_, err := tx.ExecContext(ctx, q, args...)
				return err
			}, ev)
		})
	}
	b.query = func(ctx context.Context, q string) (n int64, err error) {
		err = db.QueryRowContext(ctx, q).Scan(&n)
		return n, err
	}
	return b, nil
}
