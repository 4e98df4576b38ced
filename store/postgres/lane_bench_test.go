package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
)

// BenchmarkLaneClaimSettle is BenchmarkClaimSettle on an endpoint's lane:
// claim a batch of the endpoint's deliveries, settle it as delivered,
// ending its claim (as a relay does), until the b.N-delivery backlog is
// drained; nine other endpoints hold as many deliveries each, which the
// lane must not read. Ordered claims take one delivery of each of b.N
// aggregates.
func BenchmarkLaneClaimSettle(b *testing.B) {
	for _, ordered := range []bool{false, true} {
		for _, batch := range []int{256, 2000} {
			b.Run(fmt.Sprintf("ordered=%v/batch=%d", ordered, batch), func(b *testing.B) {
				s := pgtest.Store(b)
				ctx := context.Background()
				var lane store.Source
				for i := range 10 {
					e, err := s.EndpointCreate(ctx, store.Endpoint{Name: fmt.Sprint("e", i), URL: "https://example.com", Secret: "s", Concurrency: 1})
					if err != nil {
						b.Fatal(err)
					}
					if i == 0 {
						lane = s.Driver().EndpointLane(e)
					}
				}
				_, err := s.Pool().Exec(ctx, `insert into `+s.Table("endpoint_deliveries")+`
  (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload)
select gen_random_uuid(), e.id, 'order', 'order-' || g, 'order.created',
       jsonb_build_object('order_id', g, 'amount_cents', g % 100000, 'currency', 'EUR')
from generate_series(1, $1::int) as g, `+s.Table("endpoints")+` e`, b.N)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Pool().Exec(ctx, "vacuum analyze "+s.Table("endpoint_deliveries")); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for claimed := 0; claimed < b.N; {
					got, err := lane.Claim(ctx, store.ClaimParams{Owner: "bench", Limit: batch, Lease: time.Minute, Ordered: ordered})
					if err != nil || len(got) == 0 {
						b.Fatalf("claim: %d, %v", len(got), err)
					}
					if err := lane.Settle(ctx, store.SettleParams{Owner: "bench", Done: ids(got), Ended: []int64{got[0].Lease}}); err != nil {
						b.Fatal(err)
					}
					claimed += len(got)
				}
				b.StopTimer()
				reportEventsPerSec(b)
			})
		}
	}
}
