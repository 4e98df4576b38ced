package sqlite

import (
	"context"
	"database/sql"

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
  version    integer primary key,
  name       text not null,
  applied_at integer not null
             default (cast(round((julianday('now') - 2440587.5) * 86400000) as integer) * 1000)
)`

// Migrate applies the migrations it has not applied yet, in one write
// transaction, and returns the versions it applied. Running it again is a
// no-op. Concurrent runs, in this process or others, are serialised by the
// transaction (BEGIN IMMEDIATE): the later one waits, up to the busy
// timeout, then finds the work done.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	return sqlstore.Migrate(ctx, "sqlite", s.tx, migrator{s}, Migrations)
}

// migrator is the SQLite dialect of the migration runner.
type migrator struct{ s *Store }

// Lock does nothing: the write transaction (BEGIN IMMEDIATE) holds the
// database's write lock already.
func (migrator) Lock(context.Context, *sql.Tx) error { return nil }

func (m migrator) CreateTable(ctx context.Context, tx *sql.Tx) error {
	return m.Exec(ctx, tx, migrationsTable)
}

func (m migrator) Applied(ctx context.Context, tx *sql.Tx) ([]int, error) {
	return sqlstore.CollectRows[int](tx.QueryContext(ctx, m.s.expand("select version from {prefix}postbox_migrations")))
}

func (m migrator) Exec(ctx context.Context, tx *sql.Tx, text string) error {
	_, err := tx.ExecContext(ctx, m.s.expand(text))
	return err
}

func (m migrator) Record(ctx context.Context, tx *sql.Tx, mig Migration) error {
	_, err := tx.ExecContext(ctx, m.s.expand("insert into {prefix}postbox_migrations(version, name) values (?, ?)"), mig.Version, mig.Name)
	return err
}

// CheckSchema returns nil when Migrate has applied every migration of this
// code; otherwise its error wraps store.ErrNotMigrated and says what to run.
// Ordered claims need nothing more on SQLite.
func (s *Store) CheckSchema(ctx context.Context, _ store.SchemaParams) error {
	return sqlstore.CheckSchema(ctx, "sqlite", s.path, dbReader{s.db}, s.sql, Migrations)
}

// dbReader reads one row through the store's handle.
type dbReader struct{ db *sql.DB }

func (r dbReader) ReadRow(ctx context.Context, query string, dest ...any) error {
	return r.db.QueryRowContext(ctx, query).Scan(dest...)
}
