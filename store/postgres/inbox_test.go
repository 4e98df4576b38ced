package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// newStore returns a migrated store in a fresh schema, and the schema.
func newStore(t *testing.T) (*postgres.Store, string) {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s, err := postgres.New(pool, postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, schema
}

// TestInboxArticleSQL: the article's consumer writes inbox rows in plain
// SQL; such a row, left pending by a consumer that died before marking it
// done, is taken over instead of being answered "duplicate".
func TestInboxArticleSQL(t *testing.T) {
	s, schema := newStore(t)
	ctx := context.Background()
	id := postbox.NewID()
	_, err := s.Pool().Exec(ctx, "insert into "+pgx.Identifier{schema, "inbox_events"}.Sanitize()+
		"(id, received_at, handler_status, payload, signature) values ($1, now(), 'pending', $2, $3)",
		id, `{"order_id": 42}`, "sha256=00")
	if err != nil {
		t.Fatalf("the article's insert: %v", err)
	}
	ib := inbox.New(s.Driver())
	ran := 0
	out, err := ib.Process(ctx, &inbox.Event{ID: id, Payload: []byte(`{"order_id": 42}`)}, func(context.Context, pgx.Tx, *inbox.Event) error {
		ran++
		return nil
	})
	if err != nil || out != inbox.Processed || ran != 1 {
		t.Fatalf("process an abandoned article row: %v, %v, handler ran %d times; want processed once", out, err, ran)
	}
	if r, err := ib.Get(ctx, id); err != nil || r.Status != store.StatusDone || r.Attempts != 1 {
		t.Fatalf("row %+v, %v: want done", r, err)
	}
}

// TestInboxSwallowedSQLError: a handler that ignores a failed statement and
// returns nil cannot commit a half-done transaction; the failure is
// reported and recorded, and the retry is processed.
func TestInboxSwallowedSQLError(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	ib := inbox.New(s.Driver())
	ev := &inbox.Event{ID: postbox.NewID()}
	_, err := ib.Process(ctx, ev, func(ctx context.Context, tx pgx.Tx, _ *inbox.Event) error {
		_, _ = tx.Exec(ctx, "select 1/0")
		return nil
	})
	if err == nil {
		t.Fatal("a transaction aborted by the handler committed")
	}
	if r, err := ib.Get(ctx, ev.ID); err != nil || r.Status != store.StatusFailed || r.LastError == "" {
		t.Fatalf("row %+v, %v: want failed with the commit error", r, err)
	}
	out, err := ib.Process(ctx, ev, func(context.Context, pgx.Tx, *inbox.Event) error { return nil })
	if err != nil || out != inbox.Processed {
		t.Fatalf("retry: %v, %v; want processed", out, err)
	}
}

// TestInboxRecordsFailureAfterCancel: the failed attempt is recorded even
// when the caller's context ended with the handler.
func TestInboxRecordsFailureAfterCancel(t *testing.T) {
	s, _ := newStore(t)
	ib := inbox.New(s.Driver())
	ctx, cancel := context.WithCancel(context.Background())
	ev := &inbox.Event{ID: postbox.NewID()}
	_, err := ib.Process(ctx, ev, func(ctx context.Context, _ pgx.Tx, _ *inbox.Event) error {
		cancel()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if r, err := ib.Get(context.Background(), ev.ID); err != nil || r.Status != store.StatusFailed {
		t.Fatalf("row %+v, %v: want failed", r, err)
	}
}

func TestInboxMigrationIsIdempotent(t *testing.T) {
	s, _ := newStore(t)
	if applied, err := s.Migrate(context.Background()); err != nil || len(applied) != 0 {
		t.Fatalf("second migrate applied %v, %v; want nothing", applied, err)
	}
}

// An empty payload (a signed request with no body) is stored as none, like
// a nil one: no JSON value is empty.
func TestInboxEmptyPayload(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	ib := inbox.New(s.Driver())
	ev := &inbox.Event{ID: postbox.NewID(), Payload: []byte{}}
	if out, err := ib.Process(ctx, ev, func(context.Context, pgx.Tx, *inbox.Event) error { return nil }); err != nil || out != inbox.Processed {
		t.Fatalf("process: %v, %v; want processed", out, err)
	}
	if r, err := ib.Get(ctx, ev.ID); err != nil || r.Payload != nil {
		t.Fatalf("row %+v, %v: want no payload", r, err)
	}
}
