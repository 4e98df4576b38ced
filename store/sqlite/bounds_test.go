package sqlite_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// Migration 0008 fails the rows that break its bounds before it adds the
// trigger that refuses them at insert: each ends failed with a last_error
// naming its columns; healthy rows are left as they were, delivered ones
// delivered.
func TestMigration0008FailsRowsOutOfBounds(t *testing.T) {
	s := newStore(t, sqlite.Config{TablePrefix: "pb_"})
	ctx := context.Background()
	exec := func(query string) {
		t.Helper()
		if _, err := s.DB().ExecContext(ctx, query); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	// Back to the schema of migration 0007.
	exec(`drop trigger pb_outbox_events_bounds; drop trigger pb_outbox_events_held_key; drop table pb_outbox_held_keys;
delete from pb_postbox_migrations where version = 8`)

	healthy := postbox.NewID()
	exec(`insert into pb_outbox_events (id, event_type, payload) values ('` + healthy.String() + `', 'order.created', '{"n": 1}')`)
	bad := map[uuid.UUID]string{}
	for column, value := range map[string]string{
		"created_at":   "9223372036854775807",
		"available_at": "-9223372036854775808",
		"attempts":     "'many'",
		"retries":      "-1",
	} {
		id := postbox.NewID()
		bad[id] = column
		exec(`insert into pb_outbox_events (id, event_type, payload, ` + column + `) values ('` + id.String() + `', 'order.bad', '{}', ` + value + `)`)
	}
	done := postbox.NewID()
	exec(`insert into pb_outbox_events (id, event_type, payload, status, processed_at) values ('` + done.String() + `', 'order.done', '{}', 'done', 9223372036854775807)`)

	applied, err := s.Migrate(ctx)
	if err != nil || len(applied) != 1 || applied[0] != 8 {
		t.Fatalf("migrate: %v, %v; want [8]", applied, err)
	}
	for id, column := range bad {
		r, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != store.StatusFailed || !strings.HasPrefix(r.LastError, "failed by migration 0008: "+column+": ") {
			t.Errorf("row with a bad %s: %q, %q; want failed naming it", column, r.Status, r.LastError)
		}
	}
	if r, err := s.Get(ctx, done); err != nil || r.Status != store.StatusDone || r.ProcessedAt.IsZero() {
		t.Errorf("delivered row: %+v, %v; want still done, processed_at in bounds", r, err)
	}
	got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "relay", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != healthy || got[0].Invalid != "" {
		t.Fatalf("claim after the migration: %v, %v; want the healthy event alone", got, err)
	}
	if _, err := s.DB().ExecContext(ctx, "insert into pb_outbox_events (event_type, payload, retries) values ('x', '{}', -1)"); err == nil {
		t.Fatal("insert of retries -1 after the migration: accepted, want refused by its trigger")
	}
}
