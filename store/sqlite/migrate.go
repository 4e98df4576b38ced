package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/postbox-go/postbox/store"
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
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	var applied []int
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.expand(migrationsTable)); err != nil {
			return fmt.Errorf("sqlite: migration table: %w", err)
		}
		done, err := appliedVersions(ctx, tx, s.expand("select version from {prefix}postbox_migrations"))
		if err != nil {
			return fmt.Errorf("sqlite: applied migrations: %w", err)
		}
		for _, m := range all {
			if done[m.Version] {
				continue
			}
			if _, err := tx.ExecContext(ctx, s.expand(m.SQL)); err != nil {
				return fmt.Errorf("sqlite: migration %04d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, s.expand("insert into {prefix}postbox_migrations(version, name) values (?, ?)"), m.Version, m.Name); err != nil {
				return fmt.Errorf("sqlite: migration %04d_%s: %w", m.Version, m.Name, err)
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

func appliedVersions(ctx context.Context, tx *sql.Tx, query string) (map[int]bool, error) {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	done := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		done[v] = true
	}
	return done, rows.Err()
}

// CheckSchema returns nil when Migrate has applied every migration of this
// code; otherwise its error wraps store.ErrNotMigrated and says what to run.
// Ordered claims need nothing more on SQLite.
func (s *Store) CheckSchema(ctx context.Context, _ store.SchemaParams) error {
	all, err := Migrations()
	if err != nil {
		return err
	}
	var exists bool
	var version int
	err = s.db.QueryRowContext(ctx, s.sql.Get("migrations_table_exists")).Scan(&exists)
	if err == nil && exists {
		err = s.db.QueryRowContext(ctx, s.sql.Get("migrated_version")).Scan(&version)
	}
	if err != nil {
		return fmt.Errorf("sqlite: check the schema: %w", err)
	}
	return store.CheckApplied(s.path, exists, version, all)
}
