package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

func orderEvent(id string) postbox.Event {
	return postbox.Event{AggregateType: "order", AggregateID: id, EventType: "order.created",
		Payload: []byte(`{"order_id": "` + id + `"}`), DedupKey: "order.created:" + id}
}

func count(t *testing.T, s *postgres.Store, query string) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// setSearchPath makes the test schema the default one for plain SQL.
func setSearchPath(t *testing.T, s *postgres.Store, tx pgx.Tx) {
	t.Helper()
	if _, err := tx.Exec(context.Background(), "set local search_path = "+pgx.Identifier{s.Schema()}.Sanitize()); err != nil {
		t.Fatal(err)
	}
}

func TestEnqueueTxCommitsAndRollsBackWithTheBusinessChange(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, "create table "+s.Table("orders")+" (id text primary key)"); err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{true, false} {
		id := uuid.NewString()
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "insert into "+s.Table("orders")+" (id) values ($1)", id); err != nil {
			t.Fatal(err)
		}
		if err := s.EnqueueTx(ctx, tx, orderEvent(id)); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, s, "select count(*) from "+s.Table("outbox_events")); n != 1 {
		t.Fatalf("%d events after one commit and one rollback, want 1", n)
	}
}

func TestEnqueueManyInOneCallAndIDsAreTimeOrdered(t *testing.T) {
	s := pgtest.Store(t)
	events := make([]postbox.Event, 2500) // more than one INSERT chunk
	for i := range events {
		events[i] = postbox.Event{EventType: "tick", Payload: []byte(`{}`)}
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	for i := range events {
		if events[i].ID.Version() != 7 {
			t.Fatalf("event %d got id %s, want a UUIDv7 written back", i, events[i].ID)
		}
	}
	if n := count(t, s, "select count(*) from "+s.Table("outbox_events")); n != len(events) {
		t.Fatalf("%d rows, want %d", n, len(events))
	}
}

func TestDatabaseSQLProducer(t *testing.T) {
	s := pgtest.Store(t)
	db := stdlib.OpenDBFromPool(s.Pool())
	defer db.Close()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := orderEvent("7")
	e.ID = postbox.NewID()
	e.Headers = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	if err := s.DatabaseSQL().EnqueueTx(ctx, tx, e); err != nil {
		t.Fatal(err)
	}
	dup := orderEvent("7")
	if err := s.DatabaseSQL().EnqueueTx(ctx, tx, dup); !errors.Is(err, postbox.ErrDuplicate) {
		t.Fatalf("duplicate dedup key in a database/sql transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("the transaction must stay usable after a duplicate: %v", err)
	}
	rec, err := s.Get(ctx, e.ID)
	if err != nil || rec.Headers["traceparent"] != e.Headers["traceparent"] {
		t.Fatalf("stored %+v, %v", rec, err)
	}
}

func TestDuplicateIDIsErrDuplicate(t *testing.T) {
	s := pgtest.Store(t)
	e := postbox.Event{ID: postbox.NewID(), EventType: "x", Payload: []byte(`{}`)}
	if err := s.Enqueue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(context.Background(), e); !errors.Is(err, postbox.ErrDuplicate) {
		t.Fatalf("same id twice: %v", err)
	}
}

// The article's plain-SQL producer, unchanged: every postbox column has a
// default, and the database picks a UUIDv7 id.
func TestArticleInsertWorksUnchanged(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		setSearchPath(t, s, tx)
		_, err := tx.Exec(ctx, `insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key)
			values ('order', '42', 'order.created', '{"event_id": "e-42", "order_id": 42}', 'order.created:' || 42)`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.List(ctx, store.ListParams{Status: store.StatusPending, Limit: 10})
	if err != nil || len(recs) != 1 {
		t.Fatalf("list: %v %v", recs, err)
	}
	if v := recs[0].ID.Version(); v != 7 {
		t.Fatalf("database-made id %s has version %d, want 7", recs[0].ID, v)
	}
	if recs[0].DedupKey != "order.created:42" || recs[0].Attempts != 0 {
		t.Fatalf("record %+v", recs[0])
	}
}

func TestMigrateTwiceAndConcurrently(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	var wg sync.WaitGroup
	applied := make([][]int, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() {
			s, err := postgres.New(pool, postgres.Config{Schema: schema})
			if err != nil {
				errs[i] = err
				return
			}
			applied[i], errs[i] = s.Migrate(context.Background())
		})
	}
	wg.Wait()
	total := 0
	for i := range 4 {
		if errs[i] != nil {
			t.Fatalf("concurrent migrate %d: %v", i, errs[i])
		}
		total += len(applied[i])
	}
	all, _ := postgres.Migrations()
	if total != len(all) {
		t.Fatalf("four concurrent runs applied %d migrations in all, want %d (each once)", total, len(all))
	}
	s, _ := postgres.New(pool, postgres.Config{Schema: schema})
	again, err := s.Migrate(context.Background())
	if err != nil || len(again) != 0 {
		t.Fatalf("second run applied %v, %v; want nothing", again, err)
	}
}

func TestConfigRefusesUnsafeSchemaNames(t *testing.T) {
	pool := pgtest.Pool(t)
	for _, bad := range []string{"a;drop table x", "a-b", "1abc", strings.Repeat("a", 60)} {
		if _, err := postgres.New(pool, postgres.Config{Schema: bad}); err == nil {
			t.Errorf("schema %q accepted", bad)
		}
	}
}

// explain returns the plan of query with args, its lines joined.
func explain(t *testing.T, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, query string, args ...any) string {
	t.Helper()
	rows, err := db.Query(context.Background(), "explain "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// The claim must stay an index scan over pending rows however many
// delivered rows the table holds.
func TestClaimUsesThePendingIndex(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	tbl := s.Table("outbox_events")
	_, err := s.Pool().Exec(ctx, `insert into `+tbl+` (event_type, payload, status, processed_at)
		select 'tick', '{}', 'done', now() from generate_series(1, 50000)`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `insert into `+tbl+` (event_type, payload) select 'tick', '{}' from generate_series(1, 100)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "analyze "+tbl); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		query string
		args  []any
		// start is what the index scan must start at, when it is not the head.
		start string
	}{
		{"claim", []any{"x", 100, 1000, "-infinity", 0}, ""},
		// A claim after a position starts the index scan there.
		{"claim", []any{"x", 100, 1000, time.Now().Add(-time.Minute), 20}, "ROW(available_at, seq) > ROW("},
		{"claim_bounded", []any{"x", 100, 1000, "-infinity", 0, 1 << 20}, ""},
		{"claim_ordered", []any{"x", 100, 1000, "", "", 0, 16}, ""},
	}
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// Generic plans, as prepared statements get after their fifth run.
	if _, err := conn.Exec(ctx, "set plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "reset plan_cache_mode")
	for _, c := range cases {
		plan := explain(t, conn, s.Query(c.query), c.args...)
		if !strings.Contains(plan, "outbox_events_pending_idx") || strings.Contains(plan, "Seq Scan on outbox_events") {
			t.Fatalf("%s plan does not use the pending index:\n%s", c.query, plan)
		}
		if c.start != "" && !strings.Contains(plan, "Index Cond: ((available_at <= now()) AND ("+c.start) {
			t.Fatalf("%s plan does not start the index scan at the position (%s):\n%s", c.query, c.start, plan)
		}
	}
}

func TestInvalidEventInALaterChunkWritesNothing(t *testing.T) {
	s := pgtest.Store(t)
	events := make([]postbox.Event, 1500)
	for i := range events {
		events[i] = postbox.Event{EventType: "tick", Payload: []byte(`{}`)}
	}
	events[1200].Payload = []byte(`{not json`)
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnqueueTx(ctx, tx, events...); err == nil {
		t.Fatal("a malformed payload was accepted")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the caller's transaction must stay usable after a refused event: %v", err)
	}
	if n := count(t, s, "select count(*) from "+s.Table("outbox_events")); n != 0 {
		t.Fatalf("%d events written beside a malformed one", n)
	}
}
