package mysql_test

import (
	"context"
	"database/sql"
	"regexp"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/postboxtest/mysqltest"
	"github.com/postbox-go/postbox/postboxtest/storetest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/mysql"
)

// open opens a store on a fresh database, dropped when t ends.
func open(t testing.TB, cfg mysql.Config) *mysql.Store {
	t.Helper()
	s, err := mysql.Open(context.Background(), mysqltest.Database(t), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newStore returns a fresh, migrated store.
func newStore(t testing.TB, cfg mysql.Config) *mysql.Store {
	t.Helper()
	s := open(t, cfg)
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}

// Every conformance suite, each test on a database of its own.
func TestConformance(t *testing.T) {
	storetest.Exercise(t, storetest.Harness[*sql.Tx]{Dialect: "mysql", New: subject(mysql.Config{})})
}

// Every conformance suite again, on tables with a prefix.
func TestConformanceWithTablePrefix(t *testing.T) {
	storetest.Exercise(t, storetest.Harness[*sql.Tx]{Dialect: "mysql", New: subject(mysql.Config{TablePrefix: "pb_"})})
}

// tableName is a table's name in braces, in the hostile suite's SQL.
var tableName = regexp.MustCompile(`\{[a-z_]+\}`)

// subject returns fresh stores for the suites, with a business table,
// effects, beside their inbox. Every MySQL store claims in order as it
// is: the schema parameters ask for nothing more.
func subject(cfg mysql.Config) func(t *testing.T, _ store.SchemaParams) storetest.Subject[*sql.Tx] {
	return func(t *testing.T, _ store.SchemaParams) storetest.Subject[*sql.Tx] {
		s := newStore(t, cfg)
		effects := s.Table("effects")
		if _, err := s.DB().Exec("create table " + effects + " (k varchar(255) not null)"); err != nil {
			t.Fatal(err)
		}
		return storetest.Subject[*sql.Tx]{
			Store:  s,
			Driver: s.Driver(),
			Exec: func(ctx context.Context, query string, args ...any) error {
				_, err := s.DB().ExecContext(ctx, tableName.ReplaceAllStringFunc(query, func(name string) string { return s.Table(strings.Trim(name, "{}")) }), args...)
				return err
			},
			Loosen: func(t *testing.T) {
				if _, err := s.DB().ExecContext(t.Context(), "alter table "+s.Table("outbox_events")+" drop constraint "+s.Table("outbox_events_bounds")); err != nil {
					t.Fatal(err)
				}
			},
			Effect: func(ctx context.Context, tx *sql.Tx, key string) error {
				_, err := tx.ExecContext(ctx, "insert into "+effects+" (k) values (?)", key)
				return err
			},
			Effects: func(ctx context.Context, key string) (n int, err error) {
				err = s.DB().QueryRowContext(ctx, "select count(*) from "+effects+" where k = ?", key).Scan(&n)
				return n, err
			},
		}
	}
}

// Migrate applies every migration once; a second run applies none.
func TestMigrateIdempotent(t *testing.T) {
	s := open(t, mysql.Config{})
	first, err := s.Migrate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	all, err := mysql.Migrations()
	if err != nil || len(first) != len(all) {
		t.Fatalf("applied %v of %d migrations, %v", first, len(all), err)
	}
	if again, err := s.Migrate(t.Context()); err != nil || len(again) != 0 {
		t.Fatalf("second run applied %v, %v; want nothing", again, err)
	}
	if err := s.CheckSchema(t.Context(), store.SchemaParams{Ordered: true}); err != nil {
		t.Fatal(err)
	}
}
