package postgres_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// deliveryAt writes a delivery of event id to endpoint e with status
// status, processed at processed (zero: not processed), and returns its
// seq.
func deliveryAt(t *testing.T, s *postgres.Store, id uuid.UUID, e store.Endpoint, status string, processed time.Time) int64 {
	t.Helper()
	var at *time.Time
	if !processed.IsZero() {
		at = &processed
	}
	var seq int64
	err := s.Pool().QueryRow(t.Context(), s.Expand(`insert into {schema}.endpoint_deliveries
  (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, status, attempts, last_error, processed_at, available_at)
values ($1::uuid, $2, 'order', $1::uuid::text, 'order.paid', '{"n": 1}', $3, 2, 'boom', $4, now() - interval '1 second')
returning seq`), id, e.ID, status, at).Scan(&seq)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// deliveriesSnapshot is every delivery, every column, in seq order.
func deliveriesSnapshot(t *testing.T, s *postgres.Store) string {
	t.Helper()
	var out string
	err := s.Pool().QueryRow(t.Context(), s.Expand(`select coalesce(string_agg(concat_ws('|', event_id, endpoint_id, seq, aggregate_type,
  aggregate_id, event_type, payload::text, headers::text, status, attempts, available_at, lease_owner, lease_expires_at,
  last_error, created_at, processed_at), E'\n' order by seq), '') from {schema}.endpoint_deliveries`)).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The conversion of endpoint_deliveries keeps every delivery with its seq,
// status and every column, and a claim's lease: the claimed deliveries
// settle after it; new deliveries continue the seq, and a duplicate of a
// delivery kept is absorbed; a partition per hour of the past holds them,
// the DEFAULT one the delivery of an event whose id is not a UUIDv7;
// running Partition again changes nothing.
func TestPartitionDeliveriesConversion(t *testing.T) {
	s := pgtest.Store(t)
	ctx := t.Context()
	es := endpoints(t, s, 2)
	now := time.Now()
	statuses := []string{"pending", "failed", "done", "dropped", "processing"}
	var events []uuid.UUID
	for i := range 10 {
		id := v7At(now.Add(-time.Duration(i) * time.Hour))
		events = append(events, id)
		for j, e := range es {
			status := statuses[(i+j)%len(statuses)]
			var at time.Time
			if status != "pending" && status != "processing" {
				at = now.Add(-time.Duration(i) * time.Hour)
			}
			deliveryAt(t, s, id, e, status, at)
		}
	}
	nonV7 := uuid.New()
	deliveryAt(t, s, nonV7, es[0], "pending", time.Time{})
	lane := s.Driver().EndpointLane(es[0])
	claimed, err := lane.Claim(ctx, store.ClaimParams{Owner: "relay-1", Limit: 2, Lease: time.Minute})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %d, %v", len(claimed), err)
	}
	before := deliveriesSnapshot(t, s)
	maxSeq := countRows(t, s, "select max(seq) from {schema}.endpoint_deliveries")

	rep, err := s.Partition(ctx, postgres.PartitionParams{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Tables, "endpoint_deliveries") || relkind(t, s, "endpoint_deliveries") != "p" {
		t.Fatalf("report %+v: want endpoint_deliveries converted", rep)
	}
	if after := deliveriesSnapshot(t, s); after != before {
		t.Fatalf("deliveries after the conversion:\n%s\nwant:\n%s", after, before)
	}
	if n := countRows(t, s, "select count(*) from {schema}.endpoint_deliveries_default"); n != 1 {
		t.Fatalf("%d deliveries in the DEFAULT partition, want the non-v7 one", n)
	}
	if n := countRows(t, s, "select count(*) from pg_class where relname = 'endpoint_deliveries_unpartitioned' and relnamespace = to_regnamespace($1)", strings.Trim(strings.Split(s.Table("x"), ".")[0], `"`)); n != 0 {
		t.Fatal("the plain deliveries are left")
	}
	if n := countRows(t, s, "select count(*) from pg_trigger where tgrelid = to_regclass($1) and not tgisinternal", s.Table("endpoint_deliveries")); n != 0 {
		t.Fatalf("%d triggers left on the deliveries", n)
	}
	// The claim's lease still holds its deliveries: they settle, and no
	// other delivery goes (the partitions share ctids).
	total := countRows(t, s, "select count(*) from {schema}.endpoint_deliveries")
	if err := lane.Settle(ctx, store.SettleParams{Owner: "relay-1", Done: ids(claimed), Ended: []int64{claimed[0].Lease}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if n := countRows(t, s, "select count(*) from {schema}.endpoint_deliveries where event_id = $1 and endpoint_id = $2", c.ID, es[0].ID); n != 0 {
			t.Fatalf("claimed delivery %s left after its settle", c.ID)
		}
	}
	if n := countRows(t, s, "select count(*) from {schema}.endpoint_deliveries"); n != total-len(claimed) {
		t.Fatalf("%d deliveries after the settle of %d among %d", n, len(claimed), total)
	}
	// New deliveries continue the seq; a duplicate of a kept one is absorbed.
	fresh := postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: "x", EventType: "order.paid", Payload: []byte(`{}`)}
	old := postbox.Event{ID: events[2], AggregateType: "order", AggregateID: "y", EventType: "order.paid", Payload: []byte(`{}`)}
	n, err := s.Driver().DeliveryInsert(ctx, []store.Route{{Event: fresh, Endpoints: []uuid.UUID{es[0].ID}}, {Event: old, Endpoints: []uuid.UUID{es[0].ID, es[1].ID}}})
	if err != nil || n != 1 {
		t.Fatalf("DeliveryInsert after the conversion: %d, %v; want the new event's delivery alone", n, err)
	}
	if seq := countRows(t, s, "select seq from {schema}.endpoint_deliveries where event_id = $1", fresh.ID); seq <= maxSeq {
		t.Fatalf("a new delivery's seq %d, want after %d", seq, maxSeq)
	}
	parts := partitionsOf(t, s, "endpoint_deliveries")
	if len(parts) < 12 { // ten hours of the past, ahead, DEFAULT
		t.Fatalf("partitions %v", parts)
	}
	rep, err = s.Partition(ctx, postgres.PartitionParams{})
	if err != nil || len(rep.Tables) != 0 || len(rep.Created) != 0 || rep.MovedRows != 0 {
		t.Fatalf("Partition again: %+v, %v; want nothing done", rep, err)
	}
	if got := partitionsOf(t, s, "endpoint_deliveries"); !slices.Equal(got, parts) {
		t.Fatalf("partitions after a second run %v, want %v", got, parts)
	}
	// Deleting an endpoint still cascades.
	if err := s.EndpointDelete(ctx, es[1].ID); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s, "select count(*) from {schema}.endpoint_deliveries where endpoint_id = $1", es[1].ID); n != 0 {
		t.Fatalf("%d deliveries of a deleted endpoint", n)
	}
}

// A lane's retention on partitioned deliveries drops the partitions whose
// range ended before Before, with exactly their deliveries finished
// (done, dropped) before it: those pending, failed, or finished since are
// kept with their seq, in the DEFAULT partition, and an ordered lane
// claims the pending one first still.
func TestPartitionDeliveriesDropEndedRanges(t *testing.T) {
	s := pgtest.Store(t)
	ctx := t.Context()
	e := endpoints(t, s, 1)[0]
	now := time.Now()
	cut := now.Add(-210 * time.Minute)
	type row struct {
		id     uuid.UUID
		status string
		seq    int64
		kept   bool
	}
	var rows []row
	for i := range 8 {
		at := now.Add(-time.Duration(i)*time.Hour - time.Minute)
		ended := !at.Truncate(time.Hour).Add(time.Hour).After(cut)
		for _, status := range []string{"done", "dropped", "pending", "failed", "late"} {
			id := v7At(at)
			processed, st := at, status
			switch status {
			case "pending":
				processed = time.Time{}
			case "late": // finished after the cut
				processed, st = now, "done"
			}
			seq := deliveryAt(t, s, id, e, st, processed)
			rows = append(rows, row{id, status, seq, !ended || status == "pending" || status == "failed" || status == "late"})
		}
	}
	partitioned(t, s, time.Hour) // a partition per hour of the rows'
	lane := s.Driver().EndpointLane(e)
	res, err := lane.Expire(ctx, store.ExpireParams{Before: cut, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) == 0 || !slices.ContainsFunc(res.Dropped, func(n string) bool { return strings.HasPrefix(n, "endpoint_deliveries_p") }) {
		t.Fatalf("Expire: %+v; want partitions of the deliveries dropped", res)
	}
	gone := 0
	for _, r := range rows {
		seq := countRows(t, s, "select coalesce(max(seq), 0) from {schema}.endpoint_deliveries where event_id = $1", r.id)
		switch {
		case r.kept && int64(seq) != r.seq:
			t.Errorf("%s delivery of %s: seq %d after the drop, want %d kept", r.status, uuidTimeOf(r.id).Format(time.TimeOnly), seq, r.seq)
		case !r.kept && seq != 0:
			t.Errorf("%s delivery of %s finished before the cut: kept", r.status, uuidTimeOf(r.id).Format(time.TimeOnly))
		case !r.kept:
			gone++
		}
	}
	if gone == 0 || res.Events < gone {
		t.Fatalf("Expire: %+v, %d deliveries gone", res, gone)
	}
	got, err := lane.Claim(ctx, store.ClaimParams{Owner: "relay-1", Limit: 1, Lease: time.Minute, Ordered: true})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim after the drop: %d, %v", len(got), err)
	}
	first := countRows(t, s, "select min(seq) from {schema}.endpoint_deliveries where status = 'pending'")
	if got[0].OutboxSeq != int64(first) {
		t.Fatalf("ordered claim took seq %d, want %d (the oldest pending, moved back)", got[0].OutboxSeq, first)
	}
}

// While the conversion moves the finished deliveries, the fan-out's
// inserts of deliveries whose finished row is not moved yet write none:
// no event is delivered twice.
func TestPartitionDeliveriesNoDuplicateDuringTheMove(t *testing.T) {
	s := pgtest.Store(t)
	ctx := t.Context()
	e := endpoints(t, s, 1)[0]
	n := 3 * postgres.PartitionMoveBatch
	if _, err := s.Pool().Exec(ctx, s.Expand(`insert into {schema}.endpoint_deliveries (event_id, endpoint_id, event_type, payload, status, processed_at)
select gen_random_uuid(), $1, 'order.paid', '{}', case when g % 2 = 0 then 'done' else 'dropped' end, now()
from generate_series(1, $2) g`), e.ID, n); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Pool().Query(ctx, s.Expand("select event_id from {schema}.endpoint_deliveries order by event_id limit 400"))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	inserted, tries := 0, 0
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * 10; ; i = (i + 40) % len(evs) {
				select {
				case <-stop:
					return
				default:
				}
				var routes []store.Route
				for _, id := range evs[i : i+10] {
					routes = append(routes, store.Route{Event: postbox.Event{ID: id, EventType: "order.paid", Payload: []byte(`{}`)}, Endpoints: []uuid.UUID{e.ID}})
				}
				got, err := s.Driver().DeliveryInsert(ctx, routes)
				if err != nil {
					t.Errorf("DeliveryInsert during the conversion: %v", err)
					return
				}
				mu.Lock()
				inserted, tries = inserted+got, tries+1
				mu.Unlock()
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	rep, err := s.Partition(ctx, postgres.PartitionParams{Interval: time.Hour})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if inserted != 0 || tries == 0 {
		t.Fatalf("%d deliveries written again by %d inserts during the conversion", inserted, tries)
	}
	if c := countRows(t, s, "select count(*) from {schema}.endpoint_deliveries"); c != n || rep.MovedRows == 0 {
		t.Fatalf("%d deliveries after the conversion (%d moved after the switch), want %d", c, rep.MovedRows, n)
	}
	if c := countRows(t, s, "select count(*) from {schema}.endpoint_deliveries where status = 'pending'"); c != 0 {
		t.Fatalf("%d pending deliveries: finished ones written again", c)
	}
	if c := countRows(t, s, "select count(*) from pg_trigger where tgrelid = to_regclass($1) and not tgisinternal", s.Table("endpoint_deliveries")); c != 0 {
		t.Fatalf("%d triggers left on the deliveries", c)
	}
}

// The dead letters' retry and purge on partitioned deliveries change the
// failed deliveries asked for only, whatever rows of other partitions
// share their ctids.
func TestPartitionDeliveriesDeadLetters(t *testing.T) {
	s := pgtest.Store(t)
	ctx := t.Context()
	e := endpoints(t, s, 1)[0]
	now := time.Now()
	// The same row positions in three partitions: failed in one, pending
	// and done in the others.
	for i := range 20 {
		deliveryAt(t, s, v7At(now.Add(-3*time.Hour+time.Duration(i)*time.Second)), e, "failed", now)
		deliveryAt(t, s, v7At(now.Add(-2*time.Hour+time.Duration(i)*time.Second)), e, "pending", time.Time{})
		deliveryAt(t, s, v7At(now.Add(-time.Hour+time.Duration(i)*time.Second)), e, "done", now)
	}
	partitioned(t, s, time.Hour)
	sel := store.FailedSelection{FailedFilter: store.FailedFilter{Endpoint: e.ID}, All: true}
	n, err := s.FailedRetry(ctx, store.FailedRetryParams{FailedSelection: sel, BatchSize: 7})
	if err != nil || n != 20 {
		t.Fatalf("retry the failed deliveries: %d, %v", n, err)
	}
	want := map[string]int{"failed": 0, "pending": 40, "done": 20}
	for status, c := range want {
		if got := countRows(t, s, "select count(*) from {schema}.endpoint_deliveries where status = $1", status); got != c {
			t.Fatalf("%d %s deliveries after the retry, want %d", got, status, c)
		}
	}
	for i := range 20 {
		deliveryAt(t, s, v7At(now.Add(-4*time.Hour+time.Duration(i)*time.Second)), e, "failed", now)
	}
	n, err = s.FailedPurge(ctx, store.FailedPurgeParams{FailedSelection: sel, BatchSize: 7})
	if err != nil || n != 20 {
		t.Fatalf("purge the failed deliveries: %d, %v", n, err)
	}
	if got := countRows(t, s, "select count(*) from {schema}.endpoint_deliveries"); got != 60 {
		t.Fatalf("%d deliveries after the purge, want 60", got)
	}
}
