package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

const orderedIndex = "outbox_events_aggregate_open_idx"

const orderedMessage = `postgres: ordered claims need the index outbox_events_aggregate_open_idx: run "postbox migrate --ordered" (or Store.MigrateOrdered)`

// indexState reports whether the ordered claim's index exists, whether it is
// valid, its oid and its definition.
func indexState(t *testing.T, s *postgres.Store) (exists, valid bool, oid uint32, def string) {
	t.Helper()
	err := s.Pool().QueryRow(context.Background(), `
select i.indisvalid, i.indexrelid::oid, pg_get_indexdef(i.indexrelid)
from pg_index i
join pg_class c on c.oid = i.indexrelid
join pg_namespace n on n.oid = c.relnamespace
where n.nspname = $1 and c.relname = $2`, s.Schema(), orderedIndex).Scan(&valid, &oid, &def)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, 0, ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return true, valid, oid, def
}

func orderedEvents(t *testing.T, s *postgres.Store) {
	t.Helper()
	var events []postbox.Event
	for _, agg := range []string{"a", "a", "b"} {
		events = append(events, postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: agg,
			EventType: "order.updated", Payload: []byte(`{}`)})
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
}

// checkOrderedClaim claims in ordered mode and expects the oldest event of
// each of the two aggregates orderedEvents wrote.
func checkOrderedClaim(t *testing.T, s *postgres.Store) {
	t.Helper()
	got, err := s.Driver().Claim(context.Background(), store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Minute, Ordered: true})
	if err != nil {
		t.Fatalf("ordered claim: %v", err)
	}
	if len(got) != 2 || got[0].AggregateID != "a" || got[1].AggregateID != "b" {
		t.Fatalf("ordered claim took %d events (%+v), want the first of a and of b", len(got), got)
	}
}

// Migrate alone leaves out the index only ordered claims read: producers do
// not maintain it, unordered claims work, and an ordered claim says what to
// run.
func TestMigrateLeavesOutOrderedIndex(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	if exists, _, _, _ := indexState(t, s); exists {
		t.Fatalf("%s exists after Migrate", orderedIndex)
	}
	orderedEvents(t, s)
	err := s.Driver().OrderedReady(ctx)
	if err == nil || err.Error() != orderedMessage || !errors.Is(err, postgres.ErrOrderedIndexMissing) {
		t.Fatalf("OrderedReady: %v, want %q", err, orderedMessage)
	}
	got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Minute, Ordered: true})
	if err == nil || err.Error() != orderedMessage || !errors.Is(err, postgres.ErrOrderedIndexMissing) || len(got) != 0 {
		t.Fatalf("ordered claim without the index: %d events, %v; want the error %q", len(got), err, orderedMessage)
	}
	got, err = s.Driver().Claim(ctx, store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 3 {
		t.Fatalf("unordered claim without the index: %d events, %v; want 3", len(got), err)
	}
}

// MigrateOrdered builds a valid index of the right shape, and ordered
// claims work.
func TestMigrateOrderedCreatesValidIndex(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	if err := s.MigrateOrdered(ctx); err != nil {
		t.Fatalf("MigrateOrdered: %v", err)
	}
	exists, valid, _, def := indexState(t, s)
	if !exists || !valid {
		t.Fatalf("after MigrateOrdered: exists %v, valid %v", exists, valid)
	}
	if !strings.Contains(def, "(aggregate_type, aggregate_id, seq) WHERE (status = 'pending'::text)") {
		t.Fatalf("index definition %q", def)
	}
	if err := s.Driver().OrderedReady(ctx); err != nil {
		t.Fatalf("OrderedReady: %v", err)
	}
	orderedEvents(t, s)
	checkOrderedClaim(t, s)
}

// MigrateOrdered refuses a schema that Migrate has not brought up to date,
// whose next migration would drop the index again.
func TestMigrateOrderedNeedsMigrate(t *testing.T) {
	pool := pgtest.Pool(t)
	s, err := postgres.New(pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	err = s.MigrateOrdered(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("MigrateOrdered before Migrate: %v, want an error that says to run Migrate", err)
	}
}

// Running MigrateOrdered again, or several at once, keeps the one valid
// index.
func TestMigrateOrderedIsIdempotent(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	if err := s.MigrateOrdered(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, oid, _ := indexState(t, s)
	if err := s.MigrateOrdered(ctx); err != nil {
		t.Fatalf("second MigrateOrdered: %v", err)
	}
	if _, valid, again, _ := indexState(t, s); again != oid || !valid {
		t.Fatalf("second MigrateOrdered rebuilt a valid index (oid %d -> %d) or left it invalid (%v)", oid, again, valid)
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			other, err := postgres.New(s.Pool(), postgres.Config{Schema: s.Schema()})
			if err == nil {
				err = other.MigrateOrdered(ctx)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent MigrateOrdered %d: %v", i, err)
		}
	}
	if _, valid, _, _ := indexState(t, s); !valid {
		t.Fatal("index invalid after concurrent runs")
	}
	var n int
	if err := s.Pool().QueryRow(ctx, "select count(*) from pg_indexes where schemaname = $1 and indexname like 'outbox_events_aggregate%'", s.Schema()).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d ordered indexes (%v), want 1", n, err)
	}
}

// A failed concurrent build leaves an INVALID index of that name: ordered
// claims refuse it, and MigrateOrdered drops and rebuilds it.
func TestMigrateOrderedRebuildsInvalidIndex(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	_, err := s.Pool().Exec(ctx, "create index "+orderedIndex+" on "+s.Table("outbox_events")+
		" (aggregate_type, aggregate_id, seq) where status = 'pending'")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Pool().Exec(ctx, "update pg_index set indisvalid = false where indexrelid = $1::text::regclass",
		pgx.Identifier{s.Schema(), orderedIndex}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	exists, valid, oid, _ := indexState(t, s)
	if !exists || valid {
		t.Fatalf("simulated leftover: exists %v, valid %v", exists, valid)
	}
	if err := s.Driver().OrderedReady(ctx); err == nil || err.Error() != orderedMessage {
		t.Fatalf("OrderedReady on an invalid index: %v, want %q", err, orderedMessage)
	}
	orderedEvents(t, s)
	if _, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Minute, Ordered: true}); err == nil || err.Error() != orderedMessage {
		t.Fatalf("ordered claim on an invalid index: %v, want %q", err, orderedMessage)
	}
	if err := s.MigrateOrdered(ctx); err != nil {
		t.Fatalf("MigrateOrdered: %v", err)
	}
	exists, valid, rebuilt, _ := indexState(t, s)
	if !exists || !valid || rebuilt == oid {
		t.Fatalf("after MigrateOrdered: exists %v, valid %v, oid %d (was %d); want a new valid index", exists, valid, rebuilt, oid)
	}
	checkOrderedClaim(t, s)
}

// A failed check is not remembered: once the index is built, by another
// process here, the same store's ordered claims work.
func TestOrderedClaimRechecksAfterFailure(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	orderedEvents(t, s)
	if _, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Minute, Ordered: true}); !errors.Is(err, postgres.ErrOrderedIndexMissing) {
		t.Fatalf("ordered claim without the index: %v", err)
	}
	other, err := postgres.New(s.Pool(), postgres.Config{Schema: s.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.MigrateOrdered(ctx); err != nil {
		t.Fatal(err)
	}
	checkOrderedClaim(t, s)
}

// When the oldest due events are all successors of one aggregate held back
// (its head waits out a long retry), the ordered claim walks the
// aggregates for their heads: every aggregate gets its turn, whatever its
// key, instead of the early-sorting ones being served again and again while
// they have events. 199 aggregates with 6 events each and claims of 10
// heads, each settled as delivered before the next: every aggregate's first
// event is claimed within 25 claims (20 to go round once), and each
// aggregate's events come in order.
func TestOrderedClaimServesEveryAggregateInTurn(t *testing.T) {
	s := pgtest.OrderedStore(t)
	ctx := context.Background()
	const (
		aggregates = 200
		perAgg     = 6
		limit      = 10
		within     = 25
	)
	ev := func(agg int) postbox.Event {
		return postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: fmt.Sprintf("a%03d", agg),
			EventType: "order.updated", Payload: []byte(`{}`)}
	}
	// a000's head, retried in an hour, and 100 successors: the oldest due
	// events, more than the claim's window.
	if err := s.Enqueue(ctx, ev(0)); err != nil {
		t.Fatal(err)
	}
	held, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "r", Limit: 1, Lease: time.Minute, Ordered: true})
	if err != nil || len(held) != 1 {
		t.Fatalf("claim a000's head: %d events, %v", len(held), err)
	}
	err = s.Driver().Settle(ctx, store.SettleParams{Owner: "r", Retry: []store.Retry{{ID: held[0].ID, AvailableAt: time.Now().Add(time.Hour), LastError: "503"}}})
	if err != nil {
		t.Fatal(err)
	}
	var batch []postbox.Event
	for range 100 {
		batch = append(batch, ev(0))
	}
	for range perAgg {
		for agg := 1; agg < aggregates; agg++ {
			batch = append(batch, ev(agg))
		}
	}
	if err := s.Enqueue(ctx, batch...); err != nil {
		t.Fatal(err)
	}
	firstClaim := map[string]int{}
	lastSeq := map[string]int64{}
	for n := 1; n <= within; n++ {
		got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "r", Limit: limit, Lease: time.Minute, Ordered: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != limit {
			t.Fatalf("claim %d took %d events, want %d", n, len(got), limit)
		}
		done := make([]uuid.UUID, 0, len(got))
		for _, d := range got {
			if d.AggregateID == "a000" {
				t.Fatalf("claim %d took a successor of a000, whose head waits for its retry", n)
			}
			if d.OutboxSeq <= lastSeq[d.AggregateID] {
				t.Fatalf("claim %d took %s seq %d after seq %d", n, d.AggregateID, d.OutboxSeq, lastSeq[d.AggregateID])
			}
			lastSeq[d.AggregateID] = d.OutboxSeq
			if _, seen := firstClaim[d.AggregateID]; !seen {
				firstClaim[d.AggregateID] = n
			}
			done = append(done, d.ID)
		}
		if err := s.Driver().Settle(ctx, store.SettleParams{Owner: "r", Done: done}); err != nil {
			t.Fatal(err)
		}
	}
	var waiting []string
	for agg := 1; agg < aggregates; agg++ {
		if id := fmt.Sprintf("a%03d", agg); firstClaim[id] == 0 {
			waiting = append(waiting, id)
		}
	}
	if len(waiting) > 0 {
		t.Fatalf("after %d claims of %d, %d aggregates never had an event claimed (from %s to %s): the walk for heads does not go round",
			within, limit, len(waiting), waiting[0], waiting[len(waiting)-1])
	}
	t.Logf("every aggregate had an event claimed within %d claims", slices.Max(slices.Collect(maps.Values(firstClaim))))
}
