package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change. The numbers and names are those
// of the PostgreSQL store's migrations for the same changes.
type Migration struct {
	// Version is the migration's number, 1 for 0001_outbox.sql.
	Version int
	// Name is the file name's rest, "outbox" for 0001_outbox.sql.
	Name string
	// SQL is the file's text, with "{prefix}" where Config.TablePrefix goes.
	SQL string
}

// Migrations returns the embedded migrations in order, placeholders unfilled.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		base := strings.TrimSuffix(e.Name(), ".sql")
		num, name, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("sqlite: migration file %q is not named NNNN_name.sql", e.Name())
		}
		body, err := fs.ReadFile(migrationFiles, path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: version, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
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
