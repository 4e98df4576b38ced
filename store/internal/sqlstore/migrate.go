package sqlstore

import (
	"context"
	"fmt"

	"github.com/postbox-go/postbox/store"
)

// MigrationDialect is how one store runs its migrations, inside the one
// transaction T of a migration run.
type MigrationDialect[T any] interface {
	// Lock makes concurrent runs wait until this one's transaction ends
	// (PostgreSQL: an advisory lock; SQLite: nothing, BEGIN IMMEDIATE
	// already did).
	Lock(ctx context.Context, tx T) error
	// CreateTable creates the migrations table, and what holds it, if
	// missing.
	CreateTable(ctx context.Context, tx T) error
	// Applied returns the versions recorded in the migrations table.
	Applied(ctx context.Context, tx T) ([]int, error)
	// Exec runs the text of a migration, its placeholders filled.
	Exec(ctx context.Context, tx T, sql string) error
	// Record writes m into the migrations table.
	Record(ctx context.Context, tx T, m store.Migration) error
}

// Migrations returns a store's migrations in version order (its embedded
// files, read by store.ReadMigrations).
type Migrations func() ([]store.Migration, error)

// Migrate applies, in one transaction of tr, those of the store's
// migrations that the migrations table does not record yet, in version
// order, and returns their versions. Running it again is a no-op.
// storeName prefixes its errors.
func Migrate[T any](ctx context.Context, storeName string, tr Transactor[T], d MigrationDialect[T], migrations Migrations) ([]int, error) {
	all, err := migrations()
	if err != nil {
		return nil, err
	}
	var applied []int
	err = InTx(ctx, tr, func(tx T) error {
		if err := d.Lock(ctx, tx); err != nil {
			return fmt.Errorf("%s: migration lock: %w", storeName, err)
		}
		if err := d.CreateTable(ctx, tx); err != nil {
			return fmt.Errorf("%s: migration table: %w", storeName, err)
		}
		versions, err := d.Applied(ctx, tx)
		if err != nil {
			return fmt.Errorf("%s: applied migrations: %w", storeName, err)
		}
		done := make(map[int]bool, len(versions))
		for _, v := range versions {
			done[v] = true
		}
		for _, m := range all {
			if done[m.Version] {
				continue
			}
			err := d.Exec(ctx, tx, m.SQL)
			if err == nil {
				err = d.Record(ctx, tx, m)
			}
			if err != nil {
				return fmt.Errorf("%s: migration %04d_%s: %w", storeName, m.Version, m.Name, err)
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
