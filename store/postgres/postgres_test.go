package postgres_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/storetest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// Every conformance suite, each test on a store in a fresh schema.
func TestConformance(t *testing.T) {
	storetest.Exercise(t, storetest.Harness[pgx.Tx]{Dialect: "postgres", New: subject})
}

// tableName is a table's name in braces, in the hostile suite's SQL.
var tableName = regexp.MustCompile(`\{[a-z_]+\}`)

// subject is a store in a fresh schema for the suites, migrated for
// ordered claims when p asks (MigrateOrdered), with a business table,
// effects, beside its inbox.
func subject(t *testing.T, p store.SchemaParams) storetest.Subject[pgx.Tx] {
	s := pgtest.Store(t)
	if p.Ordered {
		if err := s.MigrateOrdered(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	effects := s.Table("effects")
	if _, err := s.Pool().Exec(t.Context(), "create table "+effects+" (key text not null)"); err != nil {
		t.Fatal(err)
	}
	return storetest.Subject[pgx.Tx]{
		Store:  s,
		Driver: s.Driver(),
		Exec: func(ctx context.Context, query string, args ...any) error {
			_, err := s.Pool().Exec(ctx, tableName.ReplaceAllStringFunc(query, func(name string) string { return s.Table(strings.Trim(name, "{}")) }), args...)
			return err
		},
		Loosen: func(t *testing.T) { pgtest.DropBounds(t, s) },
		Effect: func(ctx context.Context, tx pgx.Tx, key string) error {
			_, err := tx.Exec(ctx, "insert into "+effects+" (key) values ($1)", key)
			return err
		},
		Effects: func(ctx context.Context, key string) (n int, err error) {
			err = s.Pool().QueryRow(ctx, "select count(*) from "+effects+" where key = $1", key).Scan(&n)
			return n, err
		},
	}
}

// CheckSchema says what to run on a schema that was never migrated.
func TestCheckSchemaBeforeMigrate(t *testing.T) {
	pool := pgtest.Pool(t)
	s, err := postgres.New(pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.CheckSchema(ctx, store.SchemaParams{}); !errors.Is(err, store.ErrNotMigrated) || !strings.Contains(err.Error(), "postbox migrate") {
		t.Fatalf("CheckSchema before Migrate: %v, want ErrNotMigrated naming postbox migrate", err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSchema(ctx, store.SchemaParams{}); err != nil {
		t.Fatalf("CheckSchema after Migrate: %v", err)
	}
	if err := s.CheckSchema(ctx, store.SchemaParams{Ordered: true}); !errors.Is(err, store.ErrOrderedNotReady) {
		t.Fatalf("CheckSchema ordered without MigrateOrdered: %v, want ErrOrderedNotReady", err)
	}
}
