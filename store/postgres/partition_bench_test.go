package postgres_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// benchEvents is the events of the partition benchmarks:
// POSTBOX_PARTITION_BENCH_EVENTS, 20,000 by default.
func benchEvents(b *testing.B) int {
	if v := os.Getenv("POSTBOX_PARTITION_BENCH_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("POSTBOX_PARTITION_BENCH_EVENTS=%q: want a positive count", v)
		}
		return n
	}
	return 20_000
}

// insertDelivered writes n delivered events (kept: status done) created
// and processed three hours ago, their UUIDv7 ids of that time.
func insertDelivered(b *testing.B, s *postgres.Store, n int) {
	_, err := s.Pool().Exec(context.Background(), s.Expand(`
insert into {schema}.outbox_events (id, aggregate_type, aggregate_id, event_type, payload, status, created_at, processed_at)
select encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
         placing substring(int8send((extract(epoch from t) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid,
       'order', (i % 1000)::text, 'order.created', '{"amount": 42, "currency": "EUR"}', 'done', t, t
from generate_series(1, $1) i, lateral (select now() - interval '3 hours' + i * interval '1 ms' as t) x`), n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool().Exec(context.Background(), s.Expand("vacuum analyze {schema}.outbox_events")); err != nil {
		b.Fatal(err)
	}
}

// Retention of N delivered events kept: the plain table's DELETE batches
// (Expire's loop, a thousand at a time, as the relay calls it) against the
// drop of their partition. Reports the database time of the Expire calls.
func BenchmarkRetention(b *testing.B) {
	n := benchEvents(b)
	for _, partitioned := range []bool{false, true} {
		name := "plain"
		if partitioned {
			name = "partitioned"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				s := pgtest.Store(b)
				insertDelivered(b, s, n)
				if partitioned {
					// The conversion puts them in one partition for their range.
					if _, err := s.Partition(context.Background(), postgres.PartitionParams{Interval: time.Hour}); err != nil {
						b.Fatal(err)
					}
				}
				d := s.Driver()
				b.StartTimer()
				start := time.Now()
				removed := 0
				for {
					res, err := d.Expire(context.Background(), store.ExpireParams{Before: time.Now().Add(-time.Hour), Limit: 1000})
					if err != nil {
						b.Fatal(err)
					}
					removed += res.Events
					if !res.More {
						break
					}
				}
				b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/retention")
				if removed != n {
					b.Fatalf("removed %d events, want %d", removed, n)
				}
			}
		})
	}
}

// The drain of a backlog of N events (claims of 1,000 from the last
// position, as the relay's, each settled delivered: deleted) with and
// without a REPEATABLE READ transaction holding a snapshot taken before
// the backlog was written (vacuum can then remove none of the deleted
// rows), on the plain and the partitioned outbox. Reports events/s.
func BenchmarkDrainSnapshot(b *testing.B) {
	n := benchEvents(b)
	for _, partitioned := range []bool{false, true} {
		for _, held := range []bool{false, true} {
			name := "plain"
			if partitioned {
				name = "partitioned"
			}
			if held {
				name += "/snapshot"
			} else {
				name += "/none"
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					s := pgtest.Store(b)
					if partitioned {
						if _, err := s.Partition(context.Background(), postgres.PartitionParams{Interval: time.Hour}); err != nil {
							b.Fatal(err)
						}
					}
					if held {
						tx, err := s.Pool().BeginTx(context.Background(), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
						if err != nil {
							b.Fatal(err)
						}
						if _, err := tx.Exec(context.Background(), "select 1"); err != nil {
							b.Fatal(err)
						}
						defer tx.Rollback(context.Background())
					}
					for i := 0; i < n; i += 1000 {
						if err := s.Enqueue(context.Background(), events(min(1000, n-i), strconv.Itoa(i))...); err != nil {
							b.Fatal(err)
						}
					}
					d := s.Driver()
					b.StartTimer()
					start := time.Now()
					var after store.ClaimPosition
					drained := 0
					for drained < n {
						got, err := d.Claim(context.Background(), store.ClaimParams{Owner: "bench", Limit: 1000, Lease: time.Minute, After: after})
						if err != nil {
							b.Fatal(err)
						}
						if len(got) == 0 {
							after = store.ClaimPosition{}
							continue
						}
						last := got[len(got)-1]
						after = store.ClaimPosition{AvailableAt: last.AvailableAt, Seq: last.OutboxSeq}
						p := store.SettleParams{Owner: "bench", Done: make([]uuid.UUID, len(got)), Ended: []int64{got[0].Lease}}
						for i, e := range got {
							p.Done[i] = e.ID
						}
						if err := d.Settle(context.Background(), p); err != nil {
							b.Fatal(err)
						}
						drained += len(got)
					}
					b.ReportMetric(float64(n)/time.Since(start).Seconds(), "events/s")
				}
			})
		}
	}
}

// The hot path with dedup keys: enqueue 1,000 events, each with a key,
// claim them and settle them delivered (deleted), on the plain table
// (its unique index) and on the partitioned one (outbox_dedup_keys,
// maintained by triggers); and the same without keys, where the
// partitioned outbox runs no trigger. Reports events/s.
func BenchmarkPartitionDedupKeys(b *testing.B) {
	for _, partitioned := range []bool{false, true} {
		for _, keyed := range []bool{false, true} {
			name := "plain"
			if partitioned {
				name = "partitioned"
			}
			if keyed {
				name += "/keys"
			} else {
				name += "/nokeys"
			}
			b.Run(name, func(b *testing.B) {
				s := pgtest.Store(b)
				if partitioned {
					if _, err := s.Partition(context.Background(), postgres.PartitionParams{Interval: time.Hour}); err != nil {
						b.Fatal(err)
					}
				}
				d := s.Driver()
				ctx := context.Background()
				b.ResetTimer()
				for i := range b.N {
					evs := events(1000, strconv.Itoa(i))
					if keyed {
						for j := range evs {
							evs[j].DedupKey = evs[j].ID.String()
						}
					}
					if err := s.Enqueue(ctx, evs...); err != nil {
						b.Fatal(err)
					}
					got, err := d.Claim(ctx, store.ClaimParams{Owner: "bench", Limit: 1000, Lease: time.Minute})
					if err != nil || len(got) != 1000 {
						b.Fatalf("claim: %d, %v", len(got), err)
					}
					p := store.SettleParams{Owner: "bench", Done: make([]uuid.UUID, len(got)), Ended: []int64{got[0].Lease}}
					for j, e := range got {
						p.Done[j] = e.ID
					}
					if err := d.Settle(ctx, p); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

// The drop of a partition of N delivered events with dedup keys (and a
// few pending ones, moved back) while a producer enqueues an event at a
// time: the drop's ACCESS EXCLUSIVE lock on outbox_events blocks the
// producer. Reports the longest enqueue during the Expire (the lock time,
// about) and the Expire's time.
func BenchmarkPartitionDropLock(b *testing.B) {
	n := benchEvents(b)
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		s := pgtest.Store(b)
		insertDelivered(b, s, n)
		if _, err := s.Pool().Exec(ctx, s.Expand(`update {schema}.outbox_events set dedup_key = id::text;
update {schema}.outbox_events set status = 'pending', processed_at = null
where id in (select id from {schema}.outbox_events order by id limit 10)`)); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Partition(ctx, postgres.PartitionParams{Interval: time.Hour}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Pool().Exec(ctx, s.Expand("vacuum analyze {schema}.outbox_events")); err != nil {
			b.Fatal(err)
		}
		d := s.Driver()
		stop := make(chan struct{})
		worst := make(chan time.Duration)
		go func() {
			var max time.Duration
			for {
				select {
				case <-stop:
					worst <- max
					return
				default:
				}
				start := time.Now()
				ev := postbox.Event{ID: postbox.NewID(), AggregateType: "probe", AggregateID: "1", EventType: "probe", Payload: []byte(`{}`)}
				if err := s.Enqueue(ctx, ev); err != nil {
					b.Error(err)
				}
				if d := time.Since(start); d > max {
					max = d
				}
				time.Sleep(time.Millisecond)
			}
		}()
		time.Sleep(50 * time.Millisecond)
		b.StartTimer()
		start := time.Now()
		res, err := d.Expire(ctx, store.ExpireParams{Before: time.Now().Add(-time.Hour), Limit: 1000})
		took := time.Since(start)
		b.StopTimer()
		time.Sleep(50 * time.Millisecond)
		close(stop)
		max := <-worst
		if err != nil || res.Events != n-10 || len(res.Dropped) == 0 {
			b.Fatalf("Expire: %+v, %v; want %d delivered events dropped", res, err, n-10)
		}
		b.ReportMetric(float64(max.Microseconds())/1000, "max-enqueue-ms")
		b.ReportMetric(float64(took.Microseconds())/1000, "expire-ms")
	}
}

// The conversion of N deliveries of ten endpoints (one in a hundred
// pending, the others done, their events' UUIDv7 ids and their processing
// three hours ago), then a lane's retention dropping their partitions
// (their pending deliveries moved back). Reports the time of each, and
// how long after the start another connection saw the table partitioned
// (the switch's end: the lock is held from a little before).
func BenchmarkPartitionDeliveries(b *testing.B) {
	n := benchEvents(b)
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		s := pgtest.Store(b)
		var lane store.Source
		for i := range 10 {
			e, err := s.EndpointCreate(ctx, store.Endpoint{Name: strconv.Itoa(i), URL: "https://example.com", Secret: "s", Concurrency: 1})
			if err != nil {
				b.Fatal(err)
			}
			if i == 0 {
				lane = s.Driver().EndpointLane(e)
			}
		}
		_, err := s.Pool().Exec(ctx, s.Expand(`
insert into {schema}.endpoint_deliveries (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, status, created_at, processed_at)
select encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
         placing substring(int8send((extract(epoch from t) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid,
       e.id, 'order', (i % 1000)::text, 'order.created', '{"amount": 42, "currency": "EUR"}',
       case when i % 100 = 0 then 'pending' else 'done' end, t, case when i % 100 <> 0 then t end
from generate_series(1, $1::int / 10) i
cross join lateral (select now() - interval '3 hours' + i * interval '1 ms' as t) x
cross join {schema}.endpoints e`), n)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Pool().Exec(ctx, s.Expand("vacuum analyze {schema}.endpoint_deliveries")); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		// The switch ends when another connection sees the table
		// partitioned (the outbox's and the attempts' conversions before
		// it, of empty tables, take milliseconds).
		switched := make(chan time.Duration, 1)
		go func() {
			for {
				var kind string
				err := s.Pool().QueryRow(ctx, "select relkind::text from pg_class where oid = to_regclass($1)", s.Table("endpoint_deliveries")).Scan(&kind)
				if err != nil || kind == "p" || time.Since(start) > time.Minute {
					switched <- time.Since(start)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		rep, err := s.Partition(ctx, postgres.PartitionParams{Interval: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/conversion")
		b.ReportMetric(float64((<-switched).Milliseconds()), "ms/until-switched")
		b.ReportMetric(float64(rep.MovedRows), "moved-after-switch")
		start = time.Now()
		res, err := lane.Expire(ctx, store.ExpireParams{Before: time.Now().Add(-time.Hour), Limit: 1000})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/drop")
		b.ReportMetric(float64(len(res.Dropped)), "partitions-dropped")
		var left int
		if err := s.Pool().QueryRow(ctx, s.Expand("select count(*) from {schema}.endpoint_deliveries")).Scan(&left); err != nil || left != n/100 {
			b.Fatalf("%d deliveries left after the drop (%v), want the %d pending", left, err, n/100)
		}
	}
}
