package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

const ordersTable = `create table orders (id integer primary key, total integer not null)`

func newStoreWithOrders(t testing.TB, cfg sqlite.Config) *sqlite.Store {
	t.Helper()
	s := newStore(t, cfg)
	if _, err := s.DB().Exec(ordersTable); err != nil {
		t.Fatal(err)
	}
	return s
}

func countRows(t testing.TB, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// The event commits with the business row, and the relay wakes only then.
func TestEnqueueTxCommitsWithBusinessRow(t *testing.T) {
	s := newStoreWithOrders(t, sqlite.Config{})
	ctx := t.Context()
	woke := listen(t, s)

	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "insert into orders(id, total) values (42, 1000)"); err != nil {
		t.Fatal(err)
	}
	events := []postbox.Event{{AggregateType: "order", AggregateID: "42", EventType: "order.created",
		Payload: []byte(`{"order_id": 42, "total": 1000}`), DedupKey: "order.created:42",
		Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}
	if err := s.EnqueueTx(ctx, tx, events...); err != nil {
		t.Fatal(err)
	}
	if events[0].ID == uuid.Nil || events[0].ID.Version() != 7 {
		t.Fatalf("EnqueueTx wrote back id %s, want a UUIDv7", events[0].ID)
	}
	noWake(t, woke, "EnqueueTx before the commit")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke, "the commit of EnqueueTx")

	if n := countRows(t, s.DB(), "select count(*) from orders where id = 42"); n != 1 {
		t.Fatalf("%d orders", n)
	}
	r, err := s.Get(ctx, events[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != store.StatusPending || string(r.Payload) != string(events[0].Payload) || r.Headers["traceparent"] == "" {
		t.Fatalf("enqueued record: %+v", r)
	}
}

func TestEnqueueTxRollsBackWithBusinessRow(t *testing.T) {
	s := newStoreWithOrders(t, sqlite.Config{})
	ctx := t.Context()
	woke := listen(t, s)

	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "insert into orders(id, total) values (42, 1000)"); err != nil {
		t.Fatal(err)
	}
	e := event("42", 1)
	if err := s.EnqueueTx(ctx, tx, e, event("42", 2)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	noWake(t, woke, "a rolled-back EnqueueTx")
	if n := countRows(t, s.DB(), "select count(*) from orders"); n != 0 {
		t.Fatalf("%d orders after rollback", n)
	}
	if n := countRows(t, s.DB(), "select count(*) from outbox_events"); n != 0 {
		t.Fatalf("%d events after rollback", n)
	}
}

func TestEnqueueTxDuplicates(t *testing.T) {
	s := newStoreWithOrders(t, sqlite.Config{})
	ctx := t.Context()
	first := event("1", 1)
	first.DedupKey = "order.created:1"
	first.ID = postbox.NewID()
	if err := s.Enqueue(ctx, first); err != nil {
		t.Fatal(err)
	}

	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "insert into orders(id, total) values (1, 1)"); err != nil {
		t.Fatal(err)
	}
	// A taken dedup key (also repeated within the call) is skipped; the rest
	// is written and the transaction goes on.
	again, other, twice := event("1", 1), event("2", 1), event("1", 1)
	again.DedupKey, twice.DedupKey = first.DedupKey, "order.created:2"
	other.DedupKey = "order.created:2"
	events := []postbox.Event{again, other, twice}
	err = s.EnqueueTx(ctx, tx, events...)
	var dup *postbox.DuplicateError
	if !errors.Is(err, postbox.ErrDuplicate) || !errors.As(err, &dup) ||
		strings.Join(dup.Keys, ",") != "order.created:1,order.created:2" {
		t.Fatalf("dedup keys: got %v, want a DuplicateError naming order.created:1 and order.created:2", err)
	}
	// A repeated id fails the call: none of its events is written, and the
	// transaction is still usable.
	fresh, taken := event("3", 1), event("4", 1)
	taken.ID = first.ID
	err = s.EnqueueTx(ctx, tx, fresh, taken)
	if !errors.Is(err, postbox.ErrDuplicate) || !errors.As(err, &dup) || len(dup.Keys) != 1 || dup.Keys[0] != first.ID.String() {
		t.Fatalf("repeated id: got %v, want a DuplicateError naming %s", err, first.ID)
	}
	if _, err := tx.ExecContext(ctx, "insert into orders(id, total) values (2, 2)"); err != nil {
		t.Fatalf("transaction unusable after a duplicate id: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s.DB(), "select count(*) from orders"); n != 2 {
		t.Fatalf("%d orders, want 2", n)
	}
	if n := countRows(t, s.DB(), "select count(*) from outbox_events"); n != 2 {
		t.Fatalf("%d events, want the first and %s", n, events[1].ID)
	}
	if _, err := s.Get(ctx, events[1].ID); err != nil {
		t.Fatalf("event beside the duplicates: %v", err)
	}
	if n := countRows(t, s.DB(), "select count(*) from outbox_events where aggregate_id = '3'"); n != 0 {
		t.Fatal("event of the failed call was written")
	}
	// Enqueue (own transaction) with a taken id writes nothing either.
	err = s.Enqueue(ctx, event("5", 1), postbox.Event{ID: first.ID, EventType: "x", Payload: []byte(`{}`)})
	if !errors.Is(err, postbox.ErrDuplicate) {
		t.Fatalf("Enqueue with a taken id: %v", err)
	}
	if n := countRows(t, s.DB(), "select count(*) from outbox_events where aggregate_id = '5'"); n != 0 {
		t.Fatal("Enqueue with a taken id wrote the other event")
	}
}

// Eight producers enqueue (half in business transactions, half with
// Enqueue) while three relays claim and settle: every event is claimed
// exactly once, none is lost, no write fails with "database is locked".
func TestConcurrentEnqueueWhileClaiming(t *testing.T) {
	s := newStoreWithOrders(t, sqlite.Config{})
	ctx := t.Context()
	const producers, perProducer = 8, 150
	const total = producers * perProducer

	var produced sync.WaitGroup
	var nextOrder atomic.Int64
	for p := range producers {
		produced.Go(func() {
			for i := range perProducer {
				e := event(fmt.Sprint(p), i)
				if p%2 == 0 {
					if err := s.Enqueue(ctx, e); err != nil {
						t.Errorf("producer %d: enqueue: %v", p, err)
						return
					}
					continue
				}
				err := func() error {
					tx, err := s.DB().BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					defer tx.Rollback()
					if _, err := tx.ExecContext(ctx, "insert into orders(id, total) values (?, 1)", nextOrder.Add(1)); err != nil {
						return err
					}
					if err := s.EnqueueTx(ctx, tx, e); err != nil {
						return err
					}
					return tx.Commit()
				}()
				if err != nil {
					t.Errorf("producer %d: business transaction: %v", p, err)
					return
				}
			}
		})
	}
	// Three relays claim and settle until they have seen every event; the
	// store serialises their claims.
	var mu sync.Mutex
	seen := map[uuid.UUID]int{}
	distinct := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	var relays sync.WaitGroup
	deadline := time.Now().Add(20 * time.Second)
	for r := range 3 {
		woke := listen(t, s)
		owner := fmt.Sprintf("relay-%d", r)
		relays.Go(func() {
			for distinct() < total && time.Now().Before(deadline) {
				got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: owner, Limit: 50, Lease: time.Minute})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				mu.Lock()
				for _, d := range got {
					seen[d.ID]++
				}
				mu.Unlock()
				if len(got) > 0 {
					if err := s.Driver().Settle(ctx, store.SettleParams{Owner: owner, Done: deliveryIDs(got), KeepDone: true}); err != nil {
						t.Errorf("settle: %v", err)
						return
					}
					continue
				}
				select { // nothing due: wait for a wake-up, as the relay does
				case <-woke:
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
	relays.Wait()
	produced.Wait()
	if len(seen) != total {
		t.Fatalf("claimed %d distinct events, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event %s claimed %d times", id, n)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Done != total || st.Pending+st.Processing+st.Failed != 0 {
		t.Fatalf("stats: %+v, %v; want %d done", st, err, total)
	}
	if n := countRows(t, s.DB(), "select count(*) from orders"); n != total/2 {
		t.Fatalf("%d orders, want %d", n, total/2)
	}
}

func deliveryIDs(ds []store.ClaimedEvent) []uuid.UUID {
	out := make([]uuid.UUID, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func TestListener(t *testing.T) {
	s := newStore(t, sqlite.Config{})
	ctx := t.Context()
	woke := listen(t, s)

	if err := s.Enqueue(ctx, event("1", 1)); err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke, "Enqueue")

	// The relay's own writes wake nobody, or it would spin.
	got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "relay", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	if err := s.Driver().Settle(ctx, store.SettleParams{Owner: "relay", Done: deliveryIDs(got)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Driver().Expire(ctx, store.ExpireParams{Before: time.Now().Add(time.Hour), Limit: 10}); err != nil {
		t.Fatal(err)
	}
	noWake(t, woke, "claim, settle and purge")

	// Nor does a duplicate that writes nothing.
	dup := event("2", 1)
	dup.DedupKey = "k"
	if err := s.Enqueue(ctx, dup); err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke, "Enqueue")
	if err := s.Enqueue(ctx, dup); !errors.Is(err, postbox.ErrDuplicate) {
		t.Fatalf("duplicate: %v", err)
	}
	noWake(t, woke, "a skipped duplicate")

	s.Notify()
	waitWake(t, woke, "Notify")

	// Several listeners are all woken.
	other := listen(t, s)
	if err := s.Enqueue(ctx, event("3", 1)); err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke, "Enqueue (first listener)")
	waitWake(t, other, "Enqueue (second listener)")
}

func TestListenEndsWhenClosed(t *testing.T) {
	s, _ := open(t, sqlite.Config{})
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		done <- s.Driver().Listen(context.Background(), func(store.Listening) { close(ready) }, func() {})
	}()
	<-ready
	s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Listen returned nil after Close, want an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Listen still running after Close")
	}
}

// A write transaction that waits too long for another of the same process
// fails with a clear error instead of hanging.
func TestWriteLockTimeout(t *testing.T) {
	s := newStore(t, sqlite.Config{BusyTimeout: 50 * time.Millisecond})
	ctx := t.Context()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Enqueue(ctx, event("1", 1))
	if err == nil || !strings.Contains(err.Error(), "database is locked") {
		t.Fatalf("enqueue while a write transaction is open: %v", err)
	}
	// Readers are not blocked by the writer.
	if _, err := s.Stats(ctx); err != nil {
		t.Fatalf("stats while a write transaction is open: %v", err)
	}
	ro, err := s.DB().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only transaction while a write transaction is open: %v", err)
	}
	ro.Rollback()
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(ctx, event("1", 1)); err != nil {
		t.Fatalf("enqueue after the rollback: %v", err)
	}
	// A cancelled context ends the wait at once.
	tx, err = s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Enqueue(cctx, event("2", 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("enqueue with a cancelled context: %v", err)
	}
}

func TestTablePrefix(t *testing.T) {
	s := newStore(t, sqlite.Config{TablePrefix: "app_"})
	ctx := t.Context()
	var tables []string
	rows, err := s.DB().QueryContext(ctx, "select name from sqlite_schema where type = 'table' and name not like 'sqlite_%' order by name")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		rows.Scan(&name)
		tables = append(tables, name)
	}
	rows.Close()
	if got := strings.Join(tables, " "); got != "app_endpoint_attempts app_endpoint_deliveries app_endpoint_leases app_endpoints app_inbox_events app_inbox_sequences app_outbox_events app_outbox_held_keys app_postbox_migrations app_relay_presence" {
		t.Fatalf("tables: %s", got)
	}
	if got := s.Table("outbox_events"); got != `"app_outbox_events"` {
		t.Fatalf("Table: %s", got)
	}
	woke := listen(t, s)
	if _, err := s.DB().ExecContext(ctx, `insert into `+s.Table("outbox_events")+`(event_type, payload) values ('x', '{}')`); err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke, "a plain insert into the prefixed table")
}
