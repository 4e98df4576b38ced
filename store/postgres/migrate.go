package postgres

import (
	"context"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// Migration is one numbered schema change.
type Migration = store.Migration

// Migrations returns the embedded migrations in order, placeholders unfilled.
func Migrations() ([]Migration, error) {
	return store.ReadMigrations(migrationFiles, "migrations")
}

// Migrate creates the schema and applies the migrations it has not applied
// yet, in one transaction. Running it again is a no-op; concurrent runs
// serialise on an advisory lock. It returns the versions it applied.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	return sqlstore.Migrate(ctx, "postgres", s.tx, migrator{s}, Migrations)
}

// migrationsTableSQL creates the schema and its migrations table.
const migrationsTableSQL = `create schema if not exists {schema};
create table if not exists {schema}.postbox_migrations (
  version    integer primary key,
  name       text not null,
  applied_at timestamptz not null default now())`

// migrator is the PostgreSQL dialect of the migration runner.
type migrator struct{ s *Store }

// Lock takes the schema's migration lock until the transaction ends.
func (m migrator) Lock(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, "select pg_advisory_xact_lock($1)", m.s.lockKey("migrate"))
	return err
}

func (m migrator) CreateTable(ctx context.Context, tx pgx.Tx) error {
	return m.Exec(ctx, tx, migrationsTableSQL)
}

func (m migrator) Applied(ctx context.Context, tx pgx.Tx) ([]int, error) {
	rows, err := tx.Query(ctx, m.s.expand("select version from {schema}.postbox_migrations"))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

func (m migrator) Exec(ctx context.Context, tx pgx.Tx, text string) error {
	_, err := tx.Exec(ctx, m.s.expand(text))
	return err
}

func (m migrator) Record(ctx context.Context, tx pgx.Tx, mig Migration) error {
	_, err := tx.Exec(ctx, m.s.expand("insert into {schema}.postbox_migrations(version, name) values ($1, $2)"), mig.Version, mig.Name)
	return err
}

// CheckSchema returns nil when Migrate has applied every migration of this
// code, and, with p.Ordered, MigrateOrdered has built its index (the check
// of Driver.OrderedReady). Otherwise its error wraps store.ErrNotMigrated
// or store.ErrOrderedNotReady and says what to run.
func (s *Store) CheckSchema(ctx context.Context, p store.SchemaParams) error {
	if err := sqlstore.CheckSchema(ctx, "postgres", "schema "+s.schema, poolReader{s.pool}, s.sql, Migrations); err != nil {
		return err
	}
	if p.Ordered {
		return s.orderedIndexReady(ctx)
	}
	return nil
}

// lockKey is the advisory lock that serialises one kind of work (migrate,
// claim) on one schema.
func (s *Store) lockKey(work string) int64 {
	h := fnv.New64a()
	h.Write([]byte("postbox " + work + " " + s.schema))
	return int64(h.Sum64())
}

// poolReader reads one row through the store's pool.
type poolReader struct{ pool *pgxpool.Pool }

func (r poolReader) ReadRow(ctx context.Context, query string, dest ...any) error {
	return r.pool.QueryRow(ctx, query).Scan(dest...)
}
