package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"

	"github.com/postbox-go/postbox/postboxtest/storetest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// Every conformance suite on a partitioned outbox: claims, leases, ordered
// mode, dedup keys, hostile rows, endpoints pass unchanged.
func TestPartitionConformance(t *testing.T) {
	storetest.Exercise(t, storetest.Harness[pgx.Tx]{Dialect: "postgres", New: partitionedSubject})
}

// partitionedSubject is subject, its outbox partitioned after Migrate and
// MigrateOrdered: a second per partition, so that the suites' retention
// (events delivered a moment ago, expired a second later) drops their
// partitions; a minute for the History suite, whose Expire loops of small
// steps would otherwise create and drop a partition (DDL) every second.
//
// The Lane suite's PurgeDoneOfTheEndpointOnly is skipped: it purges with a
// Before an hour ahead and wants the other endpoint's finished deliveries
// kept, while on partitioned deliveries a lane's retention drops the
// partitions ended before Before with every endpoint's deliveries
// finished before it (the lanes share Before: see expireDelivered);
// TestPartitionDeliveriesDropEndedRanges covers that retention.
func partitionedSubject(t *testing.T, p store.SchemaParams) storetest.Subject[pgx.Tx] {
	if strings.HasSuffix(t.Name(), "/Lane/PurgeDoneOfTheEndpointOnly") {
		t.Skip("a lane's retention drops every endpoint's finished deliveries of the ended partitions")
	}
	sub := subject(t, p)
	interval := time.Second
	if strings.Contains(t.Name(), "/History/") {
		interval = time.Minute
	}
	if _, err := sub.Store.(*postgres.Store).Partition(t.Context(), postgres.PartitionParams{Interval: interval}); err != nil {
		t.Fatal(err)
	}
	return sub
}

// partitioned is a migrated store in a fresh schema, its outbox
// partitioned with interval.
func partitioned(t *testing.T, s *postgres.Store, interval time.Duration) *postgres.Store {
	t.Helper()
	if _, err := s.Partition(t.Context(), postgres.PartitionParams{Interval: interval}); err != nil {
		t.Fatal(err)
	}
	return s
}

// events makes n events of aggregate agg.
func events(n int, agg string) []postbox.Event {
	out := make([]postbox.Event, n)
	for i := range out {
		out[i] = postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: agg, EventType: "order.created", Payload: []byte(fmt.Sprintf(`{"n": %d}`, i))}
	}
	return out
}

// drainer is a relay reduced to its store calls: it claims and settles
// every event delivered, recording each event's delivery in order.
type drainer struct {
	mu        sync.Mutex
	delivered []store.ClaimedEvent
}

// run claims and settles until ctx ends; keep marks the delivered rows
// done instead of deleting them.
func (d *drainer) run(ctx context.Context, t *testing.T, s *postgres.Driver, ordered, keep bool) {
	for ctx.Err() == nil {
		got, err := s.Claim(ctx, store.ClaimParams{Owner: "drainer", Limit: 20, Lease: time.Minute, Ordered: ordered})
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("claim: %v", err)
			}
			return
		}
		if len(got) == 0 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		p := store.SettleParams{Owner: "drainer", KeepDone: keep}
		for _, e := range got {
			p.Done = append(p.Done, e.ID)
			p.Ended = append(p.Ended, e.Lease)
		}
		if err := s.Settle(ctx, p); err != nil {
			if ctx.Err() == nil {
				t.Errorf("settle: %v", err)
			}
			return
		}
		d.mu.Lock()
		d.delivered = append(d.delivered, got...)
		d.mu.Unlock()
	}
}

// ids are the distinct ids delivered, with how many times each was.
func (d *drainer) ids() map[uuid.UUID]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[uuid.UUID]int{}
	for _, e := range d.delivered {
		out[e.ID]++
	}
	return out
}

// start runs d in the background until the test ends or stop is called.
func (d *drainer) start(t *testing.T, s *postgres.Driver, ordered, keep bool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); d.run(ctx, t, s, ordered, keep) }()
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// waitDelivered waits until every one of want was delivered.
func (d *drainer) waitDelivered(t *testing.T, want []postbox.Event) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := d.ids()
		missing := 0
		for _, e := range want {
			if got[e.ID] == 0 {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events never delivered", missing, len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countRows runs a count query.
func countRows(t *testing.T, s *postgres.Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(t.Context(), s.Expand(query), args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Dropping a partition whose events are still pending moves them to the
// DEFAULT partition, where a draining relay delivers them: nothing lost.
func TestPartitionDropKeepsPendingEvents(t *testing.T) {
	s := partitioned(t, pgtest.Store(t), time.Second)
	ctx := t.Context()
	all := events(300, "1")
	if err := s.Enqueue(ctx, all...); err != nil {
		t.Fatal(err)
	}
	d := s.Driver()
	res, err := d.Expire(ctx, store.ExpireParams{Before: time.Now().Add(time.Hour), Limit: 1000})
	if err != nil || len(res.Dropped) == 0 || res.Events != 0 {
		t.Fatalf("Expire: %+v, %v; want partitions dropped, no delivered event removed", res, err)
	}
	if n := countRows(t, s, "select count(*) from {schema}.outbox_events_default where status = 'pending'"); n != len(all) {
		t.Fatalf("%d pending events in the DEFAULT partition after the drop, want %d", n, len(all))
	}
	var dr drainer
	dr.start(t, d, false, true)
	more := events(300, "2")
	for i := 0; i < len(more); i += 100 {
		if err := s.Enqueue(ctx, more[i:i+100]...); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Expire(ctx, store.ExpireParams{Before: time.Now().Add(time.Hour), Limit: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	dr.waitDelivered(t, append(all, more...))
	if n := countRows(t, s, "select count(*) from {schema}.outbox_events where status <> 'done'"); n != 0 {
		t.Fatalf("%d events still undelivered", n)
	}
}

// With Keep, every delivered event of a dropped partition is handed over
// once, in id order; a Keep that fails drops nothing, and the next step
// hands all of them again.
func TestPartitionKeepSeesEveryDeliveredEventOnce(t *testing.T) {
	s := partitioned(t, pgtest.Store(t), time.Second)
	ctx := t.Context()
	d := s.Driver()
	delivered := events(250, "1")
	if err := s.Enqueue(ctx, delivered...); err != nil {
		t.Fatal(err)
	}
	var dr drainer
	dr.start(t, d, false, true)
	dr.waitDelivered(t, delivered)
	pending := events(5, "2")
	for i := range pending {
		pending[i].AvailableAt = time.Now().Add(time.Hour)
	}
	if err := s.Enqueue(ctx, pending...); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(time.Hour)
	failing := func(context.Context, []store.HistoryEvent) error { return errors.New("the archive is down") }
	for i := 0; ; i++ {
		// Partitions without delivered events are dropped without a Keep;
		// the first with some fails.
		res, err := d.Expire(ctx, store.ExpireParams{Before: before, Limit: 100, Keep: failing})
		if err != nil {
			if !strings.Contains(err.Error(), "the archive is down") || res.Kept != 0 {
				t.Fatalf("Expire with a failing Keep: %+v, %v; want Keep's error, nothing kept", res, err)
			}
			break
		}
		if !res.More || i == 100 {
			t.Fatalf("Expire with a failing Keep: %+v, never called Keep", res)
		}
	}
	seen := map[uuid.UUID]int{}
	keep := func(_ context.Context, evs []store.HistoryEvent) error {
		if len(evs) > 100 {
			t.Errorf("Keep handed %d events, want at most the limit 100", len(evs))
		}
		for i, e := range evs {
			if i > 0 && bytes.Compare(evs[i-1].ID[:], e.ID[:]) >= 0 {
				t.Errorf("Keep handed %s after %s: not in id order", e.ID, evs[i-1].ID)
			}
			if e.EventType != "order.created" || len(e.Payload) == 0 || e.ProcessedAt.IsZero() || e.CreatedAt.IsZero() || e.OutboxSeq == 0 {
				t.Errorf("Keep handed an incomplete event: %+v", e)
			}
			seen[e.ID]++
		}
		return nil
	}
	kept := 0
	for {
		res, err := d.Expire(ctx, store.ExpireParams{Before: before, Limit: 100, Keep: keep})
		if err != nil {
			t.Fatal(err)
		}
		kept += res.Kept
		if !res.More {
			break
		}
	}
	if kept != len(delivered) || len(seen) != len(delivered) {
		t.Fatalf("kept %d events, %d distinct; want each of the %d delivered", kept, len(seen), len(delivered))
	}
	for _, e := range delivered {
		if seen[e.ID] != 1 {
			t.Fatalf("event %s handed to Keep %d times, want once", e.ID, seen[e.ID])
		}
	}
	for _, e := range pending {
		if r, err := s.Get(ctx, e.ID); err != nil || r.Status != "pending" {
			t.Fatalf("pending event after the drops: %+v, %v", r, err)
		}
	}
	if n := countRows(t, s, "select count(*) from {schema}.outbox_events where status = 'done'"); n != 0 {
		t.Fatalf("%d delivered events left after the drops", n)
	}
}

// Partition converts a plain outbox with pending, delivered and failed
// events while a relay drains it in ordered mode: every event is delivered,
// each aggregate's in order; the failed ones stay failed, the delivered
// ones are moved.
func TestPartitionConvertsALiveOutbox(t *testing.T) {
	s := pgtest.OrderedStore(t)
	ctx := t.Context()
	d := s.Driver()
	failed := events(3, "failed")
	if err := s.Enqueue(ctx, failed...); err != nil {
		t.Fatal(err)
	}
	got, err := d.Claim(ctx, store.ClaimParams{Owner: "x", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 3 {
		t.Fatalf("claim: %d, %v", len(got), err)
	}
	p := store.SettleParams{Owner: "x"}
	for _, e := range got {
		p.Failed = append(p.Failed, store.Failure{ID: e.ID, LastError: "boom", Lease: e.Lease})
	}
	if err := d.Settle(ctx, p); err != nil {
		t.Fatal(err)
	}
	var all []postbox.Event
	for a := range 5 {
		all = append(all, events(200, fmt.Sprint(a))...)
	}
	if err := s.Enqueue(ctx, all[:500]...); err != nil {
		t.Fatal(err)
	}
	var dr drainer
	stop := dr.start(t, d, true, true)
	if err := s.Enqueue(ctx, all[500:]...); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Partition(ctx, postgres.PartitionParams{Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Converted || rep.Moved < len(failed) || len(rep.Created) < 3 {
		t.Fatalf("Partition: %+v; want converted, the failed events moved in the switch, partitions created", rep)
	}
	dr.waitDelivered(t, all)
	stop()
	if n := countRows(t, s, "select count(*) from {schema}.outbox_events where status = 'done'"); n != len(all) {
		t.Fatalf("%d delivered events in the partitioned outbox, want %d", n, len(all))
	}
	// Each aggregate's events were delivered in their order.
	last := map[string]int64{}
	for _, e := range dr.delivered {
		if e.OutboxSeq <= last[e.AggregateID] {
			t.Fatalf("aggregate %s: event seq %d delivered after seq %d", e.AggregateID, e.OutboxSeq, last[e.AggregateID])
		}
		last[e.AggregateID] = e.OutboxSeq
	}
	for _, e := range failed {
		if r, err := s.Get(ctx, e.ID); err != nil || r.Status != "failed" || r.LastError != "boom" {
			t.Fatalf("failed event after the conversion: %+v, %v", r, err)
		}
	}
	if n := countRows(t, s, "select count(*) from pg_class where relname = 'outbox_events_unpartitioned' and relnamespace = $1::regnamespace", s.Schema()); n != 0 {
		t.Fatal("the plain table is still there")
	}
	again, err := s.Partition(ctx, postgres.PartitionParams{Interval: time.Second})
	if err != nil || again.Converted {
		t.Fatalf("Partition again: %+v, %v; want a no-op on a partitioned outbox", again, err)
	}
}

// The article's plain-SQL insert works on a partitioned outbox, and a
// dedup key another event holds gets the plain table's unique violation
// (SQLSTATE 23505, constraint outbox_events_dedup_key_uq); Enqueue
// reports it as ErrDuplicate. The key is free again once its event is
// deleted.
func TestPartitionPlainSQLInsert(t *testing.T) {
	s := partitioned(t, pgtest.Store(t), time.Hour)
	ctx := t.Context()
	insert := "insert into " + s.Table("outbox_events") + "(aggregate_type, aggregate_id, event_type, payload, dedup_key) values ('order', '42', 'order.paid', '{}', 'order-42-paid')"
	if _, err := s.Pool().Exec(ctx, insert); err != nil {
		t.Fatal(err)
	}
	_, err := s.Pool().Exec(ctx, insert)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" || pgErr.ConstraintName != "outbox_events_dedup_key_uq" {
		t.Fatalf("second insert of the key: %v, want 23505 on outbox_events_dedup_key_uq", err)
	}
	e := events(1, "42")[0]
	e.DedupKey = "order-42-paid"
	if err := s.Enqueue(ctx, e); !errors.Is(err, postbox.ErrDuplicate) {
		t.Fatalf("Enqueue of the key: %v, want ErrDuplicate", err)
	}
	d := s.Driver()
	got, err := d.Claim(ctx, store.ClaimParams{Owner: "x", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].EventType != "order.paid" {
		t.Fatalf("claim: %v, %v", got, err)
	}
	if err := d.Settle(ctx, store.SettleParams{Owner: "x", Done: []uuid.UUID{got[0].ID}, Ended: []int64{got[0].Lease}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(ctx, e); err != nil {
		t.Fatalf("Enqueue of the key once its event is gone: %v", err)
	}
	if n := countRows(t, s, "select count(*) from {schema}.outbox_dedup_keys"); n != 1 {
		t.Fatalf("%d keys held, want 1", n)
	}
}

// An event whose id is not a UUIDv7 (a producer's gen_random_uuid()) lands
// in the DEFAULT partition and is delivered.
func TestPartitionNonV7ID(t *testing.T) {
	s := partitioned(t, pgtest.Store(t), time.Hour)
	ctx := t.Context()
	var id uuid.UUID
	var partition string
	err := s.Pool().QueryRow(ctx, "insert into "+s.Table("outbox_events")+"(id, event_type, payload) values (gen_random_uuid(), 'x', '{}') returning id, tableoid::regclass::text").Scan(&id, &partition)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(partition, "outbox_events_default") {
		t.Fatalf("event %s is in %s, want the DEFAULT partition", id, partition)
	}
	var dr drainer
	dr.start(t, s.Driver(), false, false)
	dr.waitDelivered(t, []postbox.Event{{ID: id}})
}

// WAL mode streams the inserts of a partitioned outbox, through the
// publication created before the conversion.
func TestPartitionWAL(t *testing.T) {
	s := pgtest.LogicalStore(t)
	w := pgtest.WAL(t, s)
	ctx := context.Background()
	var mu sync.Mutex
	var got []uuid.UUID
	deliver := func(_ context.Context, ids []uuid.UUID) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ids...)
		return nil
	}
	delivered := func(id uuid.UUID) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(got, id)
	}
	stop, done := follow(t, w, deliver)
	first := newEvent()
	if err := s.Enqueue(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the event of the plain outbox", func() bool { return delivered(first.ID) })
	stop()
	<-done
	partitioned(t, s, time.Second)
	_, _ = follow(t, w, deliver)
	second := newEvent()
	if err := s.Enqueue(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the event of the partitioned outbox", func() bool { return delivered(second.ID) })
}

// A store whose enqueues wrote to the plain outbox keeps enqueueing once
// another process (another store) partitioned it: Enqueue, in a
// transaction of its own, runs its insert again in the new form.
func TestPartitionEnqueueAcrossTheConversion(t *testing.T) {
	producer := pgtest.Store(t)
	ctx := t.Context()
	e := events(2, "1")
	e[0].DedupKey, e[1].DedupKey = "k0", "k1"
	if err := producer.Enqueue(ctx, e[0]); err != nil {
		t.Fatal(err)
	}
	other, err := postgres.New(producer.Pool(), postgres.Config{Schema: producer.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	partitioned(t, other, time.Hour)
	if err := producer.Enqueue(ctx, e[1]); err != nil {
		t.Fatalf("Enqueue after another store partitioned the outbox: %v", err)
	}
	if err := producer.Enqueue(ctx, e[1]); !errors.Is(err, postbox.ErrDuplicate) {
		t.Fatalf("Enqueue of a taken key: %v, want ErrDuplicate", err)
	}
}

// deliverKeeping claims and settles every pending event of s as a relay
// with a dedup window does: the rows kept done, their keys held an hour.
func deliverKeeping(t *testing.T, d *postgres.Driver) {
	t.Helper()
	ctx := t.Context()
	for {
		got, err := d.Claim(ctx, store.ClaimParams{Owner: "x", Limit: 100, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			return
		}
		p := store.SettleParams{Owner: "x", KeepDone: true, DedupWindow: time.Hour}
		for _, e := range got {
			p.Done = append(p.Done, e.ID)
			p.Ended = append(p.Ended, e.Lease)
		}
		if err := d.Settle(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
}

// keyed makes n events with dedup keys prefix0, prefix1, ….
func keyed(n int, prefix string) []postbox.Event {
	out := events(n, "1")
	for i := range out {
		out[i].DedupKey = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// requeueAll requeues every delivered event of s as a replay: rows kept
// done become pending again, their dedup keys still held.
func requeueAll(t *testing.T, s *postgres.Store) {
	t.Helper()
	hist, err := s.HistoryRead(t.Context(), store.HistoryParams{Limit: 1000})
	if err != nil || len(hist) == 0 {
		t.Fatalf("HistoryRead: %d events, %v", len(hist), err)
	}
	if _, err := s.Requeue(t.Context(), hist, "again"); err != nil {
		t.Fatal(err)
	}
}

// The conversion moves delivered rows whose dedup key is held (a relay's
// DedupWindow), and replayed rows (pending, their key held): the held-key
// check refuses new events, not the moves.
func TestPartitionConvertsHeldKeys(t *testing.T) {
	s := pgtest.Store(t)
	ctx := t.Context()
	d := s.Driver()
	if err := s.Enqueue(ctx, keyed(4, "held")...); err != nil {
		t.Fatal(err)
	}
	deliverKeeping(t, d)
	if err := s.Enqueue(ctx, keyed(3, "done")...); err != nil {
		t.Fatal(err)
	}
	deliverKeeping(t, d)
	hist, err := s.HistoryRead(ctx, store.HistoryParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var replayed []store.HistoryEvent
	for _, h := range hist {
		if strings.HasPrefix(h.DedupKey, "held") {
			replayed = append(replayed, h)
		}
	}
	if _, err := s.Requeue(ctx, replayed, "again"); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Partition(ctx, postgres.PartitionParams{Interval: time.Second})
	if err != nil {
		t.Fatalf("Partition with held keys: %v", err)
	}
	if rep.Moved != 4 || rep.MovedDone != 3 {
		t.Fatalf("Partition: %+v; want the 4 replayed events moved in the switch, the 3 delivered after", rep)
	}
	if n := countRows(t, s, "select count(*) from {schema}.outbox_events where dedup_key is not null"); n != 7 {
		t.Fatalf("%d keyed events in the partitioned outbox, want 7", n)
	}
	if err := s.Enqueue(ctx, keyed(1, "held")...); !errors.Is(err, postbox.ErrDuplicate) {
		t.Fatalf("Enqueue of a held key after the conversion: %v, want ErrDuplicate", err)
	}
}

// A partition holding a replayed event whose key is held is dropped: its
// pending row moves to the DEFAULT partition, key and all.
func TestPartitionDropMovesAHeldKeyReplay(t *testing.T) {
	s := partitioned(t, pgtest.Store(t), time.Second)
	ctx := t.Context()
	d := s.Driver()
	evs := keyed(3, "k")
	if err := s.Enqueue(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	deliverKeeping(t, d)
	requeueAll(t, s)
	res, err := d.Expire(ctx, store.ExpireParams{Before: time.Now().Add(time.Hour), Limit: 1000})
	if err != nil || len(res.Dropped) == 0 {
		t.Fatalf("Expire: %+v, %v; want the partition dropped", res, err)
	}
	if n := countRows(t, s, "select count(*) from {schema}.outbox_events_default where status = 'pending' and dedup_key like 'k%'"); n != len(evs) {
		t.Fatalf("%d replayed events in the DEFAULT partition, want %d", n, len(evs))
	}
}

// v7At is a UUIDv7 of time t.
func v7At(t time.Time) uuid.UUID {
	id := postbox.NewID()
	ms := uint64(t.UnixMilli())
	for i := 0; i < 6; i++ {
		id[i] = byte(ms >> (40 - 8*i))
	}
	return id
}

// A conversion interrupted before its delivered rows were moved, finished
// by the next run while every row of a batch was written again meanwhile
// (Requeue's insert, without the key): the rows after that batch are
// moved too, and the keys of the rows not inserted are free.
func TestPartitionMoveDoneAfterRequeue(t *testing.T) {
	s := partitioned(t, pgtest.Store(t), time.Hour)
	ctx := t.Context()
	n := postgres.PartitionMoveBatch + 1
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = v7At(time.Now().Add(-time.Minute).Add(time.Duration(i) * time.Millisecond))
	}
	for _, q := range []string{
		"create table {schema}.outbox_events_unpartitioned (like {schema}.outbox_events including defaults)",
		`insert into {schema}.outbox_events_unpartitioned (id, seq, aggregate_type, aggregate_id, event_type, payload, status, dedup_key, processed_at)
		 select id, ord, 'order', '1', 'order.created', '{}', 'done', 'm' || ord, now() from unnest($1::uuid[]) with ordinality u(id, ord)`,
		"insert into {schema}.outbox_dedup_keys (dedup_key, id) select dedup_key, id from {schema}.outbox_events_unpartitioned",
		`insert into {schema}.outbox_events (id, aggregate_type, aggregate_id, event_type, payload)
		 select id, aggregate_type, aggregate_id, event_type, payload from {schema}.outbox_events_unpartitioned where seq <= $1::bigint`,
	} {
		var args []any
		if strings.Contains(q, "$1::uuid") {
			args = []any{ids}
		} else if strings.Contains(q, "$1") {
			args = []any{postgres.PartitionMoveBatch}
		}
		if _, err := s.Pool().Exec(ctx, s.Expand(q), args...); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := s.Partition(ctx, postgres.PartitionParams{Interval: time.Hour})
	if err != nil || rep.MovedDone != 1 {
		t.Fatalf("Partition: %+v, %v; want the one row not requeued moved", rep, err)
	}
	last := fmt.Sprintf("m%d", n)
	if got := countRows(t, s, "select count(*) from {schema}.outbox_events where id = $1 and status = 'done' and dedup_key = $2", ids[n-1], last); got != 1 {
		t.Fatalf("the row after the requeued batch: %d moved, want 1", got)
	}
	if got := countRows(t, s, "select count(*) from {schema}.outbox_dedup_keys where dedup_key like 'm%' and dedup_key <> $1", last); got != 0 {
		t.Fatalf("%d keys of requeued rows still taken, want 0", got)
	}
	if err := s.Enqueue(ctx, postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: "1", EventType: "order.created", Payload: []byte(`{}`), DedupKey: "m1"}); err != nil {
		t.Fatalf("Enqueue of a requeued row's key: %v", err)
	}
	if got := countRows(t, s, "select count(*) from {schema}.outbox_events where dedup_key = 'm1'"); got != 1 {
		t.Fatalf("%d events of key m1, want the one enqueued", got)
	}
}

// keepRecorder is a Keep that counts each event handed and the calls.
type keepRecorder struct {
	seen  map[uuid.UUID]int
	calls int
}

func (k *keepRecorder) keep(_ context.Context, evs []store.HistoryEvent) error {
	k.calls++
	for _, e := range evs {
		k.seen[e.ID]++
	}
	return nil
}

// With Keep, a step hands Keep one chunk of a partition (Limit events):
// the partition is dropped by the step that kept its last chunk, which
// reports every event kept of it as it reports them removed.
func TestPartitionKeepsAChunkPerStep(t *testing.T) {
	s := partitioned(t, pgtest.Store(t), time.Hour)
	ctx := t.Context()
	d := s.Driver()
	delivered := events(250, "1")
	if err := s.Enqueue(ctx, delivered...); err != nil {
		t.Fatal(err)
	}
	deliverKeeping(t, d)
	k := &keepRecorder{seen: map[uuid.UUID]int{}}
	before := time.Now().Add(3 * time.Hour)
	kept, steps := 0, 0
	for ; steps < 20; steps++ {
		calls := k.calls
		res, err := d.Expire(ctx, store.ExpireParams{Before: before, Limit: 100, Keep: k.keep})
		if err != nil {
			t.Fatal(err)
		}
		if k.calls-calls > 1 {
			t.Fatalf("step %d called Keep %d times, want once at most", steps, k.calls-calls)
		}
		if res.Events != res.Kept {
			t.Fatalf("step %d: %+v; want Events == Kept", steps, res)
		}
		kept += res.Kept
		if !res.More {
			break
		}
	}
	if kept != len(delivered) || len(k.seen) != len(delivered) || steps < 2 {
		t.Fatalf("kept %d events, %d distinct, in %d steps; want the %d delivered, in 3 steps", kept, len(k.seen), steps+1, len(delivered))
	}
	for id, n := range k.seen {
		if n != 1 {
			t.Fatalf("event %s kept %d times, want once", id, n)
		}
	}
}

// A delivered row whose processed_at is infinity (a producer dropped the
// row bounds) is kept once, and its partition dropped; the other events
// are kept once too.
func TestPartitionKeepsAnInfiniteProcessedAt(t *testing.T) {
	s := partitioned(t, pgtest.Store(t), time.Second)
	ctx := t.Context()
	d := s.Driver()
	delivered := events(5, "1")
	if err := s.Enqueue(ctx, delivered...); err != nil {
		t.Fatal(err)
	}
	deliverKeeping(t, d)
	for _, q := range []string{
		"alter table {schema}.outbox_events drop constraint outbox_events_times_range",
		"update {schema}.outbox_events set processed_at = 'infinity' where id = $1",
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = []any{delivered[0].ID}
		}
		if _, err := s.Pool().Exec(ctx, s.Expand(q), args...); err != nil {
			t.Fatal(err)
		}
	}
	k := &keepRecorder{seen: map[uuid.UUID]int{}}
	before := time.Now().Add(time.Hour)
	for step := 0; ; step++ {
		res, err := d.Expire(ctx, store.ExpireParams{Before: before, Limit: 100, Keep: k.keep})
		if err != nil {
			t.Fatal(err)
		}
		if !res.More {
			break
		}
		if step == 20 {
			t.Fatalf("Expire still reports More after %d steps: %+v", step, res)
		}
	}
	for _, e := range delivered {
		if k.seen[e.ID] != 1 {
			t.Fatalf("event %s kept %d times, want once", e.ID, k.seen[e.ID])
		}
	}
	if n := countRows(t, s, "select count(*) from {schema}.outbox_events where status = 'done'"); n != 0 {
		t.Fatalf("%d delivered events left", n)
	}
}

// A range cut short by an existing partition (after a change of interval)
// is named for its bounds: a table with the name its start alone would
// give does not leave the range to the DEFAULT partition.
func TestPartitionNameOfACutRange(t *testing.T) {
	s := partitioned(t, pgtest.Store(t), time.Hour)
	ctx := t.Context()
	h := time.Now().UTC().Truncate(time.Hour)
	half := h.Add(30 * time.Minute)
	q := func(query string) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, s.Expand(query)); err != nil {
			t.Fatal(err)
		}
	}
	// The hour's partition becomes one of its first half; a table of a
	// past range has the name of the half that is left.
	q(`drop table {schema}."outbox_events_p` + h.Format("20060102T1504") + `"`)
	q(fmt.Sprintf("create table {schema}.outbox_events_first_half partition of {schema}.outbox_events for values from ('%s') to ('%s')", v7Bound(h), v7Bound(half)))
	past := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	q(fmt.Sprintf(`create table {schema}."outbox_events_p%s" partition of {schema}.outbox_events for values from ('%s') to ('%s')`, half.Format("20060102T1504"), v7Bound(past), v7Bound(past.Add(time.Hour))))
	rep, err := s.Partition(ctx, postgres.PartitionParams{Interval: time.Hour})
	if err != nil || len(rep.Created) != 1 {
		t.Fatalf("Partition: %+v, %v; want the second half of the hour created", rep, err)
	}
	ev := events(1, "1")[0]
	ev.ID = v7At(half.Add(15 * time.Minute))
	if err := s.Enqueue(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s, "select count(*) from {schema}.outbox_events_default"); n != 0 {
		t.Fatalf("the event of the cut range went to the DEFAULT partition")
	}
}

// v7Bound is a partition bound: the smallest UUIDv7 of t's millisecond.
func v7Bound(t time.Time) uuid.UUID {
	var id uuid.UUID
	ms := uint64(t.UnixMilli())
	for i := 0; i < 6; i++ {
		id[i] = byte(ms >> (40 - 8*i))
	}
	return id
}

// The drop of a partition too large to count whole (more than
// partitionSamplePages pages) reports its delivered events counted in a
// sample of its pages: within a few percent of them.
func TestPartitionDropCountsALargePartitionInASample(t *testing.T) {
	s := partitioned(t, pgtest.Store(t), time.Second)
	ctx := t.Context()
	const n = 150_000 // about 3,000 pages: a sample of a third of them
	at := time.Now().Add(time.Second)
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = v7At(at)
	}
	if _, err := s.Pool().Exec(ctx, s.Expand(`insert into {schema}.outbox_events (id, aggregate_type, aggregate_id, event_type, payload, status, processed_at)
		select id, 'order', 'o', 'order.paid', '{"n": 1}', 'done', now() - interval '1 hour' from unnest($1::uuid[]) as id`), ids); err != nil {
		t.Fatal(err)
	}
	if inDefault := countRows(t, s, "select count(*) from {schema}.outbox_events_default"); inDefault != 0 {
		t.Fatalf("%d rows in the DEFAULT partition, want all in the partition of %s", inDefault, at)
	}
	time.Sleep(time.Until(at.Add(2 * time.Second))) // its range has ended
	res, err := s.Driver().Expire(ctx, store.ExpireParams{Before: time.Now().Add(time.Hour), Limit: 1000})
	if err != nil || len(res.Dropped) == 0 {
		t.Fatalf("Expire: %+v, %v; want the partition dropped", res, err)
	}
	if left := countRows(t, s, "select count(*) from {schema}.outbox_events"); left != 0 {
		t.Fatalf("%d events left after the drop", left)
	}
	if res.Events < n*95/100 || res.Events > n*105/100 {
		t.Fatalf("the drop of %d delivered events reports %d: want within 5%%", n, res.Events)
	}
}

// A partition a drop detached but did not drop (the relay stopped between
// the detach's transaction and the DROP, which runs apart so that the
// removal of its files holds no lock on the outbox) is dropped by the next
// step, and named among the partitions dropped; the outbox's other events
// are left alone.
func TestPartitionDropSweepsADetachedLeftover(t *testing.T) {
	s := partitioned(t, pgtest.Store(t), time.Second)
	converted := time.Now() // the first partition's range ends within a second of it
	ctx := t.Context()
	var name string
	if err := s.Pool().QueryRow(ctx, s.Expand(`select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid
		where i.inhparent = '{schema}.outbox_events'::regclass and c.relname <> 'outbox_events_default' order by c.relname limit 1`)).Scan(&name); err != nil {
		t.Fatal(err)
	}
	// What the drop's transaction commits: detached and marked. A table
	// of the same kind left unmarked (a user's) is not touched.
	if _, err := s.Pool().Exec(ctx, s.Expand("alter table {schema}.outbox_events detach partition ")+s.Table(name)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, strings.ReplaceAll(s.Expand(s.Query("partition_mark_detached")), "{partition}", `"`+name+`"`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, s.Expand("create table {schema}.outbox_events_p20000101 (id int)")); err != nil {
		t.Fatal(err)
	}
	pending := events(3, "1")
	if err := s.Enqueue(ctx, pending...); err != nil {
		t.Fatal(err)
	}
	// A drop detaches a partition whose range has ended: a leftover
	// never holds a range the step creates ahead.
	time.Sleep(time.Until(converted.Add(1100 * time.Millisecond)))
	// Its lock held (a reader, a backup), the step does the rest, says
	// which table it could not drop, and a later step drops it.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "lock table "+s.Table(name)+" in access share mode"); err != nil {
		t.Fatal(err)
	}
	res, err := s.Driver().Expire(ctx, store.ExpireParams{Limit: 1000})
	if err == nil || !strings.Contains(err.Error(), name) || slices.Contains(res.Dropped, name) || len(res.Created) == 0 {
		t.Fatalf("Expire while the detached %s is locked: %+v, %v; want partitions created ahead, an error naming it", name, res, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = s.Driver().Expire(ctx, store.ExpireParams{Limit: 1000})
	if err != nil || !slices.Contains(res.Dropped, name) {
		t.Fatalf("Expire: %+v, %v; want the detached %s dropped", res, err, name)
	}
	if n := countRows(t, s, "select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = $1 and c.relname = $2", s.Schema(), name); n != 0 {
		t.Fatalf("the detached partition %s is still there", name)
	}
	if n := countRows(t, s, "select count(*) from {schema}.outbox_events where status = 'pending'"); n != len(pending) {
		t.Fatalf("%d pending events after the sweep, want %d", n, len(pending))
	}
	if n := countRows(t, s, "select count(*) from {schema}.outbox_events_p20000101"); n != 0 || slices.Contains(res.Dropped, "outbox_events_p20000101") {
		t.Fatalf("an unmarked table named as a partition: %d rows, dropped %v", n, res.Dropped)
	}
}

// Several relays' retention steps may go for the same partition: the
// step that comes second finds it dropped, or detached and not yet dropped
// ("is not a partition of"), and has nothing left to do: no error (a
// relay logged "retention failed" for it), nothing counted, and the table
// another step detached is left to that step (or to dropDetached).
func TestPartitionDropAfterAnotherStep(t *testing.T) {
	s := partitioned(t, pgtest.Store(t), time.Minute)
	ctx := t.Context()
	res, err := s.DropPartition(ctx, "outbox_events_p19700101T0000")
	if err != nil || res.Events != 0 || len(res.Dropped) != 0 {
		t.Fatalf("drop of a partition gone: %+v, %v; want nothing done and no error", res, err)
	}
	var name string
	if err := s.Pool().QueryRow(ctx, s.Expand(`select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid
		where i.inhparent = '{schema}.outbox_events'::regclass and c.relname <> 'outbox_events_default' order by c.relname limit 1`)).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, s.Expand(`alter table {schema}.outbox_events detach partition {schema}.`+pgx.Identifier{name}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	res, err = s.DropPartition(ctx, name)
	if err != nil || res.Events != 0 || len(res.Dropped) != 0 {
		t.Fatalf("drop of a partition another step detached: %+v, %v; want nothing done and no error", res, err)
	}
	if n := countRows(t, s, "select count(*) from pg_class where relnamespace = '{schema}'::regnamespace and relname = $1", name); n != 1 {
		t.Fatalf("the detached table %s: %d found, want it left to the step that detached it", name, n)
	}
}
