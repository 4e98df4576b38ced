package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

// deadLetterTests are the cases of the dead-letter operations
// (store.DeadLetters) and of StatsByType.
var deadLetterTests = []struct {
	name string
	run  func(t *testing.T, s store.Outbox)
}{
	{"FailedListFilters", testFailedListFilters},
	{"FailedListPagesAreStable", testFailedListPages},
	{"FailedRetryByIDs", testFailedRetryByIDs},
	{"FailedRetryByType", testFailedRetryByType},
	{"FailedRetryByGroup", testFailedRetryByGroup},
	{"FailedRetryAll", testFailedRetryAll},
	{"FailedRetryRefusesEmptySelection", testFailedRetryEmpty},
	{"FailedRetryInBatches", testFailedRetryBatches},
	{"FailedRetryInterruptedThenResumed", testFailedRetryInterrupted},
	{"FailedRetryDoesNotChaseNewFailures", testFailedRetryNoChase},
	{"FailedPurge", testFailedPurge},
	{"FailedPurgeByGroupInBatches", testFailedPurgeGroup},
	{"FailedGroups", testFailedGroups},
	{"StatsByType", testStatsByType},
	{"EndpointFailedList", testEndpointFailedList},
	{"EndpointFailedGroups", testEndpointFailedGroups},
	{"EndpointFailedRetry", testEndpointFailedRetry},
	{"EndpointFailedPurge", testEndpointFailedPurge},
}

// fail writes len(errs) events of type eventType and makes them failed in
// one settle, the i-th with the error errs[i]; it returns their ids in
// write order. Nothing else may be pending when it is called.
func fail(t *testing.T, s store.Outbox, eventType string, errs ...string) []uuid.UUID {
	t.Helper()
	events := make([]postbox.Event, len(errs))
	for i := range events {
		events[i] = event(fmt.Sprint(i), i)
		events[i].EventType = eventType
	}
	enqueue(t, s, events...)
	got := claim(t, s, store.ClaimParams{Limit: len(errs)})
	if len(got) != len(errs) {
		t.Fatalf("claimed %d events to fail, want %d", len(got), len(errs))
	}
	failures := make([]store.Failure, len(events))
	out := make([]uuid.UUID, len(events))
	for i, e := range events {
		failures[i] = store.Failure{ID: e.ID, LastError: errs[i]}
		out[i] = e.ID
	}
	settle(t, s, store.SettleParams{Failed: failures})
	// Settles a few milliseconds apart fail at distinct times.
	time.Sleep(5 * time.Millisecond)
	return out
}

// repeat is n copies of text.
func repeat(text string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = text
	}
	return out
}

func listAll(t *testing.T, s store.Outbox, p store.FailedListParams) []store.Record {
	t.Helper()
	var out []store.Record
	for {
		page, err := s.FailedList(ctxFor(t), p)
		if err != nil {
			t.Fatalf("failed list: %v", err)
		}
		out = append(out, page.Events...)
		if page.Next.IsZero() {
			return out
		}
		p.After = page.Next
	}
}

func recordIDs(rs []store.Record) []uuid.UUID {
	out := make([]uuid.UUID, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// sameSet fails t unless got and want hold the same ids, in any order.
func sameSet(t *testing.T, what string, got, want []uuid.UUID) {
	t.Helper()
	g := slices.Clone(got)
	w := slices.Clone(want)
	cmp := func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) }
	slices.SortFunc(g, cmp)
	slices.SortFunc(w, cmp)
	if !slices.Equal(g, w) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func failedCount(t *testing.T, s store.Outbox) int64 {
	t.Helper()
	st, err := s.Stats(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	return st.Failed
}

func testFailedListFilters(t *testing.T, s store.Outbox) {
	older := fail(t, s, "order.created", "status 500", "status 500")
	newer := fail(t, s, "order.paid", "status 410", "status 410", "status 410")
	pending := event("p", 1)
	enqueue(t, s, pending) // not failed: never listed

	all := listAll(t, s, store.FailedListParams{})
	if want := append(slices.Clone(newer), older...); len(all) != len(want) {
		t.Fatalf("listed %d failed events, want %d", len(all), len(want))
	}
	r := all[0]
	if r.Status != store.StatusFailed || r.LastError != "status 410" || r.EventType != "order.paid" || r.ProcessedAt.IsZero() || r.Attempts != 1 || len(r.Payload) == 0 {
		t.Fatalf("listed record: %+v", r)
	}
	sameSet(t, "the most recent failures first", recordIDs(all[:3]), newer)

	byType := listAll(t, s, store.FailedListParams{FailedFilter: store.FailedFilter{EventType: "order.created"}})
	sameSet(t, "filter by type", recordIDs(byType), older)

	cut := get(t, s, newer[0]).ProcessedAt
	since := listAll(t, s, store.FailedListParams{FailedFilter: store.FailedFilter{FailedSince: cut}})
	sameSet(t, "failed since", recordIDs(since), newer)
	before := listAll(t, s, store.FailedListParams{FailedFilter: store.FailedFilter{FailedBefore: cut}})
	sameSet(t, "failed before", recordIDs(before), older)
	none := listAll(t, s, store.FailedListParams{FailedFilter: store.FailedFilter{EventType: "order.paid", FailedBefore: cut}})
	if len(none) != 0 {
		t.Fatalf("type and time filters together: listed %v, want none", recordIDs(none))
	}
	if _, err := s.FailedList(ctxFor(t), store.FailedListParams{Limit: store.FailedListLimitMax + 1}); err == nil {
		t.Fatal("a limit above FailedListLimitMax was accepted")
	}
}

func testFailedListPages(t *testing.T, s store.Outbox) {
	var failed []uuid.UUID
	for range 5 {
		failed = append(failed, fail(t, s, "order.updated", repeat("status 503", 5)...)...)
	}
	all := listAll(t, s, store.FailedListParams{Limit: 1000})
	if len(all) != 25 {
		t.Fatalf("listed %d, want 25", len(all))
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if a.ProcessedAt.Before(b.ProcessedAt) || (a.ProcessedAt.Equal(b.ProcessedAt) && a.OutboxSeq <= b.OutboxSeq) {
			t.Fatalf("list not in (failure time, seq) order, most recent first, at %d: %v/%d then %v/%d",
				i, a.ProcessedAt, a.OutboxSeq, b.ProcessedAt, b.OutboxSeq)
		}
	}
	// Paging by 7 gives the same list.
	paged := listAll(t, s, store.FailedListParams{Limit: 7})
	if !reflect.DeepEqual(recordIDs(paged), recordIDs(all)) {
		t.Fatalf("pages of 7 differ from one page")
	}

	// While an operator pages: newer failures arrive and events already
	// shown are retried. The next pages go on where the first ended.
	first, err := s.FailedList(ctxFor(t), store.FailedListParams{Limit: 7})
	if err != nil || len(first.Events) != 7 || first.Next.IsZero() {
		t.Fatalf("first page: %d events, next %v, %v", len(first.Events), first.Next, err)
	}
	fail(t, s, "order.updated", repeat("status 503", 3)...)
	if n, err := s.FailedRetry(ctxFor(t), store.FailedRetryParams{FailedSelection: store.FailedSelection{IDs: recordIDs(first.Events[:3])}}); err != nil || n != 3 {
		t.Fatalf("retry of 3 shown events: %d, %v", n, err)
	}
	rest := listAll(t, s, store.FailedListParams{Limit: 7, After: first.Next})
	if want := recordIDs(all[7:]); !reflect.DeepEqual(recordIDs(rest), want) {
		t.Fatalf("pages after the first: %d events, want the %d after it, in order", len(rest), len(want))
	}
}

// retried checks that want are pending again, as never attempted, with
// their last error kept (lastErrors: one for all, or one per event), and
// that a claim takes them as attempt 1.
func retried(t *testing.T, s store.Outbox, want []uuid.UUID, lastErrors ...string) {
	t.Helper()
	for i, id := range want {
		lastError := lastErrors[0]
		if len(lastErrors) > 1 {
			lastError = lastErrors[i]
		}
		r := get(t, s, id)
		if r.Status != store.StatusPending || r.Retries != 0 || r.Attempts != 0 || !r.ProcessedAt.IsZero() || r.LastError != lastError {
			t.Fatalf("retried event: status %q retries %d attempts %d processed %v error %q",
				r.Status, r.Retries, r.Attempts, r.ProcessedAt, r.LastError)
		}
	}
	got := claim(t, s, store.ClaimParams{Limit: 1000})
	sameSet(t, "claimed after the retry", ids(got), want)
	for _, d := range got {
		if d.Attempt != 1 {
			t.Fatalf("retried event %s claimed as attempt %d, want 1", d.ID, d.Attempt)
		}
	}
	settle(t, s, store.SettleParams{Done: ids(got)})
}

func retry(t *testing.T, s store.Outbox, p store.FailedRetryParams) int {
	t.Helper()
	n, err := s.FailedRetry(ctxFor(t), p)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	return n
}

func testFailedRetryByIDs(t *testing.T, s store.Outbox) {
	failed := fail(t, s, "order.updated", repeat("status 410", 5)...)
	pick := []uuid.UUID{failed[1], failed[3], postbox.NewID()} // an unknown id is ignored
	if n := retry(t, s, store.FailedRetryParams{FailedSelection: store.FailedSelection{IDs: pick}}); n != 2 {
		t.Fatalf("retried %d, want 2", n)
	}
	retried(t, s, pick[:2], "status 410")
	if n := failedCount(t, s); n != 3 {
		t.Fatalf("%d still failed, want 3", n)
	}
	// Again: nothing left to do.
	if n := retry(t, s, store.FailedRetryParams{FailedSelection: store.FailedSelection{IDs: pick}}); n != 0 {
		t.Fatalf("second retry of the same ids: %d, want 0", n)
	}
}

func testFailedRetryByType(t *testing.T, s store.Outbox) {
	paid := fail(t, s, "order.paid", repeat("status 410", 3)...)
	fail(t, s, "order.created", repeat("status 410", 2)...)
	if n := retry(t, s, store.FailedRetryParams{FailedSelection: store.FailedSelection{FailedFilter: store.FailedFilter{EventType: "order.paid"}}}); n != 3 {
		t.Fatalf("retried %d, want 3", n)
	}
	retried(t, s, paid, "status 410")
	if n := failedCount(t, s); n != 2 {
		t.Fatalf("%d still failed, want the 2 of another type", n)
	}
}

func testFailedRetryByGroup(t *testing.T, s store.Outbox) {
	errs := []string{"status 503: upstream 10.0.0.1 busy", "status 503: upstream 10.0.0.2 busy", "status 503: upstream 10.0.0.3 busy"}
	unavailable := fail(t, s, "order.updated", errs...)
	fail(t, s, "order.updated", "status 410: gone", "status 400: bad order 17")
	group := store.ErrorGroupID(store.ErrorFingerprint("status 503: upstream 10.9.9.9 busy"))
	n := retry(t, s, store.FailedRetryParams{FailedSelection: store.FailedSelection{Group: group}, BatchSize: 2})
	if n != 3 {
		t.Fatalf("retried %d of group %s, want 3", n, group)
	}
	retried(t, s, unavailable, errs...)
	if c := failedCount(t, s); c != 2 {
		t.Fatalf("%d still failed, want the 2 of other groups", c)
	}
	if _, err := s.FailedRetry(ctxFor(t), store.FailedRetryParams{FailedSelection: store.FailedSelection{Group: "not-a-group"}}); err == nil {
		t.Fatal("a malformed group id was accepted")
	}
}

func testFailedRetryAll(t *testing.T, s store.Outbox) {
	a := fail(t, s, "order.paid", repeat("status 410", 2)...)
	b := fail(t, s, "order.created", repeat("timeout", 2)...)
	if n := retry(t, s, store.FailedRetryParams{FailedSelection: store.FailedSelection{All: true}}); n != 4 {
		t.Fatalf("retried %d, want 4", n)
	}
	if c := failedCount(t, s); c != 0 {
		t.Fatalf("%d still failed, want 0", c)
	}
	got := claim(t, s, store.ClaimParams{Limit: 100})
	sameSet(t, "claimed after retrying all", ids(got), append(a, b...))
}

func testFailedRetryEmpty(t *testing.T, s store.Outbox) {
	fail(t, s, "order.paid", "status 410")
	if _, err := s.FailedRetry(ctxFor(t), store.FailedRetryParams{}); !errors.Is(err, store.ErrEmptySelection) {
		t.Fatalf("retry with no selection: %v, want ErrEmptySelection", err)
	}
	if _, err := s.FailedPurge(ctxFor(t), store.FailedPurgeParams{}); !errors.Is(err, store.ErrEmptySelection) {
		t.Fatalf("purge with no selection: %v, want ErrEmptySelection", err)
	}
	if c := failedCount(t, s); c != 1 {
		t.Fatalf("%d failed after refused calls, want 1", c)
	}
}

func testFailedRetryBatches(t *testing.T, s store.Outbox) {
	failed := fail(t, s, "order.updated", repeat("status 503", 7)...)
	var seen []int
	n := retry(t, s, store.FailedRetryParams{
		FailedSelection: store.FailedSelection{All: true},
		BatchSize:       3,
		Progress:        func(done int) { seen = append(seen, done) },
	})
	if n != 7 || !slices.Equal(seen, []int{3, 6, 7}) {
		t.Fatalf("retried %d with progress %v, want 7 in batches 3, 6, 7", n, seen)
	}
	// By ids, in batches too.
	settleFailedAgain(t, s, failed)
	seen = nil
	n = retry(t, s, store.FailedRetryParams{
		FailedSelection: store.FailedSelection{IDs: failed},
		BatchSize:       4,
		Progress:        func(done int) { seen = append(seen, done) },
	})
	if n != 7 || !slices.Equal(seen, []int{4, 7}) {
		t.Fatalf("retried %d by ids with progress %v, want 7 in batches 4, 7", n, seen)
	}
	if _, err := s.FailedRetry(ctxFor(t), store.FailedRetryParams{FailedSelection: store.FailedSelection{All: true}, BatchSize: store.FailedBatchMax + 1}); err == nil {
		t.Fatal("a batch above FailedBatchMax was accepted")
	}
}

// settleFailedAgain claims the pending events ids and fails them again.
func settleFailedAgain(t *testing.T, s store.Outbox, want []uuid.UUID) {
	t.Helper()
	got := claim(t, s, store.ClaimParams{Limit: len(want)})
	sameSet(t, "claimed to fail again", ids(got), want)
	failures := make([]store.Failure, len(got))
	for i, d := range got {
		failures[i] = store.Failure{ID: d.ID, LastError: "status 503"}
	}
	settle(t, s, store.SettleParams{Failed: failures})
}

func testFailedRetryInterrupted(t *testing.T, s store.Outbox) {
	failed := fail(t, s, "order.updated", repeat("status 503", 7)...)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	n, err := s.FailedRetry(ctx, store.FailedRetryParams{
		FailedSelection: store.FailedSelection{All: true},
		BatchSize:       3,
		Progress: func(done int) {
			if done >= 3 {
				cancel() // as SIGINT would, during the first batch
			}
		},
	})
	if !errors.Is(err, context.Canceled) || n != 3 {
		t.Fatalf("interrupted retry: %d, %v; want 3 and context.Canceled", n, err)
	}
	if c := failedCount(t, s); c != 4 {
		t.Fatalf("%d still failed after the interrupted retry, want 4 (the first batch committed whole)", c)
	}
	// The same call again finishes the work.
	if n := retry(t, s, store.FailedRetryParams{FailedSelection: store.FailedSelection{All: true}, BatchSize: 3}); n != 4 {
		t.Fatalf("second run retried %d, want the 4 left", n)
	}
	retried(t, s, failed, "status 503")
}

// A retry of every failed event while relays run: the events it sent back
// may fail again at once (a permanent error), and must not be retried
// again by the same run, which would never end.
func testFailedRetryNoChase(t *testing.T, s store.Outbox) {
	fail(t, s, "order.updated", repeat("status 410", 7)...)
	time.Sleep(5 * time.Millisecond) // the run begins after these failed
	n, err := s.FailedRetry(ctxFor(t), store.FailedRetryParams{
		FailedSelection: store.FailedSelection{All: true},
		BatchSize:       3,
		Progress: func(int) {
			// A relay takes what was sent back and fails it again.
			got := claim(t, s, store.ClaimParams{Limit: 10})
			failures := make([]store.Failure, len(got))
			for i, d := range got {
				failures[i] = store.Failure{ID: d.ID, LastError: "status 410"}
			}
			settle(t, s, store.SettleParams{Failed: failures})
		},
	})
	if err != nil || n != 7 {
		t.Fatalf("retried %d, %v; want each of the 7 once", n, err)
	}
}

func purge(t *testing.T, s store.Outbox, p store.FailedPurgeParams) int {
	t.Helper()
	n, err := s.FailedPurge(ctxFor(t), p)
	if err != nil {
		t.Fatalf("purge: %v", err)
	}
	return n
}

func testFailedPurge(t *testing.T, s store.Outbox) {
	old := fail(t, s, "order.paid", repeat("status 410", 3)...)
	young := fail(t, s, "order.paid", repeat("status 410", 2)...)
	pending := event("p", 1)
	enqueue(t, s, pending)
	cut := get(t, s, young[0]).ProcessedAt
	var seen []int
	n := purge(t, s, store.FailedPurgeParams{
		FailedSelection: store.FailedSelection{FailedFilter: store.FailedFilter{FailedBefore: cut}},
		BatchSize:       2,
		Progress:        func(done int) { seen = append(seen, done) },
	})
	if n != 3 || !slices.Equal(seen, []int{2, 3}) {
		t.Fatalf("purged %d with progress %v, want 3 in batches 2, 3", n, seen)
	}
	for _, id := range old {
		if _, err := s.Get(ctxFor(t), id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("purged event %s: %v, want ErrNotFound", id, err)
		}
	}
	for _, id := range young {
		get(t, s, id)
	}
	get(t, s, pending.ID) // never a pending event
	if n := purge(t, s, store.FailedPurgeParams{FailedSelection: store.FailedSelection{FailedFilter: store.FailedFilter{FailedBefore: cut}}}); n != 0 {
		t.Fatalf("second purge: %d, want 0", n)
	}
	if n := purge(t, s, store.FailedPurgeParams{FailedSelection: store.FailedSelection{IDs: young[:1]}}); n != 1 {
		t.Fatalf("purge by id: %d, want 1", n)
	}
}

func testFailedPurgeGroup(t *testing.T, s store.Outbox) {
	var gone []uuid.UUID
	for i := range 3 {
		gone = append(gone, fail(t, s, "order.paid", fmt.Sprintf("status 410: order %d gone", i), "timeout after 30s")[0])
	}
	group := store.ErrorGroupID(store.ErrorFingerprint("status 410: order 1 gone"))
	n := purge(t, s, store.FailedPurgeParams{FailedSelection: store.FailedSelection{Group: group}, BatchSize: 2})
	if n != 3 {
		t.Fatalf("purged %d of the group, want 3", n)
	}
	for _, id := range gone {
		if _, err := s.Get(ctxFor(t), id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("event %s of the purged group: %v", id, err)
		}
	}
	if c := failedCount(t, s); c != 3 {
		t.Fatalf("%d failed left, want the 3 timeouts", c)
	}
}

func testFailedGroups(t *testing.T, s store.Outbox) {
	fail(t, s, "order.paid", "status 503: upstream 10.0.0.1 busy", "status 410: gone")
	fail(t, s, "order.paid", "status 503: upstream 10.0.0.2 busy", "status 503: upstream 10.0.0.3 busy")
	got, err := s.FailedGroups(ctxFor(t), store.FailedGroupsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Complete || got.Scanned != 4 || len(got.Groups) != 2 {
		t.Fatalf("groups: %+v; want 2 groups of the 4 events, complete", got)
	}
	g := got.Groups[0]
	if g.Count != 3 || g.Fingerprint != "status N: upstream N busy" || g.ID != store.ErrorGroupID(g.Fingerprint) ||
		g.Example != "status 503: upstream 10.0.0.3 busy" && g.Example != "status 503: upstream 10.0.0.2 busy" ||
		g.FirstSeen.IsZero() || g.LastSeen.Before(g.FirstSeen) || g.FirstSeen.Equal(g.LastSeen) {
		t.Fatalf("largest group: %+v", g)
	}
	if g := got.Groups[1]; g.Count != 1 || g.Fingerprint != "status N: gone" || !g.FirstSeen.Equal(g.LastSeen) {
		t.Fatalf("second group: %+v", g)
	}
	// A bounded scan reads the most recent failures and says it is partial.
	part, err := s.FailedGroups(ctxFor(t), store.FailedGroupsParams{Scan: 2})
	if err != nil {
		t.Fatal(err)
	}
	if part.Complete || part.Scanned != 2 || len(part.Groups) != 1 || part.Groups[0].Count != 2 {
		t.Fatalf("groups of a scan of 2: %+v; want the 2 most recent, one group, incomplete", part)
	}
	other, err := s.FailedGroups(ctxFor(t), store.FailedGroupsParams{FailedFilter: store.FailedFilter{EventType: "order.created"}})
	if err != nil || len(other.Groups) != 0 || !other.Complete {
		t.Fatalf("groups of a type without failures: %+v, %v", other, err)
	}
}

func testStatsByType(t *testing.T, s store.Outbox) {
	if got, err := s.StatsByType(ctxFor(t)); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %+v, %v", got, err)
	}
	fail(t, s, "order.paid", repeat("status 410", 2)...)
	done := event("d", 1)
	enqueue(t, s, done)
	claim(t, s, store.ClaimParams{})
	settle(t, s, store.SettleParams{Done: []uuid.UUID{done.ID}, KeepDone: true}) // not counted
	a, b, c := event("1", 1), event("2", 1), event("3", 1)
	c.EventType = "order.paid"
	enqueue(t, s, a, b, c)
	claim(t, s, store.ClaimParams{Limit: 1}) // a
	stats, err := s.StatsByType(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []store.TypeStats{
		{EventType: "order.paid", Pending: 1, Failed: 2},
		{EventType: "order.updated", Pending: 1, Processing: 1},
	}
	if !reflect.DeepEqual(stats, want) {
		t.Fatalf("stats by type: %+v, want %+v (the most numerous type first)", stats, want)
	}
}

// endpointsOf is s's store.Endpoints: every store's driver has them (a
// store that does not fails the suite, it is not skipped).
func endpointsOf(t *testing.T, s store.Outbox) store.Endpoints {
	t.Helper()
	e, ok := s.(store.Endpoints)
	if !ok {
		t.Fatalf("%T is no store.Endpoints: a store's driver must be", s)
	}
	return e
}

// attemptDeliveries claims every due delivery of endpoint e through its
// lane, as e's relay does, and settles them: those errs has an error for
// fail with it (a shadow endpoint drops them), the others are delivered. It
// returns the attempt each claimed delivery made, by event id.
func attemptDeliveries(t *testing.T, s store.Endpoints, e store.Endpoint, errs map[uuid.UUID]string) map[uuid.UUID]int {
	t.Helper()
	lane := s.EndpointLane(e)
	got := claimLane(t, lane, store.ClaimParams{Owner: "relay-a", Limit: 1000})
	attempts := map[uuid.UUID]int{}
	p := store.SettleParams{Owner: "relay-a"}
	for _, d := range got {
		attempts[d.ID] = d.Attempt
		if text, ok := errs[d.ID]; ok {
			p.Failed = append(p.Failed, store.Failure{ID: d.ID, LastError: text})
		} else {
			p.Done = append(p.Done, d.ID)
		}
	}
	settleLane(t, lane, p)
	// Settles a few milliseconds apart fail at distinct times.
	time.Sleep(5 * time.Millisecond)
	return attempts
}

// endpointDeadLetters is the scene of the tests of endpoints' dead letters:
// failed outbox events beside the deliveries of three endpoints.
type endpointDeadLetters struct {
	s store.Endpoints
	// a failed every event: the 3 of events, with errors of one group,
	// then the 2 of later.
	a store.Endpoint
	// b failed events[0] with an error of another group, and delivered
	// the others.
	b store.Endpoint
	// shadow failed every event of events: dropped, never a dead letter.
	shadow store.Endpoint
	// events are delivered to a, b and shadow; later to a alone, with
	// another type and aggregate.
	events, later []postbox.Event
	// outbox are failed events of the outbox, with a's error.
	outbox []uuid.UUID
}

const (
	unavailable = "status 503: upstream 10.0.0.1 busy"
	gone        = "status 410: gone"
	refused     = "status 400: refused"
)

func newEndpointDeadLetters(t *testing.T, s store.Outbox) endpointDeadLetters {
	t.Helper()
	x := endpointDeadLetters{s: endpointsOf(t, s)}
	x.outbox = fail(t, s, "order.updated", repeat(unavailable, 2)...)
	x.a = newEndpoint(t, x.s, "a")
	x.b = newEndpoint(t, x.s, "b")
	shadow, err := x.s.EndpointCreate(ctxFor(t), store.Endpoint{Name: "shadow", URL: "https://example.com/shadow", Secret: "s", Concurrency: 1, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	x.shadow = shadow
	for i := range 3 {
		ev := event(fmt.Sprint(i), i)
		ev.Headers = map[string]string{"traceparent": "00-x"}
		x.events = append(x.events, ev)
	}
	route(t, x.s, x.events, x.a.ID, x.b.ID, x.shadow.ID)
	all := map[uuid.UUID]string{}
	for _, ev := range x.events {
		all[ev.ID] = unavailable
	}
	attemptDeliveries(t, x.s, x.a, all)
	attemptDeliveries(t, x.s, x.b, map[uuid.UUID]string{x.events[0].ID: gone})
	attemptDeliveries(t, x.s, x.shadow, all)
	for i := range 2 {
		ev := event("later", i)
		ev.EventType, ev.AggregateType = "invoice.sent", "invoice"
		x.later = append(x.later, ev)
	}
	route(t, x.s, x.later, x.a.ID)
	attemptDeliveries(t, x.s, x.a, map[uuid.UUID]string{x.later[0].ID: refused, x.later[1].ID: refused})
	return x
}

// list lists every page of f's failed deliveries (or events), and
// checks that each record names the endpoint it should.
func (x endpointDeadLetters) list(t *testing.T, f store.FailedFilter) []store.Record {
	t.Helper()
	recs := listAll(t, x.s.(store.Outbox), store.FailedListParams{FailedFilter: f, Limit: 2})
	for _, r := range recs {
		if f.Endpoint != store.AnyEndpoint && r.Endpoint != f.Endpoint || f.Endpoint == store.AnyEndpoint && r.Endpoint != x.a.ID && r.Endpoint != x.b.ID {
			t.Fatalf("listing endpoint %s: record %s of endpoint %s", f.Endpoint, r.ID, r.Endpoint)
		}
	}
	return recs
}

// deliveryKeys are the records' (endpoint, event) pairs, as text.
func deliveryKeys(rs []store.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Endpoint.String() + "/" + r.ID.String()
	}
	slices.Sort(out)
	return out
}

// keysOf are the (endpoint, event) pairs of e and each of ids, as text.
func keysOf(e store.Endpoint, ids ...uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = e.ID.String() + "/" + id.String()
	}
	return out
}

func sortedKeys(keys ...[]string) []string {
	out := slices.Concat(keys...)
	slices.Sort(out)
	return out
}

func testEndpointFailedList(t *testing.T, s store.Outbox) {
	x := newEndpointDeadLetters(t, s)
	events := eventIDs(x.events)
	later := eventIDs(x.later)

	a := x.list(t, store.FailedFilter{Endpoint: x.a.ID})
	if want := sortedKeys(keysOf(x.a, events...), keysOf(x.a, later...)); !slices.Equal(deliveryKeys(a), want) {
		t.Fatalf("failed deliveries of a: %v, want %v", deliveryKeys(a), want)
	}
	sameSet(t, "a's most recent failures first", recordIDs(a[:2]), later)
	for i := 1; i < len(a); i++ {
		p, r := a[i-1], a[i]
		if p.ProcessedAt.Before(r.ProcessedAt) || p.ProcessedAt.Equal(r.ProcessedAt) && p.OutboxSeq <= r.OutboxSeq {
			t.Fatalf("a's list not in (failure time, seq) order, most recent first, at %d", i)
		}
	}
	r := a[len(a)-1] // events[0], the first written
	ev := x.events[0]
	if r.ID != ev.ID || r.Status != store.StatusFailed || r.LastError != unavailable || r.Attempts != 1 || r.Retries != 1 ||
		r.EventType != ev.EventType || r.AggregateType != ev.AggregateType || r.AggregateID != ev.AggregateID ||
		r.Headers["traceparent"] != "00-x" ||
		r.CreatedAt.IsZero() || r.ProcessedAt.Before(r.CreatedAt) || r.OutboxSeq <= 0 || r.LeaseOwner != "" {
		t.Fatalf("failed delivery record: %+v, want a copy of %+v failed once with %q", r, ev, unavailable)
	}
	sameJSON(t, r.Payload, ev.Payload)
	b := x.list(t, store.FailedFilter{Endpoint: x.b.ID})
	if want := keysOf(x.b, events[0]); !slices.Equal(deliveryKeys(b), want) || b[0].LastError != gone {
		t.Fatalf("failed deliveries of b: %v, want %v", deliveryKeys(b), want)
	}
	every := x.list(t, store.FailedFilter{Endpoint: store.AnyEndpoint})
	if want := sortedKeys(deliveryKeys(a), deliveryKeys(b)); !slices.Equal(deliveryKeys(every), want) {
		t.Fatalf("failed deliveries of every endpoint: %v, want a's and b's %v", deliveryKeys(every), want)
	}
	// Pages of one give the list of one page.
	one := listAll(t, s, store.FailedListParams{FailedFilter: store.FailedFilter{Endpoint: store.AnyEndpoint}, Limit: 1})
	whole := listAll(t, s, store.FailedListParams{FailedFilter: store.FailedFilter{Endpoint: store.AnyEndpoint}, Limit: 100})
	if !reflect.DeepEqual(deliveryKeys(one), deliveryKeys(whole)) || !reflect.DeepEqual(recordIDs(one), recordIDs(whole)) {
		t.Fatalf("pages of one differ from one page: %v, %v", recordIDs(one), recordIDs(whole))
	}
	if got := x.list(t, store.FailedFilter{Endpoint: x.shadow.ID}); len(got) != 0 {
		t.Fatalf("a shadow endpoint's dropped deliveries listed as dead letters: %v", recordIDs(got))
	}
	if got := x.list(t, store.FailedFilter{Endpoint: postbox.NewID()}); len(got) != 0 {
		t.Fatalf("an unknown endpoint listed %v", recordIDs(got))
	}
	outbox := listAll(t, s, store.FailedListParams{})
	sameSet(t, "the outbox's failed events (no endpoint)", recordIDs(outbox), x.outbox)
	for _, r := range outbox {
		if r.Endpoint != uuid.Nil {
			t.Fatalf("outbox event %s listed with endpoint %s", r.ID, r.Endpoint)
		}
	}

	// Filters.
	byType := x.list(t, store.FailedFilter{Endpoint: store.AnyEndpoint, EventType: "invoice.sent"})
	if want := keysOf(x.a, later...); !slices.Equal(deliveryKeys(byType), sortedKeys(want)) {
		t.Fatalf("filter by type: %v, want %v", deliveryKeys(byType), want)
	}
	byAggregate := x.list(t, store.FailedFilter{Endpoint: store.AnyEndpoint, AggregateType: "order", AggregateID: "0"})
	if want := sortedKeys(keysOf(x.a, events[0]), keysOf(x.b, events[0])); !slices.Equal(deliveryKeys(byAggregate), want) {
		t.Fatalf("filter by aggregate: %v, want %v", deliveryKeys(byAggregate), want)
	}
	byError := x.list(t, store.FailedFilter{Endpoint: store.AnyEndpoint, ErrorContains: "410"})
	if want := keysOf(x.b, events[0]); !slices.Equal(deliveryKeys(byError), want) {
		t.Fatalf("filter by error: %v, want %v", deliveryKeys(byError), want)
	}
	cut := a[1].ProcessedAt // later[0]'s failure
	since := x.list(t, store.FailedFilter{Endpoint: x.a.ID, FailedSince: cut})
	sameSet(t, "failed since", recordIDs(since), later)
	before := x.list(t, store.FailedFilter{Endpoint: x.a.ID, FailedBefore: cut})
	sameSet(t, "failed before", recordIDs(before), events)
}

func testEndpointFailedGroups(t *testing.T, s store.Outbox) {
	x := newEndpointDeadLetters(t, s)
	groups := func(f store.FailedFilter, scan int) store.FailedGroups {
		t.Helper()
		got, err := s.FailedGroups(ctxFor(t), store.FailedGroupsParams{FailedFilter: f, Scan: scan})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	counts := func(g store.FailedGroups) map[string]int {
		out := map[string]int{}
		for _, fg := range g.Groups {
			out[fg.Fingerprint] = fg.Count
		}
		return out
	}
	every := groups(store.FailedFilter{Endpoint: store.AnyEndpoint}, 0)
	want := map[string]int{"status N: upstream N busy": 3, "status N: gone": 1, "status N: refused": 2}
	if !every.Complete || every.Scanned != 6 || !reflect.DeepEqual(counts(every), want) {
		t.Fatalf("groups of every endpoint: %+v, want %v of 6, complete", every, want)
	}
	if g := every.Groups[0]; g.Example != unavailable || g.FirstSeen.IsZero() || g.LastSeen.Before(g.FirstSeen) {
		t.Fatalf("largest group: %+v", g)
	}
	b := groups(store.FailedFilter{Endpoint: x.b.ID}, 0)
	if !b.Complete || b.Scanned != 1 || !reflect.DeepEqual(counts(b), map[string]int{"status N: gone": 1}) {
		t.Fatalf("groups of b: %+v", b)
	}
	part := groups(store.FailedFilter{Endpoint: x.a.ID}, 2)
	if part.Complete || part.Scanned != 2 || !reflect.DeepEqual(counts(part), map[string]int{"status N: refused": 2}) {
		t.Fatalf("groups of a scan of 2 of a: %+v; want the 2 most recent, incomplete", part)
	}
	if shadow := groups(store.FailedFilter{Endpoint: x.shadow.ID}, 0); shadow.Scanned != 0 || !shadow.Complete || len(shadow.Groups) != 0 {
		t.Fatalf("groups of the shadow endpoint: %+v, want none", shadow)
	}
	outbox := groups(store.FailedFilter{}, 0)
	if outbox.Scanned != 2 || !reflect.DeepEqual(counts(outbox), map[string]int{"status N: upstream N busy": 2}) {
		t.Fatalf("groups of the outbox: %+v, want its 2 events", outbox)
	}
}

// pendingDeliveries are the (endpoint, event) pairs of e's pending
// deliveries; each must be as never attempted, its last error kept.
func (x endpointDeadLetters) pending(t *testing.T, e store.Endpoint, lastError map[uuid.UUID]string) []string {
	t.Helper()
	got, err := x.s.DeliveryList(ctxFor(t), e.ID, store.StatusPending, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uuid.UUID
	for _, d := range got {
		if d.Attempt != 0 || d.LastError != lastError[d.ID] {
			t.Fatalf("retried delivery of %s to %s: attempts %d, last error %q; want 0 and %q", d.ID, e.Name, d.Attempt, d.LastError, lastError[d.ID])
		}
		ids = append(ids, d.ID)
	}
	return sortedKeys(keysOf(e, ids...))
}

// claimedAsFirst claims e's due deliveries, checks that they are want,
// each claimed as attempt 1, and settles them: those errs has an error for
// fail again, the others are delivered.
func (x endpointDeadLetters) claimedAsFirst(t *testing.T, e store.Endpoint, errs map[uuid.UUID]string, want ...uuid.UUID) {
	t.Helper()
	got := attemptDeliveries(t, x.s, e, errs)
	var claimed []uuid.UUID
	for id, attempt := range got {
		if attempt != 1 {
			t.Fatalf("retried delivery of %s to %s claimed as attempt %d, want 1", id, e.Name, attempt)
		}
		claimed = append(claimed, id)
	}
	sameSet(t, "claimed after the retry by "+e.Name, claimed, want)
}

// counts are the failed deliveries of a and b, the dropped ones of shadow,
// and the outbox's failed events.
func (x endpointDeadLetters) counts(t *testing.T) [4]int64 {
	t.Helper()
	var out [4]int64
	for i, e := range []store.Endpoint{x.a, x.b, x.shadow} {
		c, err := x.s.DeliveryCounts(ctxFor(t), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = c.Failed
		if e.Shadow {
			out[i] = c.Dropped
		}
	}
	out[3] = failedCount(t, x.s.(store.Outbox))
	return out
}

func testEndpointFailedRetry(t *testing.T, s store.Outbox) {
	x := newEndpointDeadLetters(t, s)
	events := eventIDs(x.events)
	later := eventIDs(x.later)
	onlyEndpoint := store.FailedSelection{FailedFilter: store.FailedFilter{Endpoint: store.AnyEndpoint}}
	if _, err := s.FailedRetry(ctxFor(t), store.FailedRetryParams{FailedSelection: onlyEndpoint}); !errors.Is(err, store.ErrEmptySelection) {
		t.Fatalf("retry with only an endpoint: %v, want ErrEmptySelection", err)
	}
	if _, err := s.FailedPurge(ctxFor(t), store.FailedPurgeParams{FailedSelection: onlyEndpoint}); !errors.Is(err, store.ErrEmptySelection) {
		t.Fatalf("purge with only an endpoint: %v, want ErrEmptySelection", err)
	}
	unknown := store.FailedSelection{All: true, FailedFilter: store.FailedFilter{Endpoint: postbox.NewID()}}
	if n := retry(t, s, store.FailedRetryParams{FailedSelection: unknown}); n != 0 {
		t.Fatalf("retried %d of an unknown endpoint, want 0", n)
	}
	if got := x.counts(t); got != [4]int64{5, 1, 3, 2} {
		t.Fatalf("failed of a, b, dropped of shadow, failed of the outbox: %v, want [5 1 3 2]", got)
	}

	// b's one failed delivery, of events[0], which a failed too.
	if n := retry(t, s, store.FailedRetryParams{FailedSelection: store.FailedSelection{All: true, FailedFilter: store.FailedFilter{Endpoint: x.b.ID}}}); n != 1 {
		t.Fatalf("retried %d of b, want 1", n)
	}
	if got, want := x.pending(t, x.b, map[uuid.UUID]string{events[0]: gone}), keysOf(x.b, events[0]); !slices.Equal(got, want) {
		t.Fatalf("b's pending deliveries after its retry: %v, want %v", got, want)
	}
	if got := x.counts(t); got != [4]int64{5, 0, 3, 2} {
		t.Fatalf("after b's retry: %v, want [5 0 3 2]", got)
	}
	x.claimedAsFirst(t, x.b, map[uuid.UUID]string{events[0]: gone}, events[0]) // fails again

	// By group, of every endpoint: a's failures of the events are in it;
	// b's of events[0] and the outbox's, with the same error, are not.
	group := store.ErrorGroupID(store.ErrorFingerprint(unavailable))
	n := retry(t, s, store.FailedRetryParams{FailedSelection: store.FailedSelection{Group: group, FailedFilter: store.FailedFilter{Endpoint: store.AnyEndpoint}}, BatchSize: 2})
	if n != 3 {
		t.Fatalf("retried %d of group %s of every endpoint, want a's 3", n, group)
	}
	lastErrors := map[uuid.UUID]string{}
	for _, id := range events {
		lastErrors[id] = unavailable
	}
	if got, want := x.pending(t, x.a, lastErrors), sortedKeys(keysOf(x.a, events...)); !slices.Equal(got, want) {
		t.Fatalf("a's pending deliveries after the group's retry: %v, want %v", got, want)
	}
	if got := x.counts(t); got != [4]int64{2, 1, 3, 2} {
		t.Fatalf("after the group's retry: %v, want [2 1 3 2]", got)
	}
	x.claimedAsFirst(t, x.a, nil, events...)

	// By event ids, of every endpoint: a's delivery of later[0] and b's
	// of events[0].
	if n := retry(t, s, store.FailedRetryParams{FailedSelection: store.FailedSelection{IDs: []uuid.UUID{events[0], later[0], x.outbox[0]}, FailedFilter: store.FailedFilter{Endpoint: store.AnyEndpoint}}}); n != 2 {
		t.Fatalf("retried %d by ids, want 2", n)
	}
	if got, want := x.pending(t, x.a, map[uuid.UUID]string{later[0]: refused}), keysOf(x.a, later[0]); !slices.Equal(got, want) {
		t.Fatalf("a's pending deliveries after the retry by ids: %v, want %v", got, want)
	}
	if got, want := x.pending(t, x.b, map[uuid.UUID]string{events[0]: gone}), keysOf(x.b, events[0]); !slices.Equal(got, want) {
		t.Fatalf("b's pending deliveries after the retry by ids: %v, want %v", got, want)
	}
	x.claimedAsFirst(t, x.a, nil, later[0])
	x.claimedAsFirst(t, x.b, nil, events[0])

	// What is left, of every endpoint, in batches: a's later[1].
	var seen []int
	n = retry(t, s, store.FailedRetryParams{FailedSelection: store.FailedSelection{All: true, FailedFilter: store.FailedFilter{Endpoint: store.AnyEndpoint}}, BatchSize: 1,
		Progress: func(done int) { seen = append(seen, done) }})
	if n != 1 || !slices.Equal(seen, []int{1}) {
		t.Fatalf("retried %d of every endpoint with progress %v, want 1", n, seen)
	}
	x.claimedAsFirst(t, x.a, nil, later[1])
	// The shadow's dropped deliveries and the outbox's failed events were
	// never touched.
	if got := x.counts(t); got != [4]int64{0, 0, 3, 2} {
		t.Fatalf("after every retry: %v, want [0 0 3 2]", got)
	}
	for _, id := range x.outbox {
		if r := get(t, s, id); r.Status != store.StatusFailed || r.Retries != 1 {
			t.Fatalf("outbox event after the endpoints' retries: %+v", r)
		}
	}
}

func testEndpointFailedPurge(t *testing.T, s store.Outbox) {
	x := newEndpointDeadLetters(t, s)
	events := eventIDs(x.events)
	later := eventIDs(x.later)
	unknown := store.FailedSelection{All: true, FailedFilter: store.FailedFilter{Endpoint: postbox.NewID()}}
	if n := purge(t, s, store.FailedPurgeParams{FailedSelection: unknown}); n != 0 {
		t.Fatalf("purged %d of an unknown endpoint, want 0", n)
	}
	a := x.list(t, store.FailedFilter{Endpoint: x.a.ID})
	cut := a[1].ProcessedAt // later[0]'s failure
	var seen []int
	n := purge(t, s, store.FailedPurgeParams{
		FailedSelection: store.FailedSelection{FailedFilter: store.FailedFilter{Endpoint: x.a.ID, FailedBefore: cut}},
		BatchSize:       2,
		Progress:        func(done int) { seen = append(seen, done) },
	})
	if n != 3 || !slices.Equal(seen, []int{2, 3}) {
		t.Fatalf("purged %d of a with progress %v, want 3 in batches 2, 3", n, seen)
	}
	if got, want := deliveryKeys(x.list(t, store.FailedFilter{Endpoint: store.AnyEndpoint})), sortedKeys(keysOf(x.a, later...), keysOf(x.b, events[0])); !slices.Equal(got, want) {
		t.Fatalf("failed deliveries after a's purge: %v, want %v", got, want)
	}
	if n := purge(t, s, store.FailedPurgeParams{FailedSelection: store.FailedSelection{IDs: events, FailedFilter: store.FailedFilter{Endpoint: store.AnyEndpoint}}}); n != 1 {
		t.Fatalf("purged %d by ids, want b's 1", n)
	}
	group := store.ErrorGroupID(store.ErrorFingerprint(refused))
	if n := purge(t, s, store.FailedPurgeParams{FailedSelection: store.FailedSelection{Group: group, FailedFilter: store.FailedFilter{Endpoint: store.AnyEndpoint}}}); n != 2 {
		t.Fatalf("purged %d of group %s, want a's 2", n, group)
	}
	if n := purge(t, s, store.FailedPurgeParams{FailedSelection: store.FailedSelection{All: true, FailedFilter: store.FailedFilter{Endpoint: store.AnyEndpoint}}}); n != 0 {
		t.Fatalf("purged %d with nothing failed left, want 0", n)
	}
	if got := x.counts(t); got != [4]int64{0, 0, 3, 2} {
		t.Fatalf("after the purges: failed of a, b, dropped of shadow, failed of the outbox: %v, want [0 0 3 2]", got)
	}
}
