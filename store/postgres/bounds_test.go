package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// Migration 0008 fails the rows that break its bounds before it adds its
// checks, so that such rows (written under 0007) neither make it fail nor
// stay in the queue: each ends failed with a last_error naming its
// columns; healthy rows are left as they were, delivered ones delivered.
func TestMigration0008FailsRowsOutOfBounds(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, strings.ReplaceAll(sql, "{schema}", s.Schema())); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// Back to the schema of migration 0007.
	exec(`alter table {schema}.outbox_events drop constraint outbox_events_retries_range, drop constraint outbox_events_times_range;
drop trigger outbox_events_held_key on {schema}.outbox_events;
drop function {schema}.postbox_refuse_held_key();
drop table {schema}.outbox_held_keys;
delete from {schema}.postbox_migrations where version = 8`)

	healthy := postbox.NewID()
	exec(`insert into {schema}.outbox_events (id, event_type, payload) values ('` + healthy.String() + `', 'order.created', '{"n": 1}')`)
	rows := map[string]string{
		"created_at":   "'infinity'",
		"available_at": "'-infinity'",
		"retries":      "2147483647",
	}
	bad := map[uuid.UUID]string{}
	for column, value := range rows {
		id := postbox.NewID()
		bad[id] = column
		exec(`insert into {schema}.outbox_events (id, event_type, payload, ` + column + `) values ('` + id.String() + `', 'order.bad', '{}', ` + value + `)`)
	}
	done := postbox.NewID()
	exec(`insert into {schema}.outbox_events (id, event_type, payload, status, processed_at) values ('` + done.String() + `', 'order.done', '{}', 'done', 'infinity')`)

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
	if _, err := s.Pool().Exec(ctx, "insert into "+s.Table("outbox_events")+" (event_type, payload, retries) values ('x', '{}', -1)"); err == nil {
		t.Fatal("insert of retries -1 after the migration: accepted, want refused by its check")
	}
}

// Transact refuses a dedup key held after its event's delivery, as one in
// the outbox: nothing commits, and the DuplicateError names the key.
func TestTransactRefusesHeldDedupKey(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	first := postbox.Event{EventType: "order.paid", Payload: []byte(`{}`), DedupKey: "order-7-paid"}
	if err := s.Enqueue(ctx, first); err != nil {
		t.Fatal(err)
	}
	got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "relay", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	if err := s.Driver().Settle(ctx, store.SettleParams{Owner: "relay", Done: []uuid.UUID{got[0].ID}, Ended: []int64{got[0].Lease}, DedupWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	err = s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
		return out.Add(postbox.Event{EventType: "order.paid", Payload: []byte(`{}`), DedupKey: "order-7-paid"})
	})
	var dup *postbox.DuplicateError
	if !errors.As(err, &dup) || len(dup.Keys) != 1 || dup.Keys[0] != "order-7-paid" {
		t.Fatalf("Transact with a held key: %v, want a DuplicateError naming it", err)
	}
	if st, err := s.Stats(ctx); err != nil || st.Pending != 0 {
		t.Fatalf("stats %+v, %v: want nothing written", st, err)
	}
}

// A producer that writes a dedup key while the settle delivering the
// key's event is in progress is refused once that settle commits: its
// insert waits on the unique index for the settle, and the check of held
// keys runs after it.
func TestHeldKeyRefusedWhileItsSettleCommits(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	first := postbox.Event{ID: postbox.NewID(), EventType: "order.paid", Payload: []byte(`{}`), DedupKey: "order-9-paid"}
	if err := s.Enqueue(ctx, first); err != nil {
		t.Fatal(err)
	}
	// The settle, by hand, held open: the row deleted, its key held.
	settle, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer settle.Rollback(ctx)
	if _, err := settle.Exec(ctx, "delete from "+s.Table("outbox_events")+" where id = $1", first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := settle.Exec(ctx, "insert into "+s.Table("outbox_held_keys")+" values ('order-9-paid', now() + interval '1 hour')"); err != nil {
		t.Fatal(err)
	}
	inserted := make(chan error, 1)
	go func() {
		_, err := s.Pool().Exec(ctx, "insert into "+s.Table("outbox_events")+" (event_type, payload, dedup_key) values ('order.paid', '{}', 'order-9-paid')")
		inserted <- err
	}()
	waitForLockWait(t, s)
	if err := settle.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-inserted; err == nil || !strings.Contains(err.Error(), "outbox_events_dedup_key_uq") {
		t.Fatalf("insert of the key while its settle committed: %v, want refused", err)
	}
}

// A producer's transaction that skipped a taken dedup key (EnqueueTx) and
// stays open holds no lock that a relay's settle of the key's event would
// wait for.
func TestSkippedKeyDoesNotHoldTheSettle(t *testing.T) {
	s := pgtest.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := postbox.Event{EventType: "order.paid", Payload: []byte(`{}`), DedupKey: "order-8-paid"}
	if err := s.Enqueue(ctx, first); err != nil {
		t.Fatal(err)
	}
	got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "relay", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	producer, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Rollback(ctx)
	again := postbox.Event{EventType: "order.paid", Payload: []byte(`{}`), DedupKey: "order-8-paid"}
	if err := s.EnqueueTx(ctx, producer, again); !errors.Is(err, postbox.ErrDuplicate) {
		t.Fatalf("EnqueueTx of a taken key: %v, want ErrDuplicate", err)
	}
	if err := s.Driver().Settle(ctx, store.SettleParams{Owner: "relay", Done: []uuid.UUID{got[0].ID}, Ended: []int64{got[0].Lease}, DedupWindow: time.Hour}); err != nil {
		t.Fatalf("settle while the producer's transaction is open: %v", err)
	}
}

// waitForLockWait returns once a backend of the test's schema's database
// waits for a lock.
func waitForLockWait(t *testing.T, s *postgres.Store) {
	t.Helper()
	for range 500 {
		var waiting bool
		err := s.Pool().QueryRow(context.Background(),
			"select exists (select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%outbox_events%order-9-paid%')").Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the insert never waited for the settle")
}
