package demo

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/mysql"
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
	// insertReservation is the statement of a reservation, in the
	// store's dialect (insertReservationSQL by default).
	insertReservation string
	close             func()
	// schema is the PostgreSQL schema of the run; empty on SQLite.
	schema string
	// exec runs one statement outside the inbox (PostgreSQL only).
	exec func(ctx context.Context, q string) error
	// database names the MariaDB/MySQL database of the run, and
	// dropDatabase drops it; empty and nil on the other stores.
	database     string
	dropDatabase func(ctx context.Context) error
}

// dropSchemaTimeout bounds the drop of the demo's schema at the end.
const dropSchemaTimeout = 30 * time.Second

// dropSchema drops the run's PostgreSQL schema, unless cfg.Keep or the run
// failed (ok false): then it says where the schema is.
func (b *backend) dropSchema(ctx context.Context, cfg Config, ok bool) {
	if b.dropDatabase != nil {
		b.dropMySQL(ctx, cfg, ok)
		return
	}
	if b.schema == "" {
		return
	}
	quoted := pgx.Identifier{b.schema}.Sanitize()
	switch {
	case cfg.Keep:
		say(cfg, fmt.Sprintf("schema %s kept (--keep); drop it with: drop schema %s cascade", b.schema, quoted))
		return
	case !ok:
		say(cfg, fmt.Sprintf("schema %s kept to be looked into; drop it with: drop schema %s cascade", b.schema, quoted))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, dropSchemaTimeout)
	defer cancel()
	if err := b.exec(ctx, "drop schema if exists "+quoted+" cascade"); err != nil {
		say(cfg, fmt.Sprintf("could not drop schema %s: %v", b.schema, err))
	}
}

// dropMySQL drops the run's MariaDB/MySQL database, unless cfg.Keep or the
// run failed (ok false): then it says where it is.
func (b *backend) dropMySQL(ctx context.Context, cfg Config, ok bool) {
	switch {
	case cfg.Keep:
		say(cfg, fmt.Sprintf("database %s kept (--keep)", b.database))
		return
	case !ok:
		say(cfg, fmt.Sprintf("database %s kept to be looked into", b.database))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, dropSchemaTimeout)
	defer cancel()
	if err := b.dropDatabase(ctx); err != nil {
		say(cfg, fmt.Sprintf("could not drop database %s: %v", b.database, err))
	}
}

// Business tables: reservations has no unique constraint, so an event
// applied twice would show as a second row.
const (
	createOrdersSQL       = `create table %s (id text primary key, user_id text not null, amount bigint not null)`
	createReservationsSQL = `create table %s (event_id text not null, order_id text not null, amount bigint not null)`
	insertOrderSQL        = `insert into %s (id, user_id, amount) values ($1, $2, $3)`
	insertReservationSQL  = `insert into %s (event_id, order_id, amount) values ($1, $2, $3)`
)

// The business tables in MySQL's dialect: a key is of bounded length, and
// parameters are ?.
const (
	createOrdersMySQL       = `create table %s (id varchar(64) primary key, user_id varchar(64) not null, amount bigint not null)`
	createReservationsMySQL = `create table %s (event_id char(36) not null, order_id varchar(64) not null, amount bigint not null)`
	insertOrderMySQL        = `insert into %s (id, user_id, amount) values (?, ?, ?)`
	insertReservationMySQL  = `insert into %s (event_id, order_id, amount) values (?, ?, ?)`
)

func openBackend(ctx context.Context, url, schema string) (*backend, error) {
	if url == "" {
		dir, err := os.MkdirTemp("", "postbox-demo-")
		if err != nil {
			return nil, err
		}
		b, err := openBackend(ctx, "sqlite:"+filepath.Join(dir, "demo.db"), schema)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		closeDB := b.close
		b.close = func() { closeDB(); os.RemoveAll(dir) }
		return b, nil
	}
	if dburl.IsMySQL(url) {
		return openMySQLBackend(ctx, url)
	}
	if path, ok := dburl.SQLitePath(url); ok {
		if _, err := os.Stat(path); err == nil {
			return nil, fmt.Errorf("demo: %s exists: the demo needs a new file, so that its reconciliation counts only its own orders", path)
		}
	}
	s, err := dburl.Open(ctx, url, dburl.Options{Schema: schema, ApplicationName: "postbox demo"})
	if err != nil {
		return nil, fmt.Errorf("demo: --db: %w", err)
	}
	var b *backend
	if pg, ok := s.Postgres(); ok {
		b, err = newPostgresBackend(ctx, pg)
	} else {
		lite, _ := s.SQLite()
		b, err = newSQLiteBackend(ctx, lite)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	b.close = s.Close
	return b, nil
}

// newPostgresBackend makes the demo's tables in the store's schema, dropped
// first with whatever it held.
func newPostgresBackend(ctx context.Context, s *postgres.Store) (*backend, error) {
	pool := s.Pool()
	if _, err := pool.Exec(ctx, "drop schema if exists "+pgx.Identifier{s.Schema()}.Sanitize()+" cascade"); err != nil {
		return nil, fmt.Errorf("demo: cannot prepare schema %s: %w", s.Schema(), err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		return nil, err
	}
	b := &backend{outbox: s.Driver(), orders: s.Table("demo_orders"), reservations: s.Table("demo_reservations"), schema: s.Schema(),
		exec: func(ctx context.Context, q string) error {
			_, err := pool.Exec(ctx, q)
			return err
		}}
	for _, q := range []string{fmt.Sprintf(createOrdersSQL, b.orders), fmt.Sprintf(createReservationsSQL, b.reservations)} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return nil, err
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
	ib := inbox.New(s.Driver())
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

// newSQLiteBackend makes the demo's tables in the store's new file.
func newSQLiteBackend(ctx context.Context, s *sqlite.Store) (*backend, error) {
	if _, err := s.Migrate(ctx); err != nil {
		return nil, err
	}
	db := s.DB()
	b := &backend{outbox: s.Driver(), orders: s.Table("demo_orders"), reservations: s.Table("demo_reservations")}
	for _, q := range []string{fmt.Sprintf(createOrdersSQL, b.orders), fmt.Sprintf(createReservationsSQL, b.reservations)} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, err
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
	b.process = sqlProcess(inbox.New(s.Driver()))
	b.query = func(ctx context.Context, q string) (n int64, err error) {
		err = db.QueryRowContext(ctx, q).Scan(&n)
		return n, err
	}
	return b, nil
}

// sqlProcess is a backend's process through ib, an inbox on database/sql.
func sqlProcess(ib *inbox.Inbox[*sql.Tx]) func(ctx context.Context, ev *inbox.Event, fn func(context.Context, execer, *inbox.Event) error) (inbox.Outcome, error) {
	return func(ctx context.Context, ev *inbox.Event, fn func(context.Context, execer, *inbox.Event) error) (inbox.Outcome, error) {
		return ib.Process(ctx, ev, func(ctx context.Context, tx *sql.Tx, ev *inbox.Event) error {
			return fn(ctx, func(ctx context.Context, q string, args ...any) error {
				_, err := tx.ExecContext(ctx, q, args...)
				return err
			}, ev)
		})
	}
}

// openMySQLBackend makes the demo's tables in the URL's MariaDB/MySQL
// database, which must be new (it is created) or empty, so that the
// reconciliation counts only the demo's own orders.
func openMySQLBackend(ctx context.Context, url string) (*backend, error) {
	if _, err := mysql.CreateDatabase(ctx, url); err != nil {
		return nil, fmt.Errorf("demo: --db: %w", err)
	}
	s, err := mysql.Open(ctx, url, mysql.Config{})
	if err != nil {
		return nil, fmt.Errorf("demo: --db: %w", err)
	}
	b, err := newMySQLBackend(ctx, s)
	if err != nil {
		s.Close()
		return nil, err
	}
	b.close = func() { _ = s.Close() }
	b.database = s.String()
	b.dropDatabase = func(ctx context.Context) error { return mysql.DropDatabase(ctx, url) }
	return b, nil
}

// newMySQLBackend makes the demo's tables in the store's empty database.
func newMySQLBackend(ctx context.Context, s *mysql.Store) (*backend, error) {
	db := s.DB()
	var tables int
	if err := db.QueryRowContext(ctx, "select count(*) from information_schema.tables where table_schema = database()").Scan(&tables); err != nil {
		return nil, fmt.Errorf("demo: %s: %w", s, err)
	}
	if tables > 0 {
		return nil, fmt.Errorf("demo: database %s has %d tables: the demo needs a new or empty database, so that its reconciliation counts only its own orders (name another one; it is created)", s, tables)
	}
	if _, err := s.Migrate(ctx); err != nil {
		return nil, err
	}
	b := &backend{outbox: s.Driver(), orders: s.Table("demo_orders"), reservations: s.Table("demo_reservations")}
	for _, q := range []string{fmt.Sprintf(createOrdersMySQL, b.orders), fmt.Sprintf(createReservationsMySQL, b.reservations)} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, err
		}
	}
	insertOrder := fmt.Sprintf(insertOrderMySQL, b.orders)
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
	b.process = sqlProcess(inbox.New(s.Driver()))
	b.query = func(ctx context.Context, q string) (n int64, err error) {
		err = db.QueryRowContext(ctx, q).Scan(&n)
		return n, err
	}
	b.insertReservation = insertReservationMySQL
	return b, nil
}
