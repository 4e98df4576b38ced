package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// Migration is one numbered schema change.
type Migration = store.Migration

// Migrations returns the embedded migrations in order, placeholders unfilled.
func Migrations() ([]Migration, error) {
	return store.ReadMigrations(migrationFiles, "migrations")
}

// migrationsTable records the applied migrations.
const migrationsTable = `create table if not exists {prefix}postbox_migrations (
  version    int not null primary key,
  name       varchar(255) not null,
  applied_at datetime(6) not null default (utc_timestamp(6))
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_bin`

// migrateLockTimeout bounds, in seconds, the wait of Migrate for another
// one running on the same tables.
const migrateLockTimeout = 60

// Migrate applies the migrations it has not applied yet, in order, and
// returns the versions it applied. Running it again is a no-op. Concurrent
// runs, in this process or others, take turns on a named lock (GET_LOCK)
// of the database and table prefix: the later one waits, up to a minute,
// then finds the work done.
//
// MySQL commits each schema change on its own (DDL is not transactional):
// a migration that fails halfway leaves the changes it made before the
// failing statement, unrecorded. Its error names the migration; fix the
// cause, undo those changes by hand, and run Migrate again.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	conf := s.conf.Clone()
	conf.MultiStatements = true // a migration is a file of statements
	connector, err := mysql.NewConnector(conf)
	if err != nil {
		return nil, fmt.Errorf("mysql: migrate: %w", err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	applied, err := sqlstore.Migrate(ctx, "mysql", connTransactor{db}, migrator{s}, Migrations)
	return applied, scrub(err, s.conf)
}

// connTransactor gives Migrate a connection of its own, with
// multi-statement queries, for the length of its run.
type connTransactor struct{ db *sql.DB }

func (t connTransactor) Begin(ctx context.Context) (*sql.Conn, error) { return t.db.Conn(ctx) }

// Commit and Rollback release the migrations' lock (taken by Lock) and
// the connection; each statement has committed already.
func (connTransactor) Commit(ctx context.Context, c *sql.Conn) error {
	_, err := c.ExecContext(ctx, "do release_all_locks()")
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	return err
}

func (t connTransactor) Rollback(ctx context.Context, c *sql.Conn) error {
	return t.Commit(ctx, c)
}

// migrator is the MySQL dialect of the migration runner.
type migrator struct{ s *Store }

// Lock takes the named lock of this database's tables of this prefix
// (named by a hash: MySQL's lock names are at most 64 characters long).
func (m migrator) Lock(ctx context.Context, c *sql.Conn) error {
	var got sql.NullInt64
	err := c.QueryRowContext(ctx, "select get_lock(concat('postbox_migrate.', left(sha2(concat(database(), '.', ?), 256), 40)), ?)",
		m.s.prefix, migrateLockTimeout).Scan(&got)
	if err != nil {
		return err
	}
	if got.Int64 != 1 {
		return fmt.Errorf("another migration has held the lock for %d seconds: is one stuck?", migrateLockTimeout)
	}
	return nil
}

func (m migrator) CreateTable(ctx context.Context, c *sql.Conn) error {
	return m.Exec(ctx, c, migrationsTable)
}

func (m migrator) Applied(ctx context.Context, c *sql.Conn) ([]int, error) {
	return sqlstore.CollectRows[int](c.QueryContext(ctx, m.s.expand("select version from {prefix}postbox_migrations")))
}

// Exec runs a migration's statements and reads every result, so that an
// error of any statement is returned.
func (m migrator) Exec(ctx context.Context, c *sql.Conn, text string) error {
	rows, err := c.QueryContext(ctx, m.s.expand(text))
	if err != nil {
		return err
	}
	defer rows.Close()
	for {
		for rows.Next() {
		}
		if !rows.NextResultSet() {
			return rows.Err()
		}
	}
}

func (m migrator) Record(ctx context.Context, c *sql.Conn, mig Migration) error {
	_, err := c.ExecContext(ctx, m.s.expand("insert into {prefix}postbox_migrations(version, name) values (?, ?)"), mig.Version, mig.Name)
	return err
}

// CheckSchema returns nil when Migrate has applied every migration of this
// code; otherwise its error wraps store.ErrNotMigrated and says what to run.
// Ordered claims need nothing more on MySQL.
func (s *Store) CheckSchema(ctx context.Context, _ store.SchemaParams) error {
	return sqlstore.CheckSchema(ctx, "mysql", s.name, dbReader{s}, s.sql, Migrations)
}

// dbReader reads one row through the store's handle.
type dbReader struct{ s *Store }

func (r dbReader) ReadRow(ctx context.Context, query string, dest ...any) error {
	return r.s.db.QueryRowContext(ctx, query).Scan(dest...)
}
