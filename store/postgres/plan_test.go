package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
)

// The statements that change a batch of events by id find them by id
// (the primary key), whatever the planner believes of their status: with
// statistics taken while no event had that status (a replay's requeue, a
// backlog after a quiet hour, before autovacuum's analyze), a plan through
// the status's partial index reads every entry of it for each batch (0.6 s
// a settle at 200,000 pending).
func TestBatchStatementsFindEventsByID(t *testing.T) {
	s := pgtest.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, table := s.Pool(), s.Table("outbox_events")
	const n = 5000
	// Rows written as plain SQL would, then analyzed while all have the
	// status "from", then all set to "to": the statistics say none has it.
	fill := func(t *testing.T, from, to string) [][16]byte {
		t.Helper()
		if _, err := pool.Exec(ctx, "truncate "+table); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "insert into "+table+` (aggregate_type, aggregate_id, event_type, payload, status, processed_at)
			select 'order', g::text, 'order.paid', '{}', $1, case when $1 = 'done' then now() end from generate_series(1, $2) g`, from, n); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "analyze "+table); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "update "+table+" set status = $1, processed_at = case when $1 = 'done' then now() end", to); err != nil {
			t.Fatal(err)
		}
		var ids [][16]byte
		rows, err := pool.Query(ctx, "select id from "+table+" order by seq desc limit 100")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	plan := func(t *testing.T, query string, args ...any) string {
		t.Helper()
		rows, err := pool.Query(ctx, "explain "+s.Query(query), args...)
		if err != nil {
			t.Fatalf("explain %s: %v", query, err)
		}
		defer rows.Close()
		var out strings.Builder
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			out.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	t.Run("settle", func(t *testing.T) {
		ids := fill(t, "done", "pending")
		for _, keep := range []bool{false, true} {
			// 100 delivered, and as many retried and failed.
			at, msg := make([]time.Time, len(ids)), make([]string, len(ids))
			p := plan(t, "settle", "relay-1", ids, ids, at, msg, ids, msg, ids, keep, []int64{}, []int64{}, int64(0))
			if strings.Contains(p, "outbox_events_pending_idx") || !strings.Contains(p, "outbox_events_pkey") {
				t.Fatalf("settle (keep %v) of 100 events (retried and failed alike) among %d pending the statistics do not know of:\n%s", keep, n, p)
			}
		}
	})
	t.Run("requeue", func(t *testing.T) {
		ids := fill(t, "pending", "done")
		p := plan(t, "requeue_done", ids, "replay-1", postbox.HeaderReplay)
		if strings.Contains(p, "outbox_events_done_idx") || !strings.Contains(p, "outbox_events_pkey") {
			t.Fatalf("requeue of 100 events among %d done the statistics do not know of:\n%s", n, p)
		}
	})
}

// A lane's settle of delivered deliveries and the dead letters' retry and
// purge change their rows by row id (ctid), checked by (tableoid, ctid) or
// by the primary key, since the partitions of a partitioned table share
// ctids: the plans stay TID scans, never a scan of the deliveries.
func TestDeliveryStatementsFindRowsByTID(t *testing.T) {
	s := pgtest.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, table := s.Pool(), s.Table("endpoint_deliveries")
	e, err := s.EndpointCreate(ctx, store.Endpoint{Name: "e", URL: "https://example.com", Secret: "s", Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "insert into "+table+` (event_id, endpoint_id, event_type, payload, status, processed_at)
		select gen_random_uuid(), $1, 'order.paid', '{}', case when g % 2 = 0 then 'failed' else 'pending' end,
		       case when g % 2 = 0 then now() end
		from generate_series(1, 5000) g`, e.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "analyze "+table); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, "select event_id from "+table+" where status = 'pending' limit 200")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[[16]byte])
	if err != nil {
		t.Fatal(err)
	}
	// The plans a prepared statement gets after its fifth run.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "set plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), "reset plan_cache_mode") }()
	plan := func(t *testing.T, query string, args ...any) string {
		t.Helper()
		rows, err := conn.Query(ctx, "explain "+s.Query(query), args...)
		if err != nil {
			t.Fatalf("explain %s: %v", query, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	none := [][16]byte{}
	for _, keep := range []bool{false, true} {
		p := plan(t, "lane_settle", e.ID, "relay-1", ids, keep, none, []time.Time{}, []string{}, none, []string{}, false, none, []int64{}, []int64{})
		if !strings.Contains(p, "Tid Scan") || !strings.Contains(p, "hashed SubPlan") || strings.Contains(p, "Seq Scan on endpoint_deliveries") {
			t.Fatalf("lane_settle (keep %v) of 200 delivered deliveries among 5000:\n%s", keep, p)
		}
	}
	for _, q := range []string{"delivery_failed_retry", "delivery_failed_purge"} {
		p := plan(t, q, "", nil, nil, "", "", "", 1000, e.ID)
		if !strings.Contains(p, "Tid Scan") || !strings.Contains(p, "hashed SubPlan") {
			t.Fatalf("%s of 1000 failed deliveries among 5000:\n%s", q, p)
		}
	}
}

// The deliveries' conversion moves the unfinished deliveries in its switch,
// under the table's lock, through partial indexes: never a scan of the
// finished ones, whatever their number.
func TestDeliveriesSwitchFindsUnfinishedByIndex(t *testing.T) {
	s := pgtest.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := s.Pool()
	for i := range 5 {
		if _, err := s.EndpointCreate(ctx, store.Endpoint{Name: fmt.Sprint("e", i), URL: "https://example.com", Secret: "s", Concurrency: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// 50,000 done, 500 pending, the plain table renamed as the switch
	// renames it, an empty one in its place (the statement's target).
	for _, q := range []string{`insert into {schema}.endpoint_deliveries (event_id, endpoint_id, event_type, payload, status, processed_at)
		select gen_random_uuid(), e.id, 'order.paid', '{}', case when g % 100 = 0 then 'pending' else 'done' end,
		       case when g % 100 <> 0 then now() end
		from generate_series(1, 10000) g, {schema}.endpoints e`,
		"analyze {schema}.endpoint_deliveries",
		"alter table {schema}.endpoint_deliveries rename to endpoint_deliveries_unpartitioned",
		"create table {schema}.endpoint_deliveries (like {schema}.endpoint_deliveries_unpartitioned including identity)",
	} {
		if _, err := pool.Exec(ctx, s.Expand(q)); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := pool.Query(ctx, "explain "+s.Query("deliveries_move_unfinished"))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(lines, "\n"); strings.Contains(p, "Seq Scan on endpoint_deliveries_unpartitioned") {
		t.Fatalf("the switch's move of 500 pending deliveries among 50,000:\n%s", p)
	}
}
