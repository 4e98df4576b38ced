package postgres

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/store"
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
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	var applied []int
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock($1)", s.lockKey("migrate")); err != nil {
			return fmt.Errorf("postgres: migration lock: %w", err)
		}
		setup := s.expand(`create schema if not exists {schema};
create table if not exists {schema}.postbox_migrations (
  version    integer primary key,
  name       text not null,
  applied_at timestamptz not null default now())`)
		if _, err := tx.Exec(ctx, setup); err != nil {
			return fmt.Errorf("postgres: migration table: %w", err)
		}
		done := map[int]bool{}
		rows, err := tx.Query(ctx, s.expand("select version from {schema}.postbox_migrations"))
		if err != nil {
			return err
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return err
		}
		for _, v := range versions {
			done[v] = true
		}
		for _, m := range all {
			if done[m.Version] {
				continue
			}
			if _, err := tx.Exec(ctx, s.expand(m.SQL)); err != nil {
				return fmt.Errorf("postgres: migration %04d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, s.expand("insert into {schema}.postbox_migrations(version, name) values ($1, $2)"), m.Version, m.Name); err != nil {
				return err
			}
			applied = append(applied, m.Version)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// CheckSchema returns nil when Migrate has applied every migration of this
// code, and, with p.Ordered, MigrateOrdered has built its index (see
// OrderedReady). Otherwise its error wraps store.ErrNotMigrated or
// store.ErrOrderedNotReady and says what to run.
func (s *Store) CheckSchema(ctx context.Context, p store.SchemaParams) error {
	all, err := Migrations()
	if err != nil {
		return err
	}
	var exists bool
	var version int
	err = s.pool.QueryRow(ctx, s.sql.Get("migrations_table_exists")).Scan(&exists)
	if err == nil && exists {
		err = s.pool.QueryRow(ctx, s.sql.Get("migrated_version")).Scan(&version)
	}
	if err != nil {
		return fmt.Errorf("postgres: check the schema: %w", err)
	}
	if err := store.CheckApplied("schema "+s.schema, exists, version, all); err != nil {
		return err
	}
	if p.Ordered {
		return s.OrderedReady(ctx)
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
