package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/examples/internal/order"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store/postgres"
)

// newService returns an order service on a fresh, migrated schema.
func newService(t *testing.T) (*order.Service, *postgres.Store) {
	t.Helper()
	st := pgtest.Store(t)
	svc := order.NewService(st)
	if err := svc.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A second run is a no-op.
	if err := svc.Migrate(context.Background()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	return svc, st
}

// counts returns the number of orders and of outbox events.
func counts(t *testing.T, svc *order.Service, st *postgres.Store) (orders, events int) {
	t.Helper()
	err := st.Pool().QueryRow(context.Background(),
		"select (select count(*) from "+svc.Table()+"), (select count(*) from "+st.Table("outbox_events")+")").
		Scan(&orders, &events)
	if err != nil {
		t.Fatal(err)
	}
	return orders, events
}

// matchingPairs counts the orders whose outbox event matches them in every
// field: one id end to end, the article's dedup key and payload.
func matchingPairs(t *testing.T, svc *order.Service, st *postgres.Store) int {
	t.Helper()
	var n int
	err := st.Pool().QueryRow(context.Background(), `
select count(*)
from `+svc.Table()+` o
join `+st.Table("outbox_events")+` e on e.aggregate_id = o.id::text
where e.aggregate_type = 'order'
  and e.event_type = 'order.created'
  and e.dedup_key = 'order.created:' || o.id::text
  and e.payload->>'event_id' = e.id::text
  and (e.payload->>'order_id')::uuid = o.id
  and e.payload->>'user_id' = o.user_id
  and (e.payload->>'amount')::bigint = o.amount
  and (e.payload->>'occurred_at')::timestamptz = o.created_at
  and e.status = 'pending'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestProduceWritesEachOrderWithItsEventAtTheRate(t *testing.T) {
	svc, st := newService(t)
	const n, rate = 12, 100.0
	start := time.Now()
	created, err := svc.Produce(context.Background(), order.ProduceParams{Rate: rate, Count: n})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if created != n {
		t.Fatalf("Produce created %d orders, want %d", created, n)
	}
	// The first order at once, the n-th (n-1)/rate seconds later.
	if minimum := time.Duration(float64(n-1) / rate * float64(time.Second)); took < minimum {
		t.Errorf("%d orders at %v/s took %v, want at least %v", n, rate, took, minimum)
	}
	if took > 3*time.Second {
		t.Errorf("%d orders at %v/s took %v", n, rate, took)
	}
	if orders, events := counts(t, svc, st); orders != n || events != n {
		t.Fatalf("%d orders and %d outbox events, want %d of each", orders, events, n)
	}
	if got := matchingPairs(t, svc, st); got != n {
		t.Fatalf("%d orders have a matching order.created event, want %d", got, n)
	}
}

func TestCreateReturnsTheEventItWrote(t *testing.T) {
	svc, st := newService(t)
	ctx := context.Background()
	c, err := svc.Create(ctx, order.Order{UserID: "u_123", Amount: 9900})
	if err != nil {
		t.Fatal(err)
	}
	if c.EventID == uuid.Nil || c.OrderID == uuid.Nil || c.UserID != "u_123" || c.Amount != 9900 || c.OccurredAt.IsZero() {
		t.Fatalf("Create returned %+v", c)
	}
	rec, err := st.Get(ctx, c.EventID) // the event id is the outbox row id
	if err != nil {
		t.Fatal(err)
	}
	if rec.DedupKey != order.DedupKey(c.OrderID) || rec.AggregateID != c.OrderID.String() || rec.EventType != order.EventType {
		t.Errorf("outbox row: dedup key %q, aggregate id %q, type %q", rec.DedupKey, rec.AggregateID, rec.EventType)
	}
	var payload order.Created
	if err := json.Unmarshal(rec.Payload, &payload); err != nil {
		t.Fatal(err)
	}
	if !payload.OccurredAt.Equal(c.OccurredAt) {
		t.Errorf("payload occurred_at %v, returned %v", payload.OccurredAt, c.OccurredAt)
	}
	payload.OccurredAt = c.OccurredAt
	if payload != c {
		t.Errorf("payload %+v, returned %+v", payload, c)
	}
	if got := matchingPairs(t, svc, st); got != 1 {
		t.Fatalf("%d orders have a matching event, want 1", got)
	}
}

func TestCreateIsAtomic(t *testing.T) {
	ctx := context.Background()

	t.Run("failed order insert leaves no event", func(t *testing.T) {
		svc, st := newService(t)
		first, err := svc.Create(ctx, order.Order{UserID: "u_1", Amount: 100})
		if err != nil {
			t.Fatal(err)
		}
		// The order id is taken: the order insert fails.
		if _, err := svc.Create(ctx, order.Order{ID: first.OrderID, UserID: "u_2", Amount: 200}); err == nil {
			t.Fatal("Create with a taken order id succeeded")
		}
		// The amount breaks the table's check constraint.
		if _, err := svc.Create(ctx, order.Order{UserID: "u_3", Amount: 0}); err == nil {
			t.Fatal("Create with a zero amount succeeded")
		}
		if orders, events := counts(t, svc, st); orders != 1 || events != 1 {
			t.Fatalf("%d orders and %d outbox events, want 1 of each", orders, events)
		}
	})

	t.Run("order refused at commit leaves no event", func(t *testing.T) {
		svc, st := newService(t)
		// A deferred check fails the order at commit, after the event
		// was written.
		refuse := st.Table("refuse_order")
		_, err := st.Pool().Exec(ctx, `create function `+refuse+`() returns trigger language plpgsql as $$
begin
  if new.user_id = 'u_refused' then raise exception 'order refused at commit'; end if;
  return null;
end $$;
create constraint trigger refuse_at_commit after insert on `+svc.Table()+`
  deferrable initially deferred for each row execute function `+refuse+`()`)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Create(ctx, order.Order{UserID: "u_refused", Amount: 100}); err == nil {
			t.Fatal("Create succeeded although the commit was refused")
		}
		if orders, events := counts(t, svc, st); orders != 0 || events != 0 {
			t.Fatalf("%d orders and %d outbox events, want none", orders, events)
		}
	})

	t.Run("failed event insert leaves no order", func(t *testing.T) {
		svc, st := newService(t)
		id := postbox.NewID()
		// Another event already holds the order's dedup key.
		if err := st.Enqueue(ctx, postbox.Event{EventType: order.EventType, Payload: []byte(`{}`), DedupKey: order.DedupKey(id)}); err != nil {
			t.Fatal(err)
		}
		_, err := svc.Create(ctx, order.Order{ID: id, UserID: "u_1", Amount: 100})
		if !errors.Is(err, postbox.ErrDuplicate) {
			t.Fatalf("Create: %v, want an error matching postbox.ErrDuplicate", err)
		}
		if orders, events := counts(t, svc, st); orders != 0 || events != 1 {
			t.Fatalf("%d orders and %d outbox events, want 0 orders and the 1 earlier event", orders, events)
		}
	})
}

func TestProduceStopsWhenCancelledWithAnExactCount(t *testing.T) {
	svc, st := newService(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(150*time.Millisecond, cancel)
	created, err := svc.Produce(ctx, order.ProduceParams{Rate: 200}) // Count 0: until cancelled
	if err != nil {
		t.Fatalf("Produce: %v, want nil after a cancel", err)
	}
	if created < 2 {
		t.Fatalf("Produce created %d orders in 150ms at 200/s", created)
	}
	if orders, events := counts(t, svc, st); orders != created || events != created {
		t.Fatalf("Produce reported %d orders; the database holds %d orders and %d events", created, orders, events)
	}
}

func TestProduceReportsProgress(t *testing.T) {
	svc, _ := newService(t)
	var reports []order.Progress
	created, err := svc.Produce(context.Background(), order.ProduceParams{
		Rate: 200, Count: 40, ReportEvery: 40 * time.Millisecond,
		Report: func(p order.Progress) { reports = append(reports, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	// 40 orders at 200/s take 195ms: about four reports.
	if len(reports) < 2 {
		t.Fatalf("%d reports in %d orders at 200/s every 40ms, want several: %+v", len(reports), created, reports)
	}
	sum := 0
	for i, p := range reports {
		sum += p.Created
		if p.Total != sum || p.Total > created {
			t.Fatalf("report %d: %+v; the reports' Created add up to %d, Produce created %d", i, p, sum, created)
		}
		if i > 0 && p.Elapsed <= reports[i-1].Elapsed {
			t.Fatalf("report %d: elapsed %v after %v", i, p.Elapsed, reports[i-1].Elapsed)
		}
	}
}

func TestProduceRefusesBadParams(t *testing.T) {
	svc, st := newService(t)
	for _, p := range []order.ProduceParams{
		{Rate: 0},
		{Rate: -1},
		{Rate: math.NaN()},
		{Rate: math.Inf(1)},
		{Rate: 10, Count: -1},
	} {
		if n, err := svc.Produce(context.Background(), p); err == nil || n != 0 {
			t.Errorf("Produce(%+v) = %d, %v; want an error", p, n, err)
		}
	}
	if orders, events := counts(t, svc, st); orders != 0 || events != 0 {
		t.Fatalf("%d orders and %d events after refused calls", orders, events)
	}
}

func TestCreateRefusesAnEmptyUser(t *testing.T) {
	svc, st := newService(t)
	if _, err := svc.Create(context.Background(), order.Order{Amount: 100}); err == nil {
		t.Fatal("Create without a user id succeeded")
	}
	if orders, events := counts(t, svc, st); orders != 0 || events != 0 {
		t.Fatalf("%d orders and %d events", orders, events)
	}
}
