package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// The benchmarks of the history (replay's reads and writes) and of
// retention with a Keep. Each op is one event:
//
//	go test ./store/postgres -run '^$' -bench 'History|Requeue|Expire' -benchtime 20000x

// benchFillDone writes n delivered events kept done, processed two hours
// ago; one in a hundred of type payment.refunded, the rest order.created.
func benchFillDone(b *testing.B, s *postgres.Store, n int) {
	b.Helper()
	_, err := s.Pool().Exec(context.Background(), `insert into `+s.Table("outbox_events")+`
  (aggregate_type, aggregate_id, event_type, payload, status, processed_at)
select 'order', 'order-' || g, case when g % 100 = 0 then 'payment.refunded' else 'order.created' end,
       jsonb_build_object('order_id', g, 'amount_cents', g % 100000, 'currency', 'EUR'),
       'done', now() - interval '2 hours'
from generate_series(1, $1::int) as g`, n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool().Exec(context.Background(), "vacuum analyze "+s.Table("outbox_events")); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHistoryRead pages through 100,000 kept events 1,000 at a time:
// all of them, and a type that one in a hundred has (a page then reads
// about 100,000 rows past the type's prefix filter).
func BenchmarkHistoryRead(b *testing.B) {
	s := pgtest.Store(b)
	benchFillDone(b, s, 100_000)
	for _, c := range []struct {
		name   string
		filter store.HistoryFilter
	}{{"all", store.HistoryFilter{}}, {"one-type-in-100", store.HistoryFilter{EventTypes: []string{"payment.*"}}}} {
		b.Run(c.name, func(b *testing.B) {
			var after uuid.UUID
			for n := 0; n < b.N; {
				page, err := s.HistoryRead(context.Background(), store.HistoryParams{Filter: c.filter, After: after, Limit: 1000})
				if err != nil {
					b.Fatal(err)
				}
				if len(page) == 0 {
					after = uuid.Nil
					continue
				}
				after, n = page[len(page)-1].ID, n+len(page)
			}
		})
	}
}

// BenchmarkRequeue sends kept events back to the queue 1,000 at a time
// (they are marked done again outside the timer).
func BenchmarkRequeue(b *testing.B) {
	s := pgtest.Store(b)
	benchFillDone(b, s, 20_000)
	ctx := context.Background()
	var after uuid.UUID
	b.ResetTimer()
	for n := 0; n < b.N; {
		b.StopTimer()
		page, err := s.HistoryRead(ctx, store.HistoryParams{After: after, Limit: min(1000, b.N-n)})
		if err != nil {
			b.Fatal(err)
		}
		if len(page) == 0 {
			if _, err := s.Pool().Exec(ctx, "update "+s.Table("outbox_events")+" set status = 'done', processed_at = now() where status = 'pending'"); err != nil {
				b.Fatal(err)
			}
			after = uuid.Nil
			continue
		}
		after = page[len(page)-1].ID
		b.StartTimer()
		res, err := s.Requeue(ctx, page, "bench")
		if err != nil || res.Requeued != len(page) {
			b.Fatalf("requeue: %+v, %v", res, err)
		}
		n += len(page)
	}
}

// BenchmarkExpire is retention of b.N delivered events in steps of 1,000:
// deleted (no Keep), and read, handed to a Keep that keeps nothing, then
// deleted.
func BenchmarkExpire(b *testing.B) {
	keep := func(context.Context, []store.HistoryEvent) error { return nil }
	for _, c := range []struct {
		name string
		keep func(context.Context, []store.HistoryEvent) error
	}{{"delete", nil}, {"keep-then-delete", keep}} {
		b.Run(c.name, func(b *testing.B) {
			s := pgtest.Store(b)
			benchFillDone(b, s, b.N)
			b.ResetTimer()
			for n := 0; n < b.N; {
				res, err := s.Driver().Expire(context.Background(), store.ExpireParams{Before: time.Now().Add(-time.Hour), Limit: 1000, Keep: c.keep})
				if err != nil {
					b.Fatal(err)
				}
				n += res.Events
				if !res.More {
					break
				}
			}
		})
	}
}
