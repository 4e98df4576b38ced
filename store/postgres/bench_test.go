package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// The benchmarks of the relay's hot paths on PostgreSQL. Each op is one
// event, so ns/op compare across batch sizes; compare runs with benchstat:
//
//	go test ./store/postgres -run '^$' -bench . -count 10 > old.txt
//
// The backlogs are written with the article's plain-SQL insert, outside
// the timer.

// benchBatches are the claim and settle batch sizes measured; the relay
// claims up to relay.BatchSizeDefault events at once.
var benchBatches = []int{1, 16, 256, 2000}

// benchFill writes n pending events of distinct aggregates.
func benchFill(b *testing.B, s *postgres.Store, n int) {
	b.Helper()
	_, err := s.Pool().Exec(context.Background(), `insert into `+s.Table("outbox_events")+`
  (aggregate_type, aggregate_id, event_type, payload)
select 'order', 'order-' || g, 'order.created',
       jsonb_build_object('order_id', g, 'amount_cents', g % 100000, 'currency', 'EUR')
from generate_series(1, $1::int) as g`, n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool().Exec(context.Background(), "vacuum analyze "+s.Table("outbox_events")); err != nil {
		b.Fatal(err)
	}
}

func benchClaim(b *testing.B, s *postgres.Store, batch int, ordered bool) []store.ClaimedEvent {
	b.Helper()
	got, err := s.Driver().Claim(context.Background(), store.ClaimParams{Owner: "bench", Limit: batch, Lease: time.Minute, Ordered: ordered})
	if err != nil {
		b.Fatal(err)
	}
	if len(got) == 0 {
		b.Fatal("claimed nothing from a backlog")
	}
	return got
}

func ids(ds []store.ClaimedEvent) []uuid.UUID {
	out := make([]uuid.UUID, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func reportEventsPerSec(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkClaim claims a backlog of b.N events in batches.
func BenchmarkClaim(b *testing.B) {
	for _, ordered := range []bool{false, true} {
		for _, batch := range benchBatches {
			b.Run(fmt.Sprintf("ordered=%v/batch=%d", ordered, batch), func(b *testing.B) {
				newStore := pgtest.Store
				if ordered {
					newStore = pgtest.OrderedStore
				}
				s := newStore(b)
				benchFill(b, s, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for claimed := 0; claimed < b.N; {
					claimed += len(benchClaim(b, s, batch, ordered))
				}
				b.StopTimer()
				reportEventsPerSec(b)
			})
		}
	}
}

// BenchmarkClaimByteBound is BenchmarkClaim with a byte bound that every
// batch fits in (ClaimParams.MaxBytes): the cost of computing the payloads'
// sizes.
func BenchmarkClaimByteBound(b *testing.B) {
	for _, batch := range []int{256, 2000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := pgtest.Store(b)
			benchFill(b, s, b.N)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for claimed := 0; claimed < b.N; {
				got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "bench", Limit: batch, Lease: time.Minute, MaxBytes: 64 << 20})
				if err != nil || len(got) == 0 {
					b.Fatalf("claim: %d, %v", len(got), err)
				}
				claimed += len(got)
			}
			b.StopTimer()
			reportEventsPerSec(b)
		})
	}
}

// BenchmarkSettle marks b.N claimed events delivered, in batches.
func BenchmarkSettle(b *testing.B) {
	for _, batch := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := pgtest.Store(b)
			benchFill(b, s, b.N)
			var claimed []uuid.UUID
			for len(claimed) < b.N {
				claimed = append(claimed, ids(benchClaim(b, s, 1000, false))...)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < len(claimed); i += batch {
				done := claimed[i:min(i+batch, len(claimed))]
				if err := s.Driver().Settle(ctx, store.SettleParams{Owner: "bench", Done: done}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportEventsPerSec(b)
		})
	}
}

// BenchmarkClaimSettle is the relay's round trip without the sink: claim
// a batch, settle it as delivered, until the b.N-event backlog is drained.
func BenchmarkClaimSettle(b *testing.B) {
	for _, batch := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := pgtest.Store(b)
			benchFill(b, s, b.N)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for claimed := 0; claimed < b.N; {
				got := benchClaim(b, s, batch, false)
				if err := s.Driver().Settle(ctx, store.SettleParams{Owner: "bench", Done: ids(got)}); err != nil {
					b.Fatal(err)
				}
				claimed += len(got)
			}
			b.StopTimer()
			reportEventsPerSec(b)
		})
	}
}

// BenchmarkEnqueueTx writes events in the caller's transaction: one
// transaction of one event per op, and one of a hundred events per hundred
// ops; and one event per transaction from parallel producers.
func BenchmarkEnqueueTx(b *testing.B) {
	payload := []byte(`{"order_id": 42, "customer_id": "customer-42", "amount_cents": 1250, "currency": "EUR"}`)
	event := func(i int) postbox.Event {
		return postbox.Event{AggregateType: "order", AggregateID: fmt.Sprint(i), EventType: "order.created", Payload: payload}
	}
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			s := pgtest.Store(b)
			ctx := context.Background()
			events := make([]postbox.Event, n)
			b.ReportAllocs()
			for i := 0; i < b.N; i += n {
				for j := range events {
					events[j] = event(i + j)
				}
				err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error { return s.EnqueueTx(ctx, tx, events...) })
				if err != nil {
					b.Fatal(err)
				}
			}
			reportEventsPerSec(b)
		})
	}
	b.Run("events=1/parallel", func(b *testing.B) {
		s := pgtest.Store(b)
		ctx := context.Background()
		b.ReportAllocs()
		b.SetParallelism(4) // 4×GOMAXPROCS producers
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error { return s.EnqueueTx(ctx, tx, event(i)) })
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportEventsPerSec(b)
	})
}

// BenchmarkTransact commits business transactions (one row of a table of
// orders) from parallel producers, without an event (pgx.BeginFunc) and
// with one event each (Transact, the event sent with the COMMIT): the
// write overhead of the outbox, with the client's allocations.
func BenchmarkTransact(b *testing.B) {
	payload := []byte(`{"order_id": 42, "customer_id": "customer-42", "amount_cents": 1250, "currency": "EUR"}`)
	s := pgtest.Store(b)
	ctx := context.Background()
	orders := s.Table("bench_orders")
	if _, err := s.Pool().Exec(ctx, "create table "+orders+" (id bigint generated always as identity primary key, amount bigint not null)"); err != nil {
		b.Fatal(err)
	}
	insert := "insert into " + orders + " (amount) values ($1) returning id"
	run := func(b *testing.B, tx func(amount int) error) {
		b.ReportAllocs()
		b.SetParallelism(4) // 4×GOMAXPROCS producers
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				if err := tx(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("without", func(b *testing.B) {
		run(b, func(amount int) error {
			return pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
				var id int64
				return tx.QueryRow(ctx, insert, amount).Scan(&id)
			})
		})
	})
	b.Run("with", func(b *testing.B) {
		run(b, func(amount int) error {
			return s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
				var id int64
				if err := tx.QueryRow(ctx, insert, amount).Scan(&id); err != nil {
					return err
				}
				return out.Add(postbox.Event{AggregateType: "order", AggregateID: fmt.Sprint(id), EventType: "order.created", Payload: payload})
			})
		})
	})
}

// BenchmarkInboxProcess inserts new events into the inbox, each in its
// transaction with a handler that does nothing, one at a time and from
// parallel consumers.
func BenchmarkInboxProcess(b *testing.B) {
	payload := []byte(`{"order_id": 42, "amount_cents": 1250}`)
	noop := func(context.Context, pgx.Tx, *inbox.Event) error { return nil }
	process := func(b *testing.B, ib *inbox.Inbox[pgx.Tx]) {
		ev := &inbox.Event{ID: postbox.NewID(), EventType: "order.created", AggregateType: "order", AggregateID: "42", Payload: payload}
		if _, err := ib.Process(context.Background(), ev, noop); err != nil {
			b.Error(err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		ib := inbox.New(pgtest.Store(b).Driver())
		b.ReportAllocs()
		for b.Loop() {
			process(b, ib)
		}
		reportEventsPerSec(b)
	})
	b.Run("parallel", func(b *testing.B) {
		ib := inbox.New(pgtest.Store(b).Driver())
		b.ReportAllocs()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				process(b, ib)
			}
		})
		reportEventsPerSec(b)
	})
}
