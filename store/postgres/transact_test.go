package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store/postgres"
)

// transactStore is a migrated store in a fresh schema, with a business
// table orders(id bigserial, ref text unique), on a pool of at most
// maxConns connections (0: pgx's default), configured further by configure.
func transactStore(t *testing.T, maxConns int32, configure ...func(*pgxpool.Config)) *postgres.Store {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	for _, c := range configure {
		c(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := postgres.New(pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "create table "+s.Table("orders")+" (id bigserial primary key, ref text unique)"); err != nil {
		t.Fatal(err)
	}
	return s
}

// insertOrder writes one business row and returns its id.
func insertOrder(ctx context.Context, s *postgres.Store, tx pgx.Tx, ref string) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, "insert into "+s.Table("orders")+" (ref) values ($1) returning id", ref).Scan(&id)
	return id, err
}

// rows counts the business rows and the outbox events.
func rows(t *testing.T, s *postgres.Store) (orders, events int) {
	t.Helper()
	return count(t, s, "select count(*) from "+s.Table("orders")), count(t, s, "select count(*) from "+s.Table("outbox_events"))
}

func TestTransactCommitsTheBusinessRowAndItsEvents(t *testing.T) {
	s := transactStore(t, 0)
	ctx := context.Background()
	var added []postbox.Event
	err := s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
		id, err := insertOrder(ctx, s, tx, "a")
		if err != nil {
			return err
		}
		added = []postbox.Event{orderEvent(fmt.Sprint(id)), {EventType: "order.audit", Payload: []byte(`{}`)}}
		return out.Add(added...)
	})
	if err != nil {
		t.Fatal(err)
	}
	if o, e := rows(t, s); o != 1 || e != 2 {
		t.Fatalf("%d orders and %d events committed, want 1 and 2", o, e)
	}
	for _, ev := range added {
		if ev.ID.Version() != 7 {
			t.Fatalf("event %s: id %s not written back as a UUIDv7", ev.EventType, ev.ID)
		}
		rec, err := s.Get(ctx, ev.ID)
		if err != nil || rec.EventType != ev.EventType || string(rec.Payload) != string(ev.Payload) || rec.DedupKey != ev.DedupKey {
			t.Fatalf("stored %+v, %v; want %+v", rec, err, ev)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Pending != 2 {
		t.Fatalf("stats %+v, %v: want 2 pending for the relay", st, err)
	}
}

func TestTransactFnErrorRollsBackEverything(t *testing.T) {
	s := transactStore(t, 0)
	ctx := context.Background()
	boom := errors.New("boom")
	err := s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
		if _, err := insertOrder(ctx, s, tx, "a"); err != nil {
			return err
		}
		if err := out.Add(orderEvent("a")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want fn's error", err)
	}
	if o, e := rows(t, s); o != 0 || e != 0 {
		t.Fatalf("%d orders and %d events after fn failed, want none", o, e)
	}
}

func TestTransactPanicRollsBackAndRepanics(t *testing.T) {
	s := transactStore(t, 1)
	ctx := context.Background()
	pid := backendPID(t, s)
	func() {
		defer func() {
			if p := recover(); p != "kaboom" {
				t.Fatalf("recovered %v, want fn's panic", p)
			}
		}()
		_ = s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
			if _, err := insertOrder(ctx, s, tx, "a"); err != nil {
				return err
			}
			if err := out.Add(orderEvent("a")); err != nil {
				return err
			}
			panic("kaboom")
		})
		t.Fatal("Transact returned after fn panicked")
	}()
	if o, e := rows(t, s); o != 0 || e != 0 {
		t.Fatalf("%d orders and %d events after a panic, want none", o, e)
	}
	checkPoolIdle(t, s, pid)
}

func TestTransactAddRefusesAnInvalidEvent(t *testing.T) {
	s := transactStore(t, 0)
	ctx := context.Background()
	bad := postbox.Event{EventType: "x", Payload: []byte(`{not json`)}
	err := s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
		if _, err := insertOrder(ctx, s, tx, "a"); err != nil {
			return err
		}
		return out.Add(orderEvent("a"), bad)
	})
	if err == nil || !strings.Contains(err.Error(), "postgres: transact") {
		t.Fatalf("err = %v, want Add's validation error", err)
	}
	if o, e := rows(t, s); o != 0 || e != 0 {
		t.Fatalf("%d orders and %d events after an invalid event, want none", o, e)
	}

	// Add keeps none of the events of a call that has an invalid one: a
	// caller that goes on commits only what it added successfully.
	err = s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
		if _, err := insertOrder(ctx, s, tx, "b"); err != nil {
			return err
		}
		if err := out.Add(orderEvent("b"), bad); err == nil {
			t.Error("Add accepted a malformed payload")
		}
		return out.Add(orderEvent("c"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if o, e := rows(t, s); o != 1 || e != 1 {
		t.Fatalf("%d orders and %d events, want the row and only the event added successfully", o, e)
	}
	if n := count(t, s, "select count(*) from "+s.Table("outbox_events")+" where dedup_key = 'order.created:c'"); n != 1 {
		t.Fatal("the event added after the refused call is missing")
	}
}

func TestTransactDuplicateDedupKeyCommitsNothing(t *testing.T) {
	s := transactStore(t, 0)
	ctx := context.Background()
	if err := s.Enqueue(ctx, orderEvent("taken1"), orderEvent("taken2")); err != nil {
		t.Fatal(err)
	}
	many := make([]postbox.Event, 2100) // the duplicate is in the third INSERT of the batch
	for i := range many {
		many[i] = postbox.Event{EventType: "tick", Payload: []byte(`{}`), DedupKey: fmt.Sprint("tick:", i)}
	}
	many[2050] = orderEvent("taken2")
	cases := []struct {
		name   string
		events []postbox.Event
		keys   []string
	}{
		{"one taken", []postbox.Event{orderEvent("new1"), orderEvent("taken1"), orderEvent("new2")}, []string{"order.created:taken1"}},
		{"two taken", []postbox.Event{orderEvent("taken2"), orderEvent("new1"), orderEvent("taken1")}, []string{"order.created:taken2", "order.created:taken1"}},
		{"repeated in the call", []postbox.Event{orderEvent("new3"), orderEvent("new3")}, []string{"order.created:new3"}},
		{"taken in a later chunk", many, []string{"order.created:taken2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
				if _, err := insertOrder(ctx, s, tx, c.name); err != nil {
					return err
				}
				return out.Add(c.events...)
			})
			if !errors.Is(err, postbox.ErrDuplicate) {
				t.Fatalf("err = %v, want ErrDuplicate", err)
			}
			var dup *postbox.DuplicateError
			if !errors.As(err, &dup) || !slices.Equal(dup.Keys, c.keys) {
				t.Fatalf("err = %v (%#v), want the keys %q", err, dup, c.keys)
			}
			if !strings.HasPrefix(err.Error(), "postgres: transact: ") {
				t.Errorf("error %q lacks the prefix", err)
			}
			if o, e := rows(t, s); o != 0 || e != 2 {
				t.Fatalf("%d orders and %d events, want the business row rolled back and only the 2 earlier events", o, e)
			}
		})
	}

	t.Run("repeated id", func(t *testing.T) {
		e := postbox.Event{ID: postbox.NewID(), EventType: "x", Payload: []byte(`{}`)}
		err := s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
			if _, err := insertOrder(ctx, s, tx, "id"); err != nil {
				return err
			}
			return out.Add(e, e)
		})
		var dup *postbox.DuplicateError
		if !errors.As(err, &dup) || !slices.Equal(dup.Keys, []string{"id"}) {
			t.Fatalf("err = %v, want a DuplicateError for the id", err)
		}
		if o, e := rows(t, s); o != 0 || e != 2 {
			t.Fatalf("%d orders and %d events after a repeated id, want 0 and 2", o, e)
		}
	})
}

func TestTransactWithoutEventsCommits(t *testing.T) {
	s := transactStore(t, 0)
	ctx := context.Background()
	err := s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
		_, err := insertOrder(ctx, s, tx, "a")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if o, e := rows(t, s); o != 1 || e != 0 {
		t.Fatalf("%d orders and %d events, want 1 and 0", o, e)
	}
}

func TestTransactManyEvents(t *testing.T) {
	s := transactStore(t, 0)
	ctx := context.Background()
	events := make([]postbox.Event, 2500) // three INSERTs in the batch
	for i := range events {
		events[i] = postbox.Event{EventType: "tick", Payload: fmt.Appendf(nil, `{"i": %d}`, i), DedupKey: fmt.Sprint("tick:", i)}
	}
	err := s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
		if _, err := insertOrder(ctx, s, tx, "a"); err != nil {
			return err
		}
		if err := out.Add(events[:1700]...); err != nil {
			return err
		}
		return out.Add(events[1700:]...)
	})
	if err != nil {
		t.Fatal(err)
	}
	if o, e := rows(t, s); o != 1 || e != len(events) {
		t.Fatalf("%d orders and %d events, want 1 and %d", o, e, len(events))
	}
	for _, i := range []int{0, 999, 1000, 1699, 1700, 2499} {
		rec, err := s.Get(ctx, events[i].ID)
		if err != nil || rec.DedupKey != events[i].DedupKey {
			t.Fatalf("event %d: %+v, %v", i, rec, err)
		}
	}
}

// Every way a Transact can end leaves the pool's one connection idle and
// reusable: nothing is left in a transaction, and failures that PostgreSQL
// reports do not cost the connection.
func TestTransactLeavesTheConnectionIdle(t *testing.T) {
	s := transactStore(t, 1)
	ctx := context.Background()
	if err := s.Enqueue(ctx, orderEvent("taken")); err != nil {
		t.Fatal(err)
	}
	pid := backendPID(t, s)
	order := func(ref string, events ...postbox.Event) func(tx pgx.Tx, out *postgres.Outgoing) error {
		return func(tx pgx.Tx, out *postgres.Outgoing) error {
			if _, err := insertOrder(ctx, s, tx, ref); err != nil {
				return err
			}
			return out.Add(events...)
		}
	}
	runs := []struct {
		name    string
		fn      func(tx pgx.Tx, out *postgres.Outgoing) error
		wantErr bool
	}{
		{"events", order("a", orderEvent("a")), false},
		{"no events", order("b"), false},
		{"duplicate", order("c", orderEvent("taken")), true},
		{"fn error", func(tx pgx.Tx, out *postgres.Outgoing) error {
			_ = order("d", orderEvent("d"))(tx, out)
			return errors.New("no")
		}, true},
		{"failed statement in fn, error ignored, with events", func(tx pgx.Tx, out *postgres.Outgoing) error {
			_ = order("e", orderEvent("e"))(tx, out)
			_, _ = tx.Exec(ctx, "select 1/0")
			return nil
		}, true},
		{"failed statement in fn, error ignored, no events", func(tx pgx.Tx, out *postgres.Outgoing) error {
			_, _ = tx.Exec(ctx, "select 1/0")
			return nil
		}, true},
		{"fn ends the transaction itself", func(tx pgx.Tx, out *postgres.Outgoing) error {
			_ = order("f", orderEvent("f"))(tx, out)
			return tx.Rollback(ctx)
		}, true},
		{"business unique violation deferred to the commit", nil, true},
		{"events again", order("g", orderEvent("g")), false},
	}
	// A deferred constraint fails at COMMIT, after the events were inserted.
	if _, err := s.Pool().Exec(ctx, "create table "+s.Table("deferred")+" (k int primary key deferrable initially deferred)"); err != nil {
		t.Fatal(err)
	}
	runs[7].fn = func(tx pgx.Tx, out *postgres.Outgoing) error {
		if _, err := tx.Exec(ctx, "insert into "+s.Table("deferred")+" values (1), (1)"); err != nil {
			return err
		}
		return out.Add(orderEvent("h"))
	}
	for range 3 {
		for _, r := range runs {
			err := s.Transact(ctx, r.fn)
			if (err != nil) != r.wantErr {
				t.Fatalf("%s: err = %v, want an error: %v", r.name, err, r.wantErr)
			}
			if r.name == "business unique violation deferred to the commit" && errors.Is(err, postbox.ErrDuplicate) {
				t.Fatalf("%s: a business constraint reported as a duplicate event: %v", r.name, err)
			}
			checkPoolIdle(t, s, pid)
		}
		if _, err := s.Pool().Exec(ctx, "truncate "+s.Table("orders")+", "+s.Table("deferred")+"; delete from "+s.Table("outbox_events")+" where dedup_key <> 'order.created:taken'"); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Pool().Stat().NewConnsCount(); got != 1 {
		t.Fatalf("the pool opened %d connections, want 1: a Transact left its connection to be destroyed", got)
	}
}

// backendPID is the server process of the pool's connection.
func backendPID(t *testing.T, s *postgres.Store) uint32 {
	t.Helper()
	var pid uint32
	if err := s.Pool().QueryRow(context.Background(), "select pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// checkPoolIdle checks that the pool's idle connection is outside any
// transaction and works; pid, when not 0, is the server process it must
// still be (the connection was not destroyed and replaced).
func checkPoolIdle(t *testing.T, s *postgres.Store, pid uint32) {
	t.Helper()
	ctx := context.Background()
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if st := conn.Conn().PgConn().TxStatus(); st != 'I' {
		t.Fatalf("pooled connection in transaction status %q, want idle", st)
	}
	var got uint32
	if err := conn.QueryRow(ctx, "select pg_backend_pid()").Scan(&got); err != nil {
		t.Fatalf("plain query after Transact: %v", err)
	}
	if pid != 0 && got != pid {
		t.Fatalf("server process %d, want %d: the connection was replaced", got, pid)
	}
}

// A cancelled context, before the batch or while it waits on a lock,
// commits nothing and never puts a connection in a transaction back in
// the pool.
func TestTransactCancelled(t *testing.T) {
	s := transactStore(t, 1)
	ctx := context.Background()

	cctx, cancel := context.WithCancel(ctx)
	err := s.Transact(cctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
		if _, err := insertOrder(cctx, s, tx, "a"); err != nil {
			return err
		}
		cancel()
		return out.Add(orderEvent("a"))
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	checkPoolIdle(t, s, 0)

	// Another transaction holds the dedup key, uncommitted: the INSERT of
	// the batch waits for it until the deadline.
	other, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	otx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otx.Exec(ctx, "insert into "+s.Table("outbox_events")+" (event_type, payload, dedup_key) values ('x', '{}', 'order.created:b')"); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer dcancel()
	start := time.Now()
	err = s.Transact(dctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
		if _, err := insertOrder(dctx, s, tx, "b"); err != nil {
			return err
		}
		return out.Add(orderEvent("b"))
	})
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("err = %v after %s, want a timeout", err, time.Since(start))
	}
	// The INSERT waiting on the lock was cancelled: once the lock is
	// released, it must not go on to the COMMIT sent behind it.
	if err := otx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if o, e := rows(t, s); o != 0 || e != 0 {
		t.Fatalf("%d orders and %d events after cancellations, want none", o, e)
	}
	checkPoolIdle(t, s, 0)
}

// The batch is sent differently in each of pgx's query modes (the simple
// protocol, for PgBouncer, sends one multi-statement query).
func TestTransactInEveryExecMode(t *testing.T) {
	modes := []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol}
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			s := transactStore(t, 1, func(c *pgxpool.Config) { c.ConnConfig.DefaultQueryExecMode = mode })
			ctx := context.Background()
			pid := backendPID(t, s)
			order := func(ref string, events ...postbox.Event) error {
				return s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
					if _, err := insertOrder(ctx, s, tx, ref); err != nil {
						return err
					}
					return out.Add(events...)
				})
			}
			many := make([]postbox.Event, 1200)
			for i := range many {
				many[i] = postbox.Event{EventType: "tick", Payload: []byte(`{"a": "it's"}`), Headers: map[string]string{"k": "v"}}
			}
			if err := order("a", orderEvent("a"), orderEvent("b")); err != nil {
				t.Fatal(err)
			}
			if err := order("b", many...); err != nil {
				t.Fatal(err)
			}
			if err := order("c", orderEvent("c"), orderEvent("a")); !errors.Is(err, postbox.ErrDuplicate) {
				t.Fatalf("err = %v, want ErrDuplicate", err)
			}
			if o, e := rows(t, s); o != 2 || e != 2+len(many) {
				t.Fatalf("%d orders and %d events, want 2 and %d", o, e, 2+len(many))
			}
			checkPoolIdle(t, s, pid)
		})
	}
}

func TestTransactNotifiesTheRelay(t *testing.T) {
	s := transactStore(t, 0)
	ctx := context.Background()
	dozer, woken := listenDozing(t, s)
	if ready, err := dozer.Doze(ctx); err != nil || !ready {
		t.Fatalf("doze: %v, %v; want true", ready, err)
	}
	err := s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
		return out.Add(orderEvent("a"))
	})
	if err != nil {
		t.Fatal(err)
	}
	expectNotification(t, woken, true)
}

func TestOutgoingAddAfterTransactIsRefused(t *testing.T) {
	s := transactStore(t, 0)
	ctx := context.Background()
	var kept *postgres.Outgoing
	if err := s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
		kept = out
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := kept.Add(orderEvent("late")); err == nil {
		t.Fatal("Add after Transact returned was accepted")
	}
}
