// Package storetest is the conformance suite every postbox store passes.
// A store's own test calls Exercise once, with a Harness that returns a
// fresh, migrated store (tables empty) for each test: Exercise runs every
// suite, the outbox's, the endpoints', the presence table's and the
// inbox's (postboxtest/inboxtest), on the store's driver.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

// runOutbox runs the suite of store.Outbox.
func runOutbox(t *testing.T, newStore func(t *testing.T) store.Outbox) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Outbox)
	}{
		{"EnqueueThenClaimInOrder", testEnqueueThenClaim},
		{"ClaimIsExclusive", testClaimIsExclusive},
		{"ClaimSkipsFutureEvents", testClaimSkipsFuture},
		{"DedupKeyReportsDuplicate", testDedupKey},
		{"InvalidEventIsRefused", testInvalidEvent},
		{"SettleDoneRetryFailed", testSettle},
		{"SettleIgnoresOtherOwner", testSettleOtherOwner},
		{"DeliveredEventsAreDeletedUnlessKept", testSettleDeletes},
		{"ExtendLease", testExtendLease},
		{"ReleaseDoesNotCountAttempt", testRelease},
		{"ReleaseAndSettlePartOfAClaim", testReleaseAndSettlePartOfAClaim},
		{"ClaimAfterAPosition", testClaimAfter},
		{"SettleEndsClaims", testSettleEndsClaims},
		{"ReclaimExpiredLease", testReclaimExpired},
		{"OrderedClaimOneAtATimePerAggregate", testOrderedClaim},
		{"OrderedRetryHoldsBackOnlyItsAggregate", testOrderedRetry},
		{"OrderedClaimTakesRunsFromTheHead", testOrderedRuns},
		{"OrderedRunsModel", testOrderedRunsModel},
		{"ConcurrentClaimersNeverShare", testConcurrentClaimers},
		{"PurgeDone", testPurgeDone},
		{"StatsAndList", testStatsAndList},
		{"GetUnknownIsNotFound", testGetNotFound},
		{"ListenerWakesOnEnqueue", testListener},
		{"MigratedSchemaChecks", testCheckSchema},
		{"OldestPendingAgeIgnoresLeasedEvents", testOldestPendingAge},
		{"StatsUpToStopsEachCount", testStatsUpTo},
		{"SettleStoresAnyErrorText", testUnsafeErrorText},
		{"ExtendLeaseReportsLostLeases", testExtendLeaseLost},
	}
	tests = append(tests, deadLetterTests...)
	tests = append(tests, inspectTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t))
		})
	}
}

const lease = 30 * time.Second

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// event returns a valid event of aggregate agg numbered n.
func event(agg string, n int) postbox.Event {
	return postbox.Event{
		ID:            postbox.NewID(),
		AggregateType: "order",
		AggregateID:   agg,
		EventType:     "order.updated",
		Payload:       []byte(fmt.Sprintf(`{"aggregate": %q, "n": %d}`, agg, n)),
	}
}

func enqueue(t *testing.T, s store.Outbox, events ...postbox.Event) {
	t.Helper()
	if err := s.Enqueue(ctxFor(t), events...); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
}

func claim(t *testing.T, s store.Outbox, p store.ClaimParams) []store.ClaimedEvent {
	t.Helper()
	if p.Owner == "" {
		p.Owner = "relay-a"
	}
	if p.Lease == 0 {
		p.Lease = lease
	}
	if p.Limit == 0 {
		p.Limit = 100
	}
	got, err := s.Claim(ctxFor(t), p)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return got
}

func settle(t *testing.T, s store.Outbox, p store.SettleParams) {
	t.Helper()
	if p.Owner == "" {
		p.Owner = "relay-a"
	}
	if err := s.Settle(ctxFor(t), p); err != nil {
		t.Fatalf("settle: %v", err)
	}
}

func get(t *testing.T, s store.Outbox, id uuid.UUID) store.Record {
	t.Helper()
	r, err := s.Get(ctxFor(t), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return r
}

func ids(ds []store.ClaimedEvent) []uuid.UUID {
	out := make([]uuid.UUID, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("stored payload is not JSON: %q", got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("payload: got %s, want %s", got, want)
	}
}

func testEnqueueThenClaim(t *testing.T, s store.Outbox) {
	e1, e2, e3 := event("1", 1), event("2", 1), event("1", 2)
	e2.Headers = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	enqueue(t, s, e1, e2)
	enqueue(t, s, e3)
	got := claim(t, s, store.ClaimParams{})
	if want := []uuid.UUID{e1.ID, e2.ID, e3.ID}; !reflect.DeepEqual(ids(got), want) {
		t.Fatalf("claimed %v, want %v in enqueue order", ids(got), want)
	}
	d := got[1]
	if d.Attempt != 1 || d.EventType != e2.EventType || d.AggregateType != "order" || d.AggregateID != "2" {
		t.Fatalf("claimed delivery %+v does not match event %+v", d, e2)
	}
	sameJSON(t, d.Payload, e2.Payload)
	if d.Headers["traceparent"] != e2.Headers["traceparent"] {
		t.Fatalf("headers: got %v, want %v", d.Headers, e2.Headers)
	}
	if !(got[0].OutboxSeq < got[1].OutboxSeq && got[1].OutboxSeq < got[2].OutboxSeq) {
		t.Fatalf("sequence numbers not increasing: %d %d %d", got[0].OutboxSeq, got[1].OutboxSeq, got[2].OutboxSeq)
	}
	if r := get(t, s, e1.ID); r.Status != store.StatusProcessing || r.LeaseOwner != "relay-a" || r.Attempts != 1 {
		t.Fatalf("claimed row: status %q owner %q attempts %d", r.Status, r.LeaseOwner, r.Attempts)
	}
	if again := claim(t, s, store.ClaimParams{Owner: "relay-b"}); len(again) != 0 {
		t.Fatalf("claimed %d leased events again", len(again))
	}
}

func testClaimIsExclusive(t *testing.T, s store.Outbox) {
	for i := range 10 {
		enqueue(t, s, event(fmt.Sprint(i), 0))
	}
	a := claim(t, s, store.ClaimParams{Owner: "relay-a", Limit: 4})
	b := claim(t, s, store.ClaimParams{Owner: "relay-b", Limit: 100})
	if len(a) != 4 || len(b) != 6 {
		t.Fatalf("claimed %d and %d, want 4 and 6", len(a), len(b))
	}
	seen := map[uuid.UUID]bool{}
	for _, d := range append(a, b...) {
		if seen[d.ID] {
			t.Fatalf("event %s claimed twice", d.ID)
		}
		seen[d.ID] = true
	}
}

func testClaimSkipsFuture(t *testing.T, s store.Outbox) {
	later := event("1", 1)
	later.AvailableAt = time.Now().Add(time.Hour)
	now := event("2", 1)
	enqueue(t, s, later, now)
	got := claim(t, s, store.ClaimParams{})
	if len(got) != 1 || got[0].ID != now.ID {
		t.Fatalf("claimed %v, want only %s", ids(got), now.ID)
	}
}

func testDedupKey(t *testing.T, s store.Outbox) {
	first := event("1", 1)
	first.DedupKey = "order.created:1"
	enqueue(t, s, first)
	again, other := event("1", 1), event("2", 1)
	again.DedupKey = first.DedupKey
	err := s.Enqueue(ctxFor(t), again, other)
	if !errors.Is(err, postbox.ErrDuplicate) {
		t.Fatalf("second event with dedup key: got %v, want ErrDuplicate", err)
	}
	var dup *postbox.DuplicateError
	if !errors.As(err, &dup) || len(dup.Keys) != 1 || dup.Keys[0] != first.DedupKey {
		t.Fatalf("duplicate error %v does not name key %q", err, first.DedupKey)
	}
	if _, err := s.Get(ctxFor(t), again.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the duplicate was stored: %v", err)
	}
	get(t, s, other.ID) // written beside the duplicate
}

func testInvalidEvent(t *testing.T, s store.Outbox) {
	bad := event("1", 1)
	bad.Payload = []byte(`{"amount": 12`)
	if err := s.Enqueue(ctxFor(t), bad); err == nil {
		t.Fatal("malformed JSON payload was accepted")
	}
	noType := event("1", 2)
	noType.EventType = ""
	if err := s.Enqueue(ctxFor(t), noType); err == nil {
		t.Fatal("event without a type was accepted")
	}
	if st, err := s.Stats(ctxFor(t)); err != nil || st.Pending != 0 {
		t.Fatalf("after refused events: stats %+v, %v; want nothing pending", st, err)
	}
}

func testSettle(t *testing.T, s store.Outbox) {
	ok, again, dead := event("1", 1), event("2", 1), event("3", 1)
	enqueue(t, s, ok, again, dead)
	claim(t, s, store.ClaimParams{})
	retryAt := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	settle(t, s, store.SettleParams{
		Done:     []uuid.UUID{ok.ID},
		Retry:    []store.Retry{{ID: again.ID, AvailableAt: retryAt, LastError: "status 503"}},
		Failed:   []store.Failure{{ID: dead.ID, LastError: "status 410"}},
		KeepDone: true,
	})
	if r := get(t, s, ok.ID); r.Status != store.StatusDone || r.ProcessedAt.IsZero() || r.LeaseOwner != "" {
		t.Fatalf("done row: %+v", r)
	}
	r := get(t, s, again.ID)
	if r.Status != store.StatusPending || r.Retries != 1 || r.LastError != "status 503" || !r.AvailableAt.Equal(retryAt) {
		t.Fatalf("retried row: status %q retries %d error %q available %v (want %v)", r.Status, r.Retries, r.LastError, r.AvailableAt, retryAt)
	}
	if r := get(t, s, dead.ID); r.Status != store.StatusFailed || r.LastError != "status 410" || r.Retries != 1 {
		t.Fatalf("failed row: status %q retries %d error %q", r.Status, r.Retries, r.LastError)
	}
	if got := claim(t, s, store.ClaimParams{}); len(got) != 0 {
		t.Fatalf("claimed %v before the retry time", ids(got))
	}
	// A retry that is due is claimed again as attempt 2.
	settleAgain := event("4", 1)
	enqueue(t, s, settleAgain)
	claim(t, s, store.ClaimParams{})
	settle(t, s, store.SettleParams{Retry: []store.Retry{{ID: settleAgain.ID, AvailableAt: time.Now().Add(-time.Second), LastError: "timeout"}}})
	got := claim(t, s, store.ClaimParams{})
	if len(got) != 1 || got[0].ID != settleAgain.ID || got[0].Attempt != 2 {
		t.Fatalf("due retry: claimed %+v, want %s as attempt 2", got, settleAgain.ID)
	}
}

func testSettleDeletes(t *testing.T, s store.Outbox) {
	gone, next := event("1", 1), event("2", 1)
	enqueue(t, s, gone)
	claim(t, s, store.ClaimParams{})
	settle(t, s, store.SettleParams{Done: []uuid.UUID{gone.ID}})
	if _, err := s.Get(ctxFor(t), gone.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delivered event without KeepDone: %v, want it deleted", err)
	}
	enqueue(t, s, next)
	if got := claim(t, s, store.ClaimParams{}); len(got) != 1 || got[0].ID != next.ID {
		t.Fatalf("after a settle: claimed %v, want %s", ids(got), next.ID)
	}
	if st, err := s.Stats(ctxFor(t)); err != nil || st.Processing != 1 || st.Pending != 0 || st.Done != 0 {
		t.Fatalf("stats %+v, %v", st, err)
	}
}

func testSettleOtherOwner(t *testing.T, s store.Outbox) {
	e := event("1", 1)
	enqueue(t, s, e)
	claim(t, s, store.ClaimParams{Owner: "relay-a"})
	settle(t, s, store.SettleParams{Owner: "relay-b",
		Retry:  []store.Retry{{ID: e.ID, AvailableAt: time.Now(), LastError: "x"}},
		Failed: []store.Failure{{ID: e.ID, LastError: "y"}}})
	if r := get(t, s, e.ID); r.Status != store.StatusProcessing || r.LeaseOwner != "relay-a" {
		t.Fatalf("another relay's retry/failure changed the row: %+v", r)
	}
	// A delivery confirmed by anyone is done.
	settle(t, s, store.SettleParams{Owner: "relay-b", Done: []uuid.UUID{e.ID}, KeepDone: true})
	if r := get(t, s, e.ID); r.Status != store.StatusDone {
		t.Fatalf("done from another relay: status %q", r.Status)
	}
}

func testExtendLease(t *testing.T, s store.Outbox) {
	e := event("1", 1)
	enqueue(t, s, e)
	claim(t, s, store.ClaimParams{Lease: time.Second})
	before := get(t, s, e.ID).LeaseExpiresAt
	kept, err := s.ExtendLease(ctxFor(t), "relay-a", []uuid.UUID{e.ID}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0] != e.ID {
		t.Fatalf("extend returned %v, want the one event held", kept)
	}
	after := get(t, s, e.ID).LeaseExpiresAt
	if after.Sub(before) < 50*time.Minute {
		t.Fatalf("lease not extended: %v -> %v", before, after)
	}
	if kept, err := s.ExtendLease(ctxFor(t), "relay-b", []uuid.UUID{e.ID}, 2*time.Hour); err != nil || len(kept) != 0 {
		t.Fatalf("another relay's extend: %v, %v; want no event", kept, err)
	}
	if get(t, s, e.ID).LeaseExpiresAt != after {
		t.Fatal("another relay extended the lease")
	}
}

func testRelease(t *testing.T, s store.Outbox) {
	e := event("1", 1)
	enqueue(t, s, e)
	claim(t, s, store.ClaimParams{})
	if err := s.Release(ctxFor(t), "relay-a", []uuid.UUID{e.ID}); err != nil {
		t.Fatal(err)
	}
	if r := get(t, s, e.ID); r.Status != store.StatusPending || r.Attempts != 0 || r.LeaseOwner != "" {
		t.Fatalf("released row: %+v", r)
	}
	got := claim(t, s, store.ClaimParams{Owner: "relay-b"})
	if len(got) != 1 || got[0].Attempt != 1 {
		t.Fatalf("released event claimed as %+v, want attempt 1", got)
	}
}

// A claim's events leave the relay's leases one by one: a released event
// can be claimed by another relay while the rest of its claim stays leased,
// and once every event is released or settled nothing is left leased.
// testClaimAfter: a claim with After takes only the events after that
// position in claim order, and leaves those behind it to a claim without
// After; deliveries carry when they fell due, their claim position.
func testClaimAfter(t *testing.T, s store.Outbox) {
	early, a, b := event("early", 1), event("a", 1), event("b", 1)
	early.AvailableAt = time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	enqueue(t, s, early, a, b)
	after := store.ClaimPosition{AvailableAt: time.Now().Add(-time.Minute)}
	got := claim(t, s, store.ClaimParams{Limit: 10, After: after})
	if len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID {
		t.Fatalf("claim after a minute ago took %+v, want the two events due now", got)
	}
	for _, d := range got {
		if !after.Less(store.PositionOf(d)) || time.Since(d.AvailableAt) > time.Minute {
			t.Fatalf("claimed event due at %v, want the time it was enqueued", d.AvailableAt)
		}
	}
	got = claim(t, s, store.ClaimParams{Limit: 10})
	if len(got) != 1 || got[0].ID != early.ID {
		t.Fatalf("claim from the head took %+v, want the event due an hour ago", got)
	}
	if !got[0].AvailableAt.Equal(early.AvailableAt) || !store.PositionOf(got[0]).Less(after) {
		t.Fatalf("the early event due at %v, want %v", got[0].AvailableAt, early.AvailableAt)
	}
}

// testSettleEndsClaims: the events of a claim settled while the rest of it
// is under way hold nothing back, and the settle that ends the claim
// (SettleParams.Ended) leaves no lease behind.
func testSettleEndsClaims(t *testing.T, s store.Outbox) {
	a, b, c := event("a", 1), event("b", 1), event("c", 1)
	enqueue(t, s, a, b, c)
	got := claim(t, s, store.ClaimParams{Limit: 3})
	if len(got) != 3 || got[0].Lease != got[1].Lease || got[1].Lease != got[2].Lease {
		t.Fatalf("claimed %+v, want three events of one claim", got)
	}
	settle(t, s, store.SettleParams{Done: []uuid.UUID{a.ID}, KeepDone: true})
	if r := get(t, s, a.ID); r.Status != store.StatusDone || r.LeaseOwner != "" || r.Attempts != 1 {
		t.Fatalf("the event delivered while its claim goes on: %+v, want done, unleased, one attempt", r)
	}
	if r := get(t, s, c.ID); r.LeaseOwner != "relay-a" {
		t.Fatalf("an event of the claim not settled: %+v, want leased to relay-a", r)
	}
	relays, err := s.Relays(ctxFor(t))
	if err != nil || len(relays) != 1 || relays[0].Events != 2 {
		t.Fatalf("relays while the claim goes on: %+v, %v; want relay-a with 2 events", relays, err)
	}
	settle(t, s, store.SettleParams{Done: []uuid.UUID{b.ID, c.ID}, KeepDone: true, Ended: []int64{got[0].Lease}})
	if relays, err := s.Relays(ctxFor(t)); err != nil || len(relays) != 0 {
		t.Fatalf("relays once the claim ended: %+v, %v; want none", relays, err)
	}
	if st, err := s.Stats(ctxFor(t)); err != nil || st.Processing != 0 || st.Done != 3 {
		t.Fatalf("stats once the claim ended: %+v, %v; want 3 done, none processing", st, err)
	}
}

func testReleaseAndSettlePartOfAClaim(t *testing.T, s store.Outbox) {
	a, b, c := event("a", 1), event("b", 1), event("c", 1)
	enqueue(t, s, a, b, c)
	if got := claim(t, s, store.ClaimParams{Limit: 3}); len(got) != 3 {
		t.Fatalf("claimed %d events, want 3", len(got))
	}
	if err := s.Release(ctxFor(t), "relay-a", []uuid.UUID{a.ID}); err != nil {
		t.Fatal(err)
	}
	got := claim(t, s, store.ClaimParams{Owner: "relay-b", Limit: 3})
	if len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("relay-b claimed %+v, want the released event alone", got)
	}
	settle(t, s, store.SettleParams{Done: []uuid.UUID{b.ID}})
	if r := get(t, s, c.ID); r.LeaseOwner != "relay-a" {
		t.Fatalf("the event neither released nor settled: %+v, want still leased to relay-a", r)
	}
	if err := s.Release(ctxFor(t), "relay-a", []uuid.UUID{c.ID}); err != nil {
		t.Fatal(err)
	}
	if r := get(t, s, c.ID); r.LeaseOwner != "" || r.Status != store.StatusPending {
		t.Fatalf("the last event of the claim released: %+v, want pending, unleased", r)
	}
	if got := claim(t, s, store.ClaimParams{Owner: "relay-c", Limit: 3}); len(got) != 1 || got[0].ID != c.ID {
		t.Fatalf("relay-c claimed %+v, want the last released event", got)
	}
}

func testReclaimExpired(t *testing.T, s store.Outbox) {
	e, last := event("1", 1), event("2", 1)
	enqueue(t, s, e, last)
	claim(t, s, store.ClaimParams{Lease: time.Millisecond})
	time.Sleep(50 * time.Millisecond)
	got, err := s.ReclaimExpired(ctxFor(t), store.ReclaimParams{MaxAttempts: 25})
	if want := []store.Reclaimed{{Owner: "relay-a", Events: 2}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("reclaimed %+v, %v; want %+v", got, err, want)
	}
	if r := get(t, s, e.ID); r.Status != store.StatusPending || r.Retries != 1 || r.LastError == "" {
		t.Fatalf("reclaimed row: %+v", r)
	}
	again := claim(t, s, store.ClaimParams{Lease: time.Millisecond, Limit: 2})
	if len(again) != 2 || again[0].Attempt != 2 {
		t.Fatalf("reclaimed events claimed as %+v", again)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := s.ReclaimExpired(ctxFor(t), store.ReclaimParams{MaxAttempts: 2}); err != nil {
		t.Fatal(err)
	}
	if r := get(t, s, e.ID); r.Status != store.StatusFailed || r.Retries != 2 {
		t.Fatalf("event out of attempts after an expired lease: status %q retries %d", r.Status, r.Retries)
	}
}

func testOrderedClaim(t *testing.T, s store.Outbox) {
	a1, b1, a2, a3, b2 := event("A", 1), event("B", 1), event("A", 2), event("A", 3), event("B", 2)
	enqueue(t, s, a1, b1, a2)
	enqueue(t, s, a3, b2)
	ordered := store.ClaimParams{Ordered: true}
	got := claim(t, s, ordered)
	if want := []uuid.UUID{a1.ID, b1.ID}; !reflect.DeepEqual(ids(got), want) {
		t.Fatalf("ordered claim: got %v, want the heads %v", ids(got), want)
	}
	if got := claim(t, s, store.ClaimParams{Ordered: true, Owner: "relay-b"}); len(got) != 0 {
		t.Fatalf("ordered claim while heads are in flight: got %v", ids(got))
	}
	settle(t, s, store.SettleParams{Done: []uuid.UUID{a1.ID}})
	got = claim(t, s, store.ClaimParams{Ordered: true, Owner: "relay-b"})
	if want := []uuid.UUID{a2.ID}; !reflect.DeepEqual(ids(got), want) {
		t.Fatalf("after A1 done: got %v, want %v", ids(got), want)
	}
}

func testOrderedRetry(t *testing.T, s store.Outbox) {
	a1, a2, b1, b2 := event("A", 1), event("A", 2), event("B", 1), event("B", 2)
	enqueue(t, s, a1, a2, b1, b2)
	claim(t, s, store.ClaimParams{Ordered: true})
	settle(t, s, store.SettleParams{
		Done:  []uuid.UUID{b1.ID},
		Retry: []store.Retry{{ID: a1.ID, AvailableAt: time.Now().Add(time.Hour), LastError: "503"}},
	})
	got := claim(t, s, store.ClaimParams{Ordered: true})
	if want := []uuid.UUID{b2.ID}; !reflect.DeepEqual(ids(got), want) {
		t.Fatalf("with A1 waiting for a retry: got %v, want only %v", ids(got), want)
	}
	// Unordered claims do not wait.
	got = claim(t, s, store.ClaimParams{})
	if want := []uuid.UUID{a2.ID}; !reflect.DeepEqual(ids(got), want) {
		t.Fatalf("unordered claim: got %v, want %v", ids(got), want)
	}
}

func testConcurrentClaimers(t *testing.T, s store.Outbox) {
	const n = 400
	batch := make([]postbox.Event, n)
	for i := range batch {
		batch[i] = event(fmt.Sprint(i%37), i)
	}
	enqueue(t, s, batch...)
	// Stores without concurrent claimers must still never share an event:
	// their claims take turns.
	const claimers = 4
	var mu sync.Mutex
	count := map[uuid.UUID]int{}
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Go(func() {
			owner := fmt.Sprintf("relay-%d", c)
			for {
				got, err := s.Claim(context.Background(), store.ClaimParams{Owner: owner, Limit: 7, Lease: lease})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, d := range got {
					count[d.ID]++
				}
				mu.Unlock()
				if err := s.Settle(context.Background(), store.SettleParams{Owner: owner, Done: ids(got)}); err != nil {
					t.Errorf("settle: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(count) != n {
		t.Fatalf("claimed %d distinct events, want %d", len(count), n)
	}
	for id, c := range count {
		if c != 1 {
			t.Fatalf("event %s claimed %d times", id, c)
		}
	}
}

func testPurgeDone(t *testing.T, s store.Outbox) {
	old, pending := event("1", 1), event("2", 1)
	enqueue(t, s, old, pending)
	claim(t, s, store.ClaimParams{Limit: 1})
	settle(t, s, store.SettleParams{Done: []uuid.UUID{old.ID}, KeepDone: true})
	n, err := purgeDone(ctxFor(t), s, time.Now().Add(-time.Hour), 100)
	if err != nil || n != 0 {
		t.Fatalf("purge of rows younger than the retention: %d, %v", n, err)
	}
	n, err = purgeDone(ctxFor(t), s, time.Now().Add(time.Second), 100)
	if err != nil || n != 1 {
		t.Fatalf("purge: %d, %v; want 1", n, err)
	}
	if _, err := s.Get(ctxFor(t), old.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("purged row still there: %v", err)
	}
	get(t, s, pending.ID)
}

func testStatsAndList(t *testing.T, s store.Outbox) {
	st, err := s.Stats(ctxFor(t))
	if err != nil || st != (store.StatusCounts{}) {
		t.Fatalf("empty store: %+v, %v", st, err)
	}
	a, b, c, d := event("1", 1), event("2", 1), event("3", 1), event("4", 1)
	enqueue(t, s, a, b, c, d)
	claim(t, s, store.ClaimParams{Limit: 3})
	settle(t, s, store.SettleParams{Done: []uuid.UUID{a.ID}, Failed: []store.Failure{{ID: b.ID, LastError: "gone"}}, KeepDone: true})
	time.Sleep(20 * time.Millisecond)
	st, err = s.Stats(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending != 1 || st.Processing != 1 || st.Done != 1 || st.Failed != 1 {
		t.Fatalf("stats: %+v", st)
	}
	if st.OldestPendingAge <= 0 || st.OldestPendingAge > time.Minute {
		t.Fatalf("oldest pending age: %v", st.OldestPendingAge)
	}
	failed, err := s.List(ctxFor(t), store.ListParams{Status: store.StatusFailed, Limit: 10})
	if err != nil || len(failed) != 1 || failed[0].ID != b.ID || failed[0].LastError != "gone" {
		t.Fatalf("list failed: %+v, %v", failed, err)
	}
}

func testGetNotFound(t *testing.T, s store.Outbox) {
	if _, err := s.Get(ctxFor(t), postbox.NewID()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown id: got %v, want ErrNotFound", err)
	}
}

func testListener(t *testing.T, s store.Outbox) {
	ctx, cancel := context.WithCancel(ctxFor(t))
	ready := make(chan store.Listening, 1)
	woke := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.Listen(ctx, func(l store.Listening) { ready <- l }, func() {
			select {
			case woke <- struct{}{}:
			default:
			}
		})
	}()
	var l store.Listening
	select {
	case l = <-ready:
	case err := <-done:
		if errors.Is(err, store.ErrCannotListen) {
			cancel()
			return // a store without wake-ups: relays poll
		}
		t.Fatalf("listen: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("listener not ready")
	}
	if l.Channel == "" {
		t.Error("Listening.Channel is empty: the relay cannot log what it listens on")
	}
	if l.Dozer != nil {
		// Producers notify a dozing relay only.
		for dozed := false; !dozed; {
			var err error
			if dozed, err = l.Dozer.Doze(ctx); err != nil {
				t.Fatalf("doze: %v", err)
			}
		}
	}
	enqueue(t, s, event("1", 1))
	select {
	case <-woke:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up after an enqueue")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("listen after cancel: %v", err)
	}
}

func testCheckSchema(t *testing.T, s store.Outbox) {
	if err := s.CheckSchema(ctxFor(t), store.SchemaParams{}); err != nil {
		t.Fatalf("a migrated store: %v", err)
	}
	err := s.CheckSchema(ctxFor(t), store.SchemaParams{Ordered: true})
	if err != nil && !errors.Is(err, store.ErrOrderedNotReady) {
		t.Fatalf("a migrated store, ordered: %v; want nil or ErrOrderedNotReady", err)
	}
	if s.String() == "" {
		t.Error("String is empty: the relay cannot log which store it drains")
	}
}

func testOldestPendingAge(t *testing.T, s store.Outbox) {
	old, young := event("1", 1), event("2", 1)
	enqueue(t, s, old)
	time.Sleep(400 * time.Millisecond)
	enqueue(t, s, young)
	claim(t, s, store.ClaimParams{Limit: 1}) // the old one
	st, err := s.Stats(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending != 1 || st.Processing != 1 {
		t.Fatalf("stats: %+v, want 1 pending and 1 processing", st)
	}
	if st.OldestPendingAge <= 0 || st.OldestPendingAge >= 300*time.Millisecond {
		t.Fatalf("oldest pending age %v: want the age of the event not claimed (under 300ms), not of the leased one", st.OldestPendingAge)
	}
	claim(t, s, store.ClaimParams{Limit: 1})
	if st, err = s.Stats(ctxFor(t)); err != nil || st.OldestPendingAge != 0 {
		t.Fatalf("every event leased: oldest pending age %v, %v; want 0", st.OldestPendingAge, err)
	}
}

func testUnsafeErrorText(t *testing.T, s store.Outbox) {
	retried, failed := event("1", 1), event("2", 1)
	enqueue(t, s, retried, failed)
	claim(t, s, store.ClaimParams{})
	text := "status 500: bad\x00body \xff\xfe end"
	settle(t, s, store.SettleParams{
		Retry:  []store.Retry{{ID: retried.ID, AvailableAt: time.Now().Add(time.Hour), LastError: text}},
		Failed: []store.Failure{{ID: failed.ID, LastError: text}},
	})
	for _, id := range []uuid.UUID{retried.ID, failed.ID} {
		r := get(t, s, id)
		if r.LastError != store.CleanErrorText(text) {
			t.Fatalf("last_error %q, want %q", r.LastError, store.CleanErrorText(text))
		}
	}
	if r := get(t, s, failed.ID); r.Status != store.StatusFailed {
		t.Fatalf("failed event: status %q", r.Status)
	}
}

func testExtendLeaseLost(t *testing.T, s store.Outbox) {
	lost, kept := event("1", 1), event("2", 1)
	enqueue(t, s, lost)
	claim(t, s, store.ClaimParams{Lease: time.Millisecond})
	time.Sleep(50 * time.Millisecond)
	if _, err := s.ReclaimExpired(ctxFor(t), store.ReclaimParams{MaxAttempts: 25}); err != nil {
		t.Fatal(err)
	}
	claim(t, s, store.ClaimParams{Owner: "relay-b"}) // takes the lost one
	enqueue(t, s, kept)
	claim(t, s, store.ClaimParams{})
	got, err := s.ExtendLease(ctxFor(t), "relay-a", []uuid.UUID{lost.ID, kept.ID}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != kept.ID {
		t.Fatalf("extend returned %v, want only %v (the other was reclaimed)", got, kept.ID)
	}
	if r := get(t, s, lost.ID); r.LeaseOwner != "relay-b" {
		t.Fatalf("lost event leased to %q, want relay-b", r.LeaseOwner)
	}
}

func testStatsUpTo(t *testing.T, s store.Outbox) {
	if _, err := s.StatsUpTo(ctxFor(t), 0); err == nil {
		t.Fatal("StatsUpTo accepted a limit of 0")
	}
	first := event("0", 0)
	enqueue(t, s, first)
	time.Sleep(300 * time.Millisecond)
	var rest []postbox.Event
	for i := 1; i < 8; i++ {
		rest = append(rest, event(fmt.Sprint(i), i))
	}
	enqueue(t, s, rest...)
	claim(t, s, store.ClaimParams{Limit: 1}) // the first, the oldest
	got := claim(t, s, store.ClaimParams{Limit: 3, Owner: "relay-b"})
	failures := make([]store.Failure, len(got))
	for i, d := range got {
		failures[i] = store.Failure{ID: d.ID, LastError: "gone"}
	}
	settle(t, s, store.SettleParams{Owner: "relay-b", Failed: failures})
	// Now: 4 pending, 1 processing, 3 failed.
	exact, err := s.StatsUpTo(ctxFor(t), 100)
	if err != nil {
		t.Fatal(err)
	}
	if exact.Pending != 4 || exact.Processing != 1 || exact.Failed != 3 || exact.Done != 0 {
		t.Fatalf("StatsUpTo(100): %+v; want 4 pending, 1 processing, 3 failed", exact)
	}
	if exact.OldestPendingAge <= 0 || exact.OldestPendingAge >= 250*time.Millisecond {
		t.Fatalf("StatsUpTo oldest pending age %v: want the first in line (under 250ms), not the leased one", exact.OldestPendingAge)
	}
	capped, err := s.StatsUpTo(ctxFor(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	if capped.Pending != 2 || capped.Processing != 1 || capped.Failed != 2 {
		t.Fatalf("StatsUpTo(2): %+v; want each count stopped at 2 (2 pending, 1 processing, 2 failed)", capped)
	}
}

// purgeDone is one retention step without an archive: Expire's rows
// removed, events and dedup keys together.
func purgeDone(ctx context.Context, s store.Source, before time.Time, limit int) (int, error) {
	res, err := s.Expire(ctx, store.ExpireParams{Before: before, Limit: limit})
	return res.Events + res.Keys, err
}
