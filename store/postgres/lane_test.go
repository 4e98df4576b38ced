package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
)

// A delivery row the store cannot read comes back from a lane's claim as
// ClaimedEvent.Invalid, naming its columns, without failing the claim or the
// rows beside it.
func TestLaneClaimReadsHostileRowsAlone(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	e, err := s.EndpointCreate(ctx, store.Endpoint{Name: "h", URL: "https://example.com/h", Secret: "whsec_h", Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	var routes []store.Route
	for range 3 {
		routes = append(routes, store.Route{Event: postbox.Event{ID: postbox.NewID(), EventType: "t", Payload: []byte(`{}`)}, Endpoints: []uuid.UUID{e.ID}})
	}
	if _, err := s.Driver().DeliveryInsert(ctx, routes); err != nil {
		t.Fatal(err)
	}
	for i, set := range []string{
		"headers = '[1]', attempts = -3",
		"created_at = 'infinity', available_at = '-infinity', event_type = ''",
	} {
		_, err := s.Pool().Exec(ctx, "update "+s.Table("endpoint_deliveries")+" set "+set+" where event_id = $1", routes[i].Event.ID)
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Driver().EndpointLane(e).Claim(ctx, store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 3 {
		t.Fatalf("claim = %+v, %v; want the 3 rows", got, err)
	}
	byID := map[uuid.UUID]store.ClaimedEvent{}
	for _, d := range got {
		byID[d.ID] = d
	}
	for i, columns := range [][]string{{"attempts", "headers"}, {"created_at", "available_at", "event_type"}, nil} {
		d := byID[routes[i].Event.ID]
		for _, c := range columns {
			if !strings.Contains(d.Invalid, c+": ") {
				t.Errorf("row %d: Invalid = %q, want it to name %s", i, d.Invalid, c)
			}
		}
		if columns == nil && (d.Invalid != "" || d.Attempt != 1) {
			t.Errorf("healthy row = %+v, want it read", d)
		}
		if d.OutboxSeq == 0 {
			t.Errorf("row %d: OutboxSeq not set", i)
		}
	}
}

// Migration 0012 turns the deliveries a relay of the previous version was
// delivering ('processing') back to pending, due, their attempt counted:
// the next claim delivers them again, as their next attempt.
func TestMigration0012ReturnsProcessingDeliveries(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, strings.ReplaceAll(sql, "{schema}", s.Schema()), args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// Back to the schema of migration 0011.
	exec(`drop table {schema}.endpoint_leases;
create index endpoint_deliveries_aggregate_open_idx
  on {schema}.endpoint_deliveries (endpoint_id, aggregate_type, aggregate_id, seq)
  where status in ('pending', 'processing');
drop index {schema}.endpoint_deliveries_aggregate_pending_idx;
delete from {schema}.postbox_migrations where version = 12`)
	e, err := s.EndpointCreate(ctx, store.Endpoint{Name: "m", URL: "https://example.com/m", Secret: "whsec_m", Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	inFlight, waiting := postbox.NewID(), postbox.NewID()
	if _, err := s.Driver().DeliveryInsert(ctx, []store.Route{
		{Event: postbox.Event{ID: inFlight, EventType: "t", Payload: []byte(`{}`)}, Endpoints: []uuid.UUID{e.ID}},
		{Event: postbox.Event{ID: waiting, EventType: "t", Payload: []byte(`{}`)}, Endpoints: []uuid.UUID{e.ID}},
	}); err != nil {
		t.Fatal(err)
	}
	// Claimed by the previous version: processing, its attempt counted.
	exec(`update {schema}.endpoint_deliveries
set status = 'processing', attempts = 2, lease_owner = 'old', lease_expires_at = now() + interval '1 hour'
where event_id = $1`, inFlight)

	applied, err := s.Migrate(ctx)
	if err != nil || len(applied) != 1 || applied[0] != 12 {
		t.Fatalf("migrate: %v, %v; want [12]", applied, err)
	}
	if c, err := s.DeliveryCounts(ctx, e.ID); err != nil || c.Pending != 2 || c.Processing != 0 {
		t.Fatalf("counts after the migration = %+v, %v; want 2 pending", c, err)
	}
	got, err := s.Driver().EndpointLane(e).Claim(ctx, store.ClaimParams{Owner: "new", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 2 {
		t.Fatalf("claim after the migration = %v, %v; want both deliveries", got, err)
	}
	for _, d := range got {
		want := 1
		if d.ID == inFlight {
			want = 3 // its two attempts counted
		}
		if d.Attempt != want || d.Invalid != "" {
			t.Errorf("delivery %s: attempt %d (%q), want %d", d.ID, d.Attempt, d.Invalid, want)
		}
	}
}

// A lane's settle finds its deliveries by primary key, one probe per id,
// however many of the endpoint's deliveries are pending and whatever the
// planner's statistics (none here: never analyzed, as under autovacuum
// off): never by reading the endpoint's whole backlog.
func TestLaneSettleProbesByID(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	e, err := s.EndpointCreate(ctx, store.Endpoint{Name: "p", URL: "https://example.com/p", Secret: "whsec_p", Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Pool().Exec(ctx, `insert into `+s.Table("endpoint_deliveries")+`
  (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload)
select gen_random_uuid(), $1, 'order', 'order-' || g, 'order.created', '{}'
from generate_series(1, 20000) as g`, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	// A relay's settle: a few hundred ids.
	ids := make([]uuid.UUID, 200)
	for i := range ids {
		ids[i] = postbox.NewID()
	}
	for _, keep := range []bool{false, true} {
		plan := explain(t, s.Pool(), s.Query("lane_settle"), e.ID, "r", ids, keep, []uuid.UUID{}, []time.Time{}, []string{},
			[]uuid.UUID{}, []string{}, false, []uuid.UUID{}, []int64{}, []int64{})
		if strings.Contains(plan, "Bitmap Heap Scan on endpoint_deliveries") || strings.Contains(plan, "Seq Scan on endpoint_deliveries") {
			t.Errorf("settle (keep done %v) reads the backlog:\n%s", keep, plan)
		}
	}
}
