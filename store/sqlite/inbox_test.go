package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// TestInboxArticleSQL: the article's consumer writes inbox rows in plain
// SQL; such a row, left pending by a consumer that died before marking it
// done, is taken over instead of being answered "duplicate".
func TestInboxArticleSQL(t *testing.T) {
	s := newStore(t, sqlite.Config{})
	ctx := t.Context()
	id := postbox.NewID()
	_, err := s.DB().ExecContext(ctx, "insert into inbox_events(id, handler_status, payload, signature) values (?, 'pending', ?, ?)",
		id.String(), `{"order_id": 42}`, "sha256=00")
	if err != nil {
		t.Fatalf("the article's insert: %v", err)
	}
	ib := inbox.New(s.Driver())
	ran := 0
	out, err := ib.Process(ctx, &inbox.Event{ID: id, Payload: []byte(`{"order_id": 42}`)}, func(context.Context, *sql.Tx, *inbox.Event) error {
		ran++
		return nil
	})
	if err != nil || out != inbox.Processed || ran != 1 {
		t.Fatalf("process an abandoned article row: %v, %v, handler ran %d times; want processed once", out, err, ran)
	}
	r, err := ib.Get(ctx, id)
	if err != nil || r.Status != store.StatusDone || r.Attempts != 1 || r.ReceivedAt.IsZero() {
		t.Fatalf("row %+v, %v: want done", r, err)
	}
}

// TestInboxCommitFailure: a handler whose transaction cannot commit (here a
// deferred foreign key it leaves unsatisfied) leaves nothing behind; the
// failure is reported and recorded, the connection is clean, and the retry
// is processed.
func TestInboxCommitFailure(t *testing.T) {
	s := newStore(t, sqlite.Config{MaxOpenConns: 1}) // the retry reuses the failed transaction's connection
	ctx := t.Context()
	_, err := s.DB().ExecContext(ctx, `create table parents (id integer primary key);
create table children (parent_id integer references parents (id) deferrable initially deferred)`)
	if err != nil {
		t.Fatal(err)
	}
	ib := inbox.New(s.Driver())
	ev := &inbox.Event{ID: postbox.NewID(), Payload: []byte(`{"parent": 1}`)}
	_, err = ib.Process(ctx, ev, func(ctx context.Context, tx *sql.Tx, _ *inbox.Event) error {
		_, err := tx.ExecContext(ctx, "insert into children (parent_id) values (1)")
		return err // nil: the violation shows at commit
	})
	if err == nil {
		t.Fatal("a transaction violating a deferred foreign key committed")
	}
	r, err := ib.Get(ctx, ev.ID)
	if err != nil || r.Status != store.StatusFailed || r.Attempts != 1 || r.LastError == "" {
		t.Fatalf("row %+v, %v: want failed with the commit error", r, err)
	}
	if n := countRows(t, s.DB(), "select count(*) from children"); n != 0 {
		t.Fatalf("%d children after the failed commit", n)
	}
	out, err := ib.Process(ctx, ev, func(ctx context.Context, tx *sql.Tx, _ *inbox.Event) error {
		if _, err := tx.ExecContext(ctx, "insert into parents (id) values (1)"); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "insert into children (parent_id) values (1)")
		return err
	})
	if err != nil || out != inbox.Processed {
		t.Fatalf("retry: %v, %v; want processed", out, err)
	}
	if r, err := ib.Get(ctx, ev.ID); err != nil || r.Status != store.StatusDone || r.Attempts != 2 || r.LastError != "" {
		t.Fatalf("row %+v, %v: want done after 2 attempts", r, err)
	}
}

// TestInboxRecordsFailureAfterCancel: the failed attempt is recorded even
// when the caller's context ended with the handler.
func TestInboxRecordsFailureAfterCancel(t *testing.T) {
	s := newStore(t, sqlite.Config{})
	ib := inbox.New(s.Driver())
	ctx, cancel := context.WithCancel(t.Context())
	ev := &inbox.Event{ID: postbox.NewID()}
	_, err := ib.Process(ctx, ev, func(ctx context.Context, _ *sql.Tx, _ *inbox.Event) error {
		cancel()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if r, err := ib.Get(t.Context(), ev.ID); err != nil || r.Status != store.StatusFailed || r.Attempts != 1 {
		t.Fatalf("row %+v, %v: want failed", r, err)
	}
}

// TestInboxAcrossHandles: stores opened separately on one file behave like
// processes, sharing only SQLite's lock. Deliveries of one event through
// both at once still apply it once.
func TestInboxAcrossHandles(t *testing.T) {
	s1, path := open(t, sqlite.Config{})
	if _, err := s1.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.DB().Exec("create table effects (key text not null)"); err != nil {
		t.Fatal(err)
	}
	s2, err := sqlite.Open(t.Context(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()

	ev := &inbox.Event{ID: postbox.NewID()}
	var runs atomic.Int32
	var mu sync.Mutex
	outcomes := map[inbox.Outcome]int{}
	var wg sync.WaitGroup
	for i := range 10 {
		ib := inbox.New([]*sqlite.Store{s1, s2}[i%2].Driver())
		wg.Go(func() {
			out, err := ib.Process(t.Context(), ev, func(ctx context.Context, tx *sql.Tx, e *inbox.Event) error {
				runs.Add(1)
				_, err := tx.ExecContext(ctx, "insert into effects (key) values (?)", e.ID.String())
				return err
			})
			if err != nil {
				t.Errorf("process: %v", err)
				return
			}
			mu.Lock()
			outcomes[out]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if outcomes[inbox.Processed] != 1 || outcomes[inbox.Duplicate] != 9 || runs.Load() != 1 {
		t.Fatalf("outcomes %v, handler ran %d times; want processed once, 9 duplicates", outcomes, runs.Load())
	}
	if n := countRows(t, s1.DB(), "select count(*) from effects"); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
}

// TestInboxHandlerEnqueues: a consumer that is also a producer writes its
// own event in the inbox's transaction (EnqueueTx): the event commits with
// the processed row and wakes the relay, or goes away with a failed run.
func TestInboxHandlerEnqueues(t *testing.T) {
	s := newStore(t, sqlite.Config{})
	ctx := t.Context()
	woke := listen(t, s)
	ib := inbox.New(s.Driver())
	ev := &inbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: "42", EventType: "order.paid"}
	forward := func(fail error) inbox.ProcessFunc[*sql.Tx] {
		return func(ctx context.Context, tx *sql.Tx, e *inbox.Event) error {
			err := s.EnqueueTx(ctx, tx, postbox.Event{AggregateType: "shipment", AggregateID: e.AggregateID,
				EventType: "shipment.requested", Payload: []byte(`{"order_id": 42}`), DedupKey: "shipment.requested:" + e.ID.String()})
			if err != nil {
				return err
			}
			return fail
		}
	}

	boom := errors.New("boom")
	if _, err := ib.Process(ctx, ev, forward(boom)); !errors.Is(err, boom) {
		t.Fatalf("failing handler: %v, want %v", err, boom)
	}
	noWake(t, woke, "a rolled-back handler that enqueued")
	if n := countRows(t, s.DB(), "select count(*) from outbox_events"); n != 0 {
		t.Fatalf("%d outbox events after a failed handler", n)
	}

	if out, err := ib.Process(ctx, ev, forward(nil)); err != nil || out != inbox.Processed {
		t.Fatalf("retry: %v, %v; want processed", out, err)
	}
	waitWake(t, woke, "a committed handler that enqueued")
	if n := countRows(t, s.DB(), "select count(*) from outbox_events where event_type = 'shipment.requested'"); n != 1 {
		t.Fatalf("%d outbox events, want 1", n)
	}
}

// TestInboxDeleteProcessedLimit: the store refuses a negative limit (SQLite
// would read it as none) and deletes nothing for zero.
func TestInboxDeleteProcessedLimit(t *testing.T) {
	s := newStore(t, sqlite.Config{})
	ctx := t.Context()
	if _, err := inbox.New(s.Driver()).Process(ctx, &inbox.Event{ID: postbox.NewID()},
		func(context.Context, *sql.Tx, *inbox.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if _, err := s.Driver().InboxDeleteProcessedBefore(ctx, later, -1); err == nil {
		t.Fatal("negative limit accepted")
	}
	if n, err := s.Driver().InboxDeleteProcessedBefore(ctx, later, 0); err != nil || n != 0 {
		t.Fatalf("limit 0: %d, %v; want 0, nil", n, err)
	}
	if n, err := s.Driver().InboxDeleteProcessedBefore(ctx, later, 10); err != nil || n != 1 {
		t.Fatalf("limit 10: %d, %v; want 1, nil", n, err)
	}
}

// TestInboxEmptyPayload: an empty payload (a signed request with no body)
// is stored as none, like a nil one: no JSON value is empty.
func TestInboxEmptyPayload(t *testing.T) {
	s := newStore(t, sqlite.Config{})
	ctx := t.Context()
	ib := inbox.New(s.Driver())
	ev := &inbox.Event{ID: postbox.NewID(), Payload: []byte{}}
	if out, err := ib.Process(ctx, ev, func(context.Context, *sql.Tx, *inbox.Event) error { return nil }); err != nil || out != inbox.Processed {
		t.Fatalf("process: %v, %v; want processed", out, err)
	}
	if r, err := ib.Get(ctx, ev.ID); err != nil || r.Payload != nil {
		t.Fatalf("row %+v, %v: want no payload", r, err)
	}
}

// TestInboxSwallowedSQLError documents a difference from PostgreSQL: a
// failed statement does not abort SQLite's transaction, so a handler that
// ignores it and returns nil commits the rest of its work.
func TestInboxSwallowedSQLError(t *testing.T) {
	b := subject(sqlite.Config{})(t, store.SchemaParams{})
	ctx := t.Context()
	ib := inbox.New(b.Driver)
	ev := &inbox.Event{ID: postbox.NewID()}
	out, err := ib.Process(ctx, ev, func(ctx context.Context, tx *sql.Tx, e *inbox.Event) error {
		if _, err := tx.ExecContext(ctx, "insert into no_such_table values (1)"); err == nil {
			t.Error("insert into a missing table succeeded")
		}
		return b.Effect(ctx, tx, e.ID.String())
	})
	if err != nil || out != inbox.Processed {
		t.Fatalf("process: %v, %v; want processed", out, err)
	}
	if n, err := b.Effects(ctx, ev.ID.String()); err != nil || n != 1 {
		t.Fatalf("%d effects, %v; want the handler's other write committed", n, err)
	}
}
