package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// inspectTests are the cases of what a console reads: the dead-letter
// filters by aggregate and error text, GetByDedupKey and Relays.
var inspectTests = []struct {
	name string
	run  func(t *testing.T, s store.Outbox)
}{
	{"FailedFilterByAggregateAndErrorText", testFailedFilterAggregateError},
	{"GetByDedupKey", testGetByDedupKey},
	{"RelaysFromLeases", testRelays},
	{"LastSeqCountsWrittenEvents", testLastSeq},
}

func testLastSeq(t *testing.T, s store.Outbox) {
	last := func() int64 {
		t.Helper()
		n, err := s.LastSeq(ctxFor(t))
		if err != nil {
			t.Fatalf("last seq: %v", err)
		}
		return n
	}
	if n := last(); n != 0 {
		t.Fatalf("last seq of an empty outbox: %d, want 0", n)
	}
	a, b := event("1", 1), event("2", 1)
	enqueue(t, s, a, b)
	got := claim(t, s, store.ClaimParams{})
	settle(t, s, store.SettleParams{Done: ids(got)}) // deleted
	if n := last(); n != got[1].OutboxSeq {
		t.Fatalf("last seq after two events, delivered and deleted: %d, want %d", n, got[1].OutboxSeq)
	}
}

func testFailedFilterAggregateError(t *testing.T, s store.Outbox) {
	// Aggregates "0", "1", "2" of type "order".
	ids := fail(t, s, "order.paid", "status 503: upstream busy", "status 410: gone", "dial tcp: connection refused")
	list := func(f store.FailedFilter) []uuid.UUID {
		return recordIDs(listAll(t, s, store.FailedListParams{FailedFilter: f, Limit: 1}))
	}
	sameSet(t, "aggregate id 1", list(store.FailedFilter{AggregateType: "order", AggregateID: "1"}), ids[1:2])
	sameSet(t, "aggregate type invoice", list(store.FailedFilter{AggregateType: "invoice"}), nil)
	sameSet(t, "error contains status", list(store.FailedFilter{ErrorContains: "status "}), ids[:2])
	sameSet(t, "error text is no pattern", list(store.FailedFilter{ErrorContains: "5_3"}), nil)
	sameSet(t, "error text and aggregate", list(store.FailedFilter{ErrorContains: "status", AggregateID: "0"}), ids[:1])

	groups, err := s.FailedGroups(ctxFor(t), store.FailedGroupsParams{FailedFilter: store.FailedFilter{ErrorContains: "refused"}})
	if err != nil || groups.Scanned != 1 || len(groups.Groups) != 1 {
		t.Fatalf("groups of error text refused: %+v, %v; want the one event", groups, err)
	}

	n, err := s.FailedRetry(ctxFor(t), store.FailedRetryParams{FailedSelection: store.FailedSelection{
		FailedFilter: store.FailedFilter{ErrorContains: "refused"}}})
	if err != nil || n != 1 {
		t.Fatalf("retry by error text: %d, %v; want 1", n, err)
	}
	if r := get(t, s, ids[2]); r.Status != store.StatusPending {
		t.Fatalf("retried by error text: status %q", r.Status)
	}
	n, err = s.FailedPurge(ctxFor(t), store.FailedPurgeParams{FailedSelection: store.FailedSelection{
		FailedFilter: store.FailedFilter{AggregateID: "0"}}})
	if err != nil || n != 1 {
		t.Fatalf("purge by aggregate: %d, %v; want 1", n, err)
	}
	sameSet(t, "left failed", list(store.FailedFilter{}), ids[1:2])
}

func testGetByDedupKey(t *testing.T, s store.Outbox) {
	e, other := event("1", 1), event("2", 1)
	e.DedupKey = "order.created:1"
	enqueue(t, s, e, other)
	r, err := s.GetByDedupKey(ctxFor(t), e.DedupKey)
	if err != nil || r.ID != e.ID || r.DedupKey != e.DedupKey {
		t.Fatalf("get by dedup key: %+v, %v; want event %s", r, err, e.ID)
	}
	if _, err := s.GetByDedupKey(ctxFor(t), "order.created:2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown dedup key: %v, want ErrNotFound", err)
	}
	if _, err := s.GetByDedupKey(ctxFor(t), ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("empty dedup key (events without one): %v, want ErrNotFound", err)
	}
}

func testRelays(t *testing.T, s store.Outbox) {
	if got, err := s.Relays(ctxFor(t)); err != nil || len(got) != 0 {
		t.Fatalf("relays of an idle outbox: %+v, %v", got, err)
	}
	enqueue(t, s, event("1", 1), event("2", 1), event("3", 1), event("4", 1))
	start := time.Now()
	claim(t, s, store.ClaimParams{Owner: "relay-a", Limit: 1, Lease: time.Minute})
	claim(t, s, store.ClaimParams{Owner: "relay-a", Limit: 1, Lease: time.Hour})
	b := claim(t, s, store.ClaimParams{Owner: "relay-b", Limit: 2, Lease: time.Minute})
	settle(t, s, store.SettleParams{Owner: "relay-b", Done: []uuid.UUID{b[0].ID}})
	got, err := s.Relays(ctxFor(t))
	if err != nil || len(got) != 2 {
		t.Fatalf("relays: %+v, %v; want relay-a and relay-b", got, err)
	}
	a, rb := got[0], got[1]
	if a.Owner != "relay-a" || a.Events != 2 || rb.Owner != "relay-b" || rb.Events != 1 {
		t.Fatalf("relays: %+v; want relay-a with 2 events, relay-b with 1", got)
	}
	near := func(what string, at time.Time, lease time.Duration) {
		t.Helper()
		if d := at.Sub(start.Add(lease)); d < -time.Second || d > 30*time.Second {
			t.Fatalf("%s: %v, want about %v after %v", what, at, lease, start)
		}
	}
	near("relay-a first expiry", a.FirstExpiry, time.Minute)
	near("relay-a last expiry", a.LastExpiry, time.Hour)
	near("relay-b expiry", rb.LastExpiry, time.Minute)
}

// runInboxReader checks InboxList on fresh, migrated, empty stores.
func runInboxReader[TTx any](t *testing.T, newStore func(t *testing.T) Driver[TTx]) {
	t.Run("InboxListByStatusMostRecentFirst", func(t *testing.T) {
		s := newStore(t)
		ctx := ctxFor(t)
		take := func(id uuid.UUID) {
			t.Helper()
			res, err := s.InboxClaim(ctx, &store.InboxClaimParams{Event: store.InboxEvent{ID: id, EventType: "order.paid"}, Owner: "w", Lease: time.Minute})
			if err != nil || res.Status != store.InboxTaken {
				t.Fatalf("inbox claim %s: %+v, %v", id, res, err)
			}
			time.Sleep(2 * time.Millisecond) // distinct received times
		}
		var done, failed, pending []uuid.UUID
		for range 2 {
			id := uuid.New()
			take(id)
			if res, err := s.InboxComplete(ctx, &store.InboxCompleteParams{ID: id, Owner: "w"}, nil); err != nil || res.Status != store.InboxTaken {
				t.Fatalf("inbox complete: %+v, %v", res, err)
			}
			done = append([]uuid.UUID{id}, done...)
			time.Sleep(2 * time.Millisecond)
		}
		for i := range 2 {
			id := uuid.New()
			take(id)
			if res, err := s.InboxFail(ctx, &store.InboxFailParams{ID: id, Owner: "w", Error: "handler: <b>boom</b> " + id.String()[:i+1]}); err != nil || res.Status != store.InboxTaken {
				t.Fatalf("inbox fail: %+v, %v", res, err)
			}
			failed = append([]uuid.UUID{id}, failed...)
		}
		id := uuid.New()
		take(id)
		pending = append(pending, id)

		list := func(status string, limit int) []store.InboxRecord {
			t.Helper()
			got, err := s.InboxList(ctx, store.InboxListParams{Status: status, Limit: limit})
			if err != nil {
				t.Fatalf("inbox list %s: %v", status, err)
			}
			return got
		}
		ids := func(rs []store.InboxRecord) []uuid.UUID {
			out := make([]uuid.UUID, len(rs))
			for i, r := range rs {
				out[i] = r.ID
			}
			return out
		}
		for _, c := range []struct {
			status string
			want   []uuid.UUID
		}{{store.StatusDone, done}, {store.StatusFailed, failed}, {store.StatusPending, pending}} {
			got := list(c.status, 10)
			if !slices.Equal(ids(got), c.want) {
				t.Fatalf("inbox list %s: %v, want %v (most recent first)", c.status, ids(got), c.want)
			}
			for _, r := range got {
				if r.Status != c.status {
					t.Fatalf("inbox list %s: row %s has status %s", c.status, r.ID, r.Status)
				}
			}
		}
		if f := list(store.StatusFailed, 1); len(f) != 1 || f[0].ID != failed[0] || f[0].LastError == "" || f[0].EventType != "order.paid" {
			t.Fatalf("inbox list failed, limit 1: %+v; want the latest with its error", f)
		}
		for _, bad := range []store.InboxListParams{{Status: "gone", Limit: 1}, {Status: store.StatusDone}, {Status: store.StatusDone, Limit: store.InboxListLimitMax + 1}} {
			if _, err := s.InboxList(ctx, bad); err == nil {
				t.Fatalf("inbox list %+v: no error", bad)
			}
		}
	})
}
