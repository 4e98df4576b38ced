package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// The WAL tests stream from the test binary's throwaway cluster with
// wal_level = logical: its start overlaps the package's other tests.
func init() { pgtest.StartLogical() }

// follow runs w.Follow with deliver until stop is called or the test ends,
// once the slot is streamed, and returns Follow's error on done.
func follow(t *testing.T, w *postgres.WAL, deliver func(context.Context, []uuid.UUID) error) (stop func(), done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // before the slot is dropped
	out := make(chan error, 1)
	go func() { out <- w.Follow(ctx, at(deliver)) }()
	waitUntil(t, "the slot to be streamed", func() bool {
		st, err := w.State(context.Background())
		return err == nil && st.Active
	})
	return cancel, out
}

// at is Follow's start for deliver, which delivers a batch at once (it does
// not claim it): its wait returns deliver's error.
func at(deliver func(context.Context, []uuid.UUID) error) func(context.Context, []uuid.UUID, postgres.WALClaim) func() error {
	return func(ctx context.Context, ids []uuid.UUID, _ postgres.WALClaim) func() error {
		err := deliver(ctx, ids)
		return func() error { return err }
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func walPosition(t *testing.T, s *postgres.Store, query string, args ...any) pglogrepl.LSN {
	t.Helper()
	var lsn pglogrepl.LSN
	if err := s.Pool().QueryRow(context.Background(), query, args...).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return lsn
}

func newEvent() postbox.Event {
	return postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: "1", EventType: "order.created", Payload: []byte(`{}`)}
}

// Follow hands over the ids of committed inserts in commit order, and
// confirms the slot only past what deliver accepted: after a deliver that
// failed, the next Follow starts again with the transaction it failed on.
func TestWALFollowConfirmsOnlyWhatWasDelivered(t *testing.T) {
	s := pgtest.LogicalStore(t)
	w := pgtest.WAL(t, s)
	ctx := context.Background()
	var mu sync.Mutex
	var got []uuid.UUID
	failOn := uuid.Nil
	deliver := func(_ context.Context, ids []uuid.UUID) error {
		mu.Lock()
		defer mu.Unlock()
		if slices.Contains(ids, failOn) {
			return errors.New("the sink is down")
		}
		got = append(got, ids...)
		return nil
	}
	delivered := func() []uuid.UUID {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}

	_, done := follow(t, w, deliver)
	first, second := newEvent(), newEvent()
	mu.Lock()
	failOn = second.ID
	mu.Unlock()
	if err := s.Enqueue(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first event", func() bool { return len(delivered()) == 1 })
	if err := s.Enqueue(ctx, second); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "the sink is down") {
			t.Fatalf("Follow returned %v, want deliver's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return deliver's error")
	}
	end := walPosition(t, s, "select pg_current_wal_lsn()")
	waitUntil(t, "the slot to be idle", func() bool { st, _ := w.State(ctx); return !st.Active })
	if c := walPosition(t, s, "select confirmed_flush_lsn from pg_replication_slots where slot_name = $1", w.Slot()); c >= end {
		t.Fatalf("slot confirmed at %s, past the failed delivery (WAL at %s)", c, end)
	}

	mu.Lock()
	failOn = uuid.Nil
	mu.Unlock()
	stop, done := follow(t, w, deliver)
	third := newEvent()
	if err := s.Enqueue(ctx, third); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the second and third events", func() bool { return len(delivered()) >= 3 })
	if ids := delivered(); !slices.Equal(ids, []uuid.UUID{first.ID, second.ID, third.ID}) {
		t.Fatalf("delivered %v, want %v", ids, []uuid.UUID{first.ID, second.ID, third.ID})
	}
	end = walPosition(t, s, "select pg_current_wal_lsn()")
	waitUntil(t, "the slot to be confirmed", func() bool {
		return walPosition(t, s, "select confirmed_flush_lsn from pg_replication_slots where slot_name = $1", w.Slot()) >= end
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Follow after its context ended: %v", err)
	}
}

// Follow starts a batch while many earlier ones still wait for their
// outcomes (the relay's settler takes a few milliseconds to record them),
// not only four: a transaction committed behind a dozen small batches in
// flight is handed over at once.
func TestWALFollowPipelinesManyBatches(t *testing.T) {
	s := pgtest.LogicalStore(t)
	w := pgtest.WAL(t, s)
	const batches = 12
	var mu sync.Mutex
	var started int
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // before the slot is dropped
	t.Cleanup(func() { close(release) })
	go func() {
		_ = w.Follow(ctx, func(context.Context, []uuid.UUID, postgres.WALClaim) func() error {
			mu.Lock()
			started++
			mu.Unlock()
			return func() error {
				<-release
				return nil
			}
		})
	}()
	waitUntil(t, "the slot to be streamed", func() bool {
		st, err := w.State(context.Background())
		return err == nil && st.Active
	})
	for i := range batches {
		if err := s.Enqueue(context.Background(), newEvent()); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, fmt.Sprintf("batch %d to start while %d wait for their outcomes", i+1, i), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return started == i+1
		})
	}
}

// A second Follow of a slot another one streams fails (its caller stands
// by); State says the slot is active and how much WAL it retains.
func TestWALOneFollowerAtATime(t *testing.T) {
	s := pgtest.LogicalStore(t)
	w := pgtest.WAL(t, s)
	_, firstDone := follow(t, w, func(context.Context, []uuid.UUID) error { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Follow(ctx, at(func(context.Context, []uuid.UUID) error { return nil })); err == nil || !strings.Contains(err.Error(), "is active") {
		select {
		case err := <-firstDone:
			t.Errorf("the first Follow returned %v", err)
		default:
		}
		t.Fatalf("a second Follow returned %v, want the slot is active", err)
	}
	st, err := w.State(ctx)
	if err != nil || !st.Exists || !st.Active || st.RetainedBytes < 0 {
		t.Fatalf("State %+v, %v", st, err)
	}
}

// A batch's claim leases only its events that no one holds, under the same
// leases as Claim, and none before all the batch's transactions are
// visible: a transaction still in progress holds back the events of one
// committed before it.
func TestWALClaimWaitsForVisibility(t *testing.T) {
	s := pgtest.Store(t)
	w, err := s.WAL(postgres.WALConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	polled, a := newEvent(), newEvent()
	if err := s.Enqueue(ctx, polled, a); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	b := postbox.NewID()
	var xid int64
	err = tx.QueryRow(ctx, `insert into `+s.Table("outbox_events")+` (id, aggregate_type, aggregate_id, event_type, payload)
		values ($1, 'order', '1', 'order.created', '{}') returning txid_current() & 4294967295`, b).Scan(&xid)
	if err != nil {
		t.Fatal(err)
	}
	p := store.ClaimParams{Owner: "stream", Limit: 10, Lease: time.Minute}
	ids := []uuid.UUID{a.ID, b, postbox.NewID()}
	waitCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if got, err := w.Claim(waitCtx, p, ids, []int64{xid}); !errors.Is(err, context.DeadlineExceeded) || len(got) != 0 {
		t.Fatalf("claim while a transaction of the batch is in progress: %v, %v; want it to wait", got, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := w.Claim(ctx, p, ids, []int64{xid})
	if err != nil || len(got) != 2 || got[0].ID != a.ID || got[1].ID != b || got[0].Attempt != 1 {
		t.Fatalf("claim once visible: %v, %v; want a and b, first attempts", got, err)
	}
	if again, err := w.Claim(ctx, p, ids[:1], []int64{xid}); err != nil || len(again) != 0 {
		t.Fatalf("claim of a leased event: %v, %v", again, err)
	}
	other, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "poll", Limit: 10, Lease: time.Minute})
	if err != nil || len(other) != 1 || other[0].ID != polled.ID {
		t.Fatalf("Claim after the stream's: %v, %v; want the other event alone", other, err)
	}
}

// The stream's claim looks its events up by the primary key, even on a
// table never analyzed (autovacuum off), rather than walking the pending
// index past every event deleted since the last vacuum.
func TestWALClaimLooksUpEachID(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	tbl := s.Table("outbox_events")
	for _, q := range []string{
		`insert into ` + tbl + ` (event_type, payload) select 'tick', '{}' from generate_series(1, 20000)`,
		`delete from ` + tbl,
		`insert into ` + tbl + ` (event_type, payload) select 'tick', '{}' from generate_series(1, 20)`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	ids := []uuid.UUID{postbox.NewID(), postbox.NewID(), postbox.NewID()}
	plan := explain(t, s.Pool(), s.Query("claim_ids"), "x", 3, 1000, ids, []int64{1})
	if !strings.Contains(plan, "Index Scan using outbox_events_pkey") || strings.Contains(plan, "outbox_events_pending_idx") {
		t.Fatalf("claim_ids does not look its events up by the primary key:\n%s", plan)
	}
}

// WAL mode turns the producers' notify trigger off, and back on.
func TestSetProducerNotify(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	state := func() string {
		var enabled string
		if err := s.Pool().QueryRow(ctx, "select tgenabled::text from pg_trigger where tgname = 'outbox_events_notify' and tgrelid = $1::regclass",
			s.Table("outbox_events")).Scan(&enabled); err != nil {
			t.Fatal(err)
		}
		return enabled
	}
	for _, on := range []bool{false, true} {
		if err := s.SetProducerNotify(ctx, on); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "O", false: "D"}[on]; state() != want {
			t.Fatalf("SetProducerNotify(%v): trigger %q, want %q", on, state(), want)
		}
	}
}

// Slot and publication names are checked; the default names carry the
// database and the schema.
func TestWALConfigNames(t *testing.T) {
	s := pgtest.Store(t)
	if _, err := s.WAL(postgres.WALConfig{Slot: "Bad-Name"}); err == nil {
		t.Fatal("WAL accepted the slot name Bad-Name")
	}
	w, err := s.WAL(postgres.WALConfig{})
	if err != nil || w.Slot() != postgres.DefaultSlot(s.Pool().Config().ConnConfig.Database, s.Schema()) || w.Publication() != w.Slot() {
		t.Fatalf("default names %v, %v", w, err)
	}
}

// The default slot name is "postbox_<database>_<schema>"; names that would
// be too long or hold other characters are cut and cleaned, and made
// unique again by a hash.
func TestDefaultSlot(t *testing.T) {
	if got := postgres.DefaultSlot("shop", "public"); got != "postbox_shop_public" {
		t.Fatalf("DefaultSlot(shop, public) = %s", got)
	}
	long := strings.Repeat("x", 63)
	names := map[string][2]string{}
	for _, in := range [][2]string{
		{"shop", "public"}, {"public", "shop"}, {"Shop", "public"}, {"sh-op", "public"}, {"sh_op", "public"},
		{long, "public"}, {long, "public2"}, {long + "y", "public"}, {"заказы", "public"}, {"заказ", "public"},
	} {
		got := postgres.DefaultSlot(in[0], in[1])
		if len(got) > 63 || strings.Trim(got, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			t.Errorf("DefaultSlot(%q, %q) = %q: not a slot name", in[0], in[1], got)
		}
		if other, ok := names[got]; ok {
			t.Errorf("DefaultSlot(%q, %q) = %q, the name of %q", in[0], in[1], got, other)
		}
		names[got] = in
	}
}

// publicStore is a store migrated in the schema public of the database at
// url, as two deployments on one server have.
func publicStore(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.New(pgtest.PoolAt(t, url), postgres.Config{Schema: "public"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// collect is a Follow deliver that keeps what it is given.
type collect struct {
	mu  sync.Mutex
	ids []uuid.UUID
}

func (c *collect) deliver(_ context.Context, ids []uuid.UUID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, ids...)
	return nil
}

func (c *collect) got() []uuid.UUID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ids)
}

// Two databases of one server, both with the outbox in public: each has a
// slot of its own, both stream at once, each stream brings its own
// database's events, and dropping one database's slot leaves the other's
// (DropSlot says whether there was one to drop).
func TestWALSlotsOfTwoDatabasesStayApart(t *testing.T) {
	a, b := publicStore(t, pgtest.LogicalDatabase(t)), publicStore(t, pgtest.LogicalDatabase(t))
	wa, wb := pgtest.WAL(t, a), pgtest.WAL(t, b)
	if wa.Slot() == wb.Slot() {
		t.Fatalf("both databases use the slot %s", wa.Slot())
	}
	var ca, cb collect
	stopA, doneA := follow(t, wa, ca.deliver)
	follow(t, wb, cb.deliver)
	ctx := context.Background()
	ea, eb := newEvent(), newEvent()
	if err := a.Enqueue(ctx, ea); err != nil {
		t.Fatal(err)
	}
	if err := b.Enqueue(ctx, eb); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "each stream to bring its event", func() bool { return len(ca.got()) == 1 && len(cb.got()) == 1 })
	if ga, gb := ca.got(), cb.got(); ga[0] != ea.ID || gb[0] != eb.ID {
		t.Fatalf("streamed %v and %v, want %v and %v", ga, gb, ea.ID, eb.ID)
	}

	stopA()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a's slot to be idle", func() bool { st, _ := wa.State(ctx); return !st.Active })
	if existed, err := wa.DropSlot(ctx); err != nil || !existed {
		t.Fatalf("DropSlot of a's slot: %v, %v; want it dropped", existed, err)
	}
	if existed, err := wa.DropSlot(ctx); err != nil || existed {
		t.Fatalf("DropSlot of a's slot again: %v, %v; want none to drop", existed, err)
	}
	if st, err := wb.State(ctx); err != nil || !st.Exists || !st.Active {
		t.Fatalf("b's slot after a's was dropped: %+v, %v; want it streamed still", st, err)
	}
}

// A slot name given to the relays of two databases: the second database's
// Follow fails, naming the database that has the slot, and its DropSlot
// finds no slot to drop and leaves the first database's.
func TestWALSlotNamedInAnotherDatabase(t *testing.T) {
	urlA := pgtest.LogicalDatabase(t)
	a, b := publicStore(t, urlA), publicStore(t, pgtest.LogicalDatabase(t))
	cfg := postgres.WALConfig{Slot: "pbtest_one_name"}
	wa, wb := pgtest.WALWith(t, a, cfg), pgtest.WALWith(t, b, cfg)
	follow(t, wa, func(context.Context, []uuid.UUID) error { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dbA := a.Pool().Config().ConnConfig.Database
	err := wb.Follow(ctx, at(func(context.Context, []uuid.UUID) error { return nil }))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("slot pbtest_one_name belongs to the database %q", dbA)) {
		t.Fatalf("Follow of a slot of another database: %v, want an error naming %s", err, dbA)
	}
	if existed, err := wb.DropSlot(ctx); err != nil || existed {
		t.Fatalf("DropSlot from the other database: %v, %v; want none to drop", existed, err)
	}
	if st, err := wa.State(ctx); err != nil || !st.Exists || !st.Active {
		t.Fatalf("the slot after the other database's DropSlot: %+v, %v; want it streamed still", st, err)
	}
}

// A deployment of an earlier version has the slot "postbox_" and the
// schema: the first Follow under the new default name drops it, with its
// publication, once no relay streams it, in its own database only.
func TestWALDropsTheIdleSlotOfAnEarlierVersion(t *testing.T) {
	a, b := publicStore(t, pgtest.LogicalDatabase(t)), publicStore(t, pgtest.LogicalDatabase(t))
	ctx := context.Background()
	for _, q := range []string{
		"create publication postbox_public for table public.outbox_events with (publish = 'insert')",
		"select pg_create_logical_replication_slot('postbox_public', 'pgoutput')",
	} {
		if _, err := a.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	legacy := pgtest.WALWith(t, a, postgres.WALConfig{Slot: "postbox_public"})
	follow(t, pgtest.WAL(t, b), func(context.Context, []uuid.UUID) error { return nil })
	if st, err := legacy.State(ctx); err != nil || !st.Exists {
		t.Fatalf("the earlier version's slot of a after b's relay started: %+v, %v; want it left", st, err)
	}

	follow(t, pgtest.WAL(t, a), func(context.Context, []uuid.UUID) error { return nil })
	if st, err := legacy.State(ctx); err != nil || st.Exists {
		t.Fatalf("the earlier version's slot after a's relay started: %+v, %v; want it dropped", st, err)
	}
	var publications int
	if err := a.Pool().QueryRow(ctx, "select count(*) from pg_publication where pubname = 'postbox_public'").Scan(&publications); err != nil || publications != 0 {
		t.Fatalf("the earlier version's publication: %d (%v), want it dropped", publications, err)
	}
}

// Rows of plain-SQL producers that no event can be read from (times that
// are ±infinity, retries at the integer limit or negative) come through
// the stream's claim as deliveries marked Invalid, naming the column and
// the value's problem, beside the good events of their batches; the stream
// goes on to the next transactions.
func TestWALClaimReadsHostileRowsAsInvalid(t *testing.T) {
	s := pgtest.LogicalStore(t)
	w := pgtest.WAL(t, s)
	ctx := context.Background()
	var mu sync.Mutex
	claimed := map[uuid.UUID]store.ClaimedEvent{}
	ctxFollow, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() {
		done <- w.Follow(ctxFollow, func(ctx context.Context, ids []uuid.UUID, claim postgres.WALClaim) func() error {
			got, err := claim(ctx, store.ClaimParams{Owner: "stream", Limit: len(ids), Lease: time.Minute})
			mu.Lock()
			for _, d := range got {
				claimed[d.ID] = d
			}
			mu.Unlock()
			return func() error { return err }
		})
	}()
	waitUntil(t, "the slot to be streamed", func() bool { st, err := w.State(ctx); return err == nil && st.Active })

	hostile := map[string]string{ // the row's columns -> Invalid
		"created_at = 'infinity'":                     "created_at: infinity is not a time",
		"created_at = '-infinity'":                    "created_at: -infinity is not a time",
		"available_at = '-infinity'":                  "available_at: -infinity is not a time",
		"retries = 2147483647":                        "retries: 2147483647 is out of range",
		"retries = -3":                                "retries: -3 is negative",
		"retries = -1, created_at = '-infinity'":      "created_at: -infinity is not a time; retries: -1 is negative",
		"headers = '{\"a\": {\"b\": [1]}, \"c\": 2}'": "",
		"headers = '[1, 2]'":                          "headers: a JSON array is not an object",
	}
	want := map[uuid.UUID]string{}
	tbl := s.Table("outbox_events")
	// Migration 0008 refuses such values at insert: the rows of a table
	// whose bounds were dropped by hand must still be read.
	pgtest.DropBounds(t, s)
	for set, invalid := range hostile {
		good := newEvent()
		err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
			var id uuid.UUID
			if err := tx.QueryRow(ctx, "insert into "+tbl+" (event_type, payload) values ('order.created', '{}') returning id").Scan(&id); err != nil {
				return err
			}
			want[id] = invalid
			if _, err := tx.Exec(ctx, "update "+tbl+" set "+set+" where id = $1", id); err != nil {
				return err
			}
			return s.Enqueue(ctx, good) // not in tx: a transaction of its own
		})
		if err != nil {
			t.Fatalf("%s: %v", set, err)
		}
		want[good.ID] = ""
	}
	waitUntil(t, "every row claimed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(claimed) == len(want)
	})
	mu.Lock()
	defer mu.Unlock()
	for id, invalid := range want {
		d := claimed[id]
		if d.Invalid != invalid {
			t.Errorf("event %s: Invalid %q, want %q", id, d.Invalid, invalid)
		}
		if invalid == "" && (d.Attempt != 1 || d.CreatedAt.IsZero() || d.EventType != "order.created") {
			t.Errorf("event %s read as %+v", id, d)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Follow ended: %v", err)
	default:
	}
}

// Behind: with no relay streaming the slot, or a stream that keeps up, the
// stream is not behind; while the relay streaming it does not read what the
// server sends, the server's writes pile up past WALBehind and it is; once
// it reads again it catches up.
func TestWALBehind(t *testing.T) {
	s := pgtest.LogicalStore(t)
	w := pgtest.WAL(t, s)
	ctx := context.Background()
	behind := func() bool {
		t.Helper()
		b, err := w.Behind(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if behind() {
		t.Fatal("behind with no relay streaming the slot")
	}
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	stop, _ := follow(t, w, func(ctx context.Context, _ []uuid.UUID) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	defer stop()
	if behind() {
		t.Fatal("an idle stream is behind")
	}
	// Events of 64 KiB of random text each, which the stream must send
	// whole, until its buffers are full and the server's writes pile up.
	insert := "insert into " + s.Table("outbox_events") + "(aggregate_type, aggregate_id, event_type, payload) " +
		"select 'order', g::text, 'order.created', jsonb_build_object('pad', (select string_agg(md5(random()::text || g || k), '') from generate_series(1, 2048) k)) " +
		"from generate_series(1, 16) g"
	waitUntil(t, "the stream to be behind", func() bool {
		if _, err := s.Pool().Exec(ctx, insert); err != nil {
			t.Fatal(err)
		}
		return behind()
	})
	unblock()
	waitUntil(t, "the stream to catch up", func() bool { return !behind() })
}
