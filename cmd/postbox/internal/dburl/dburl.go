// Package dburl opens the store a database URL names: postgres://... (or
// postgresql://...) for the PostgreSQL store, sqlite:PATH for the SQLite
// store, mysql://... for the MariaDB/MySQL store. The command line and its applications (demo, bench, chaos) open
// every store through it, so that they all read a URL the same way and
// hand the relay the store's own driver, never a wrapper.
package dburl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/internal/redact"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/mysql"
	"github.com/postbox-go/postbox/store/postgres"
	"github.com/postbox-go/postbox/store/sqlite"
)

// ErrUnknownScheme is wrapped by Open's error for a URL that is none of
// postgres://, mysql:// and sqlite:.
var ErrUnknownScheme = errors.New("want postgres://..., mysql://... or sqlite:PATH")

// Options are how a store is opened.
type Options struct {
	// Schema is the PostgreSQL schema of the tables (default
	// postgres.SchemaDefault); ignored for SQLite.
	Schema string
	// ApplicationName names the PostgreSQL connections in
	// pg_stat_activity, unless the URL sets application_name itself.
	ApplicationName string
	// MustExist: never create a database (a SQLite file, a MySQL
	// database), for tools that only read.
	MustExist bool
}

// closeGrace is how long Close lets the PostgreSQL connections close
// cleanly before it closes their sockets (see postgres.ClosePool).
const closeGrace = time.Second

// DB is an opened database, seen through the contracts of package store:
// the command line, the demo and chaos call what they need of it without
// asking which store it is. The steps only one store can take (PostgreSQL's
// WAL stream, ordered migration, producers' notify trigger) ask once, with
// Postgres.
type DB struct {
	// Outbox is the store's outbox: what the relay drains, status reads
	// and the dead-letter tools change. Outbox, Endpoints and Presence are
	// the store's driver (its Driver method), the engine's side of it.
	Outbox store.Outbox
	// Endpoints holds the webhook endpoints, their deliveries and the
	// attempts log (postbox endpoints, postbox relay --endpoints).
	Endpoints store.Endpoints
	// Presence is the relays' presence table.
	Presence store.Presence
	// Console is what postbox console reads and changes: the store
	// itself.
	Console console.Store

	migrate  func(context.Context) ([]int, error)
	postgres *postgres.Store
	sqlite   *sqlite.Store
	mysql    *mysql.Store
	close    func()
}

// Migrate applies the store's migrations and returns the versions applied.
func (d *DB) Migrate(ctx context.Context) ([]int, error) { return d.migrate(ctx) }

// Postgres returns the PostgreSQL store, and false for another store: what
// PostgreSQL-only steps ask.
func (d *DB) Postgres() (*postgres.Store, bool) { return d.postgres, d.postgres != nil }

// SQLite returns the SQLite store, and false for another store.
func (d *DB) SQLite() (*sqlite.Store, bool) { return d.sqlite, d.sqlite != nil }

// MySQL returns the MariaDB/MySQL store, and false for another store.
func (d *DB) MySQL() (*mysql.Store, bool) { return d.mysql, d.mysql != nil }

// Close closes the store's connections.
func (d *DB) Close() { d.close() }

// Open connects to the store url names, and checks that the server answers.
// A PostgreSQL pool is set up by postgres.ConfigurePool, and closed by
// postgres.ClosePool.
func Open(ctx context.Context, url string, opt Options) (*DB, error) {
	if path, ok := SQLitePath(url); ok {
		if path == "" {
			return nil, errors.New("sqlite:PATH needs a file path")
		}
		s, err := sqlite.Open(ctx, path, sqlite.Config{MustExist: opt.MustExist})
		if err != nil {
			return nil, err
		}
		d := s.Driver()
		return &DB{Outbox: d, Endpoints: d, Presence: d, Console: s, migrate: s.Migrate, sqlite: s,
			close: func() { _ = s.Close() }}, nil
	}
	if IsMySQL(url) {
		// The database is MySQL's schema: created as PostgreSQL's
		// schema and the SQLite file are, unless the tool only reads.
		if !opt.MustExist {
			if _, err := mysql.CreateDatabase(ctx, url); err != nil {
				return nil, err
			}
		}
		s, err := mysql.Open(ctx, url, mysql.Config{})
		if err != nil {
			return nil, err // the store's errors name no password
		}
		d := s.Driver()
		return &DB{Outbox: d, Endpoints: d, Presence: d, Console: s, migrate: s.Migrate, mysql: s,
			close: func() { _ = s.Close() }}, nil
	}
	if !IsPostgres(url) {
		return nil, fmt.Errorf("%q: %w", Redact(url), ErrUnknownScheme)
	}
	s, err := openPostgres(ctx, url, opt)
	return s, Scrub(err, url) // pgx's errors may quote the URL
}

// openPostgres is Open for a PostgreSQL URL.
func openPostgres(ctx context.Context, url string, opt Options) (*DB, error) {
	pool, closePool, err := openPool(ctx, url, opt.ApplicationName, 0)
	if err != nil {
		return nil, err
	}
	s, err := postgres.New(pool, postgres.Config{Schema: opt.Schema})
	if err != nil {
		closePool()
		return nil, err
	}
	d := s.Driver()
	return &DB{Outbox: d, Endpoints: d, Presence: d, Console: s, migrate: s.Migrate, postgres: s, close: closePool}, nil
}

// openPool opens a pool on url, its connections named applicationName
// unless the URL names them, of at most maxConns connections (0: the URL's
// pool_max_conns, or pgx's default), and pings the database; closePool
// closes it (postgres.ClosePool).
func openPool(ctx context.Context, url, applicationName string, maxConns int32) (pool *pgxpool.Pool, closePool func(), err error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, nil, err
	}
	if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set && applicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = applicationName
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	sockets := postgres.ConfigurePool(cfg)
	pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	closePool = func() { postgres.ClosePool(pool, sockets, closeGrace) }
	if err := pool.Ping(ctx); err != nil {
		closePool()
		return nil, nil, fmt.Errorf("cannot reach the database: %w", err)
	}
	return pool, closePool, nil
}

// IsPostgres reports whether url names a PostgreSQL database.
func IsPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// IsMySQL reports whether url names a MariaDB or MySQL database.
func IsMySQL(url string) bool { return strings.HasPrefix(url, "mysql://") }

// SQLitePath returns the file of a sqlite:PATH (or sqlite://PATH) URL.
func SQLitePath(url string) (path string, ok bool) {
	rest, ok := strings.CutPrefix(url, "sqlite:")
	if !ok {
		return "", false
	}
	return strings.TrimPrefix(rest, "//"), true
}

// Redact returns a database URL or keyword/value DSN fit to print in a
// log, an error or a page (redact.DSN: its passwords read xxxxx); a
// sqlite:PATH is returned as it is. Every command prints a database URL
// through it.
func Redact(dsn string) string {
	if _, ok := SQLitePath(dsn); ok {
		return dsn
	}
	return redact.DSN(dsn)
}

// Scrub returns err with every password that dsn holds replaced by xxxxx
// in its text (redact.Scrub).
func Scrub(err error, dsn string) error { return redact.Scrub(err, dsn) }
