package postgres_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/storetest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// The suite claims in ordered mode too, which needs MigrateOrdered.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Outbox { return pgtest.OrderedStore(t) })
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

func TestEndpointsConformance(t *testing.T) {
	storetest.RunEndpoints(t, func(t *testing.T) store.Endpoints { return pgtest.Store(t) })
}

// tableName is a table's name in braces, in the hostile suite's SQL.
var tableName = regexp.MustCompile(`\{[a-z_]+\}`)

// The hostile rows' suite: rows a plain-SQL producer wrote with values no
// event has fail alone (postboxtest/storetest RunHostile).
func TestHostileRows(t *testing.T) {
	storetest.RunHostile(t, func(t *testing.T) storetest.Raw {
		s := pgtest.OrderedStore(t)
		return storetest.Raw{
			Outbox:  s,
			Dialect: "postgres",
			Exec: func(ctx context.Context, query string, args ...any) error {
				_, err := s.Pool().Exec(ctx, tableName.ReplaceAllStringFunc(query, func(name string) string { return s.Table(strings.Trim(name, "{}")) }), args...)
				return err
			},
			Loosen: func(t *testing.T) {
				_, err := s.Pool().Exec(t.Context(), "alter table "+s.Table("outbox_events")+
					" drop constraint outbox_events_retries_range, drop constraint outbox_events_times_range")
				if err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

func TestLaneConformance(t *testing.T) {
	storetest.RunLane(t, func(t *testing.T) store.Endpoints { return pgtest.Store(t) })
}
