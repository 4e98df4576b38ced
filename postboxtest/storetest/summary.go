package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

// attemptAt is a failed attempt (err not empty) or a successful one of
// endpoint at at.
func attemptAt(endpoint uuid.UUID, at time.Time, code int, err string) store.Attempt {
	return store.Attempt{EndpointID: endpoint, EventID: uuid.New(), EventType: "order.created", Attempt: 1,
		StatusCode: code, Duration: time.Millisecond, Error: err, At: at}
}

// summaries returns the store's AttemptSummary since since, checked for
// an endpoint listed twice.
func summaries(t *testing.T, s store.Endpoints, since time.Time) []store.AttemptSummary {
	t.Helper()
	got, err := s.AttemptSummary(ctxFor(t), since)
	if err != nil {
		t.Fatalf("summary since %v: %v", since, err)
	}
	seen := map[uuid.UUID]bool{}
	for _, g := range got {
		if seen[g.EndpointID] {
			t.Fatalf("summary since %v lists endpoint %s twice: %+v", since, g.EndpointID, got)
		}
		seen[g.EndpointID] = true
	}
	return got
}

// sameSummaries fails t unless got is want, in its order, each Last equal
// (Equal: the stores' times may have another location).
func sameSummaries(t *testing.T, what string, got, want []store.AttemptSummary) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		g, w := got[i], want[i]
		ok = g.EndpointID == w.EndpointID && g.Attempts == w.Attempts && g.Succeeded == w.Succeeded && g.Last.Equal(w.Last)
	}
	if !ok {
		t.Errorf("%s:\n got %s\nwant %s", what, describeSummaries(got), describeSummaries(want))
	}
}

func describeSummaries(list []store.AttemptSummary) string {
	parts := make([]string, len(list))
	for i, s := range list {
		parts[i] = fmt.Sprintf("{%s %d/%d last %s}", s.EndpointID, s.Succeeded, s.Attempts, s.Last.UTC().Format(time.RFC3339Nano))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// testAttemptSummary: AttemptSummary counts, per endpoint, the attempts at
// or after since (one exactly at since included), those without an error
// as succeeded whatever their status code, and the time of the last; an
// endpoint whose attempts are all older, and one without any, are absent;
// the endpoints come in the order of EndpointList; a removed endpoint's
// attempts go with it.
func testAttemptSummary(t *testing.T, s store.Endpoints) {
	ctx := ctxFor(t)
	// Created in this order: the summary lists them so.
	a, b, old, idle := newEndpoint(t, s, "a"), newEndpoint(t, s, "b"), newEndpoint(t, s, "old"), newEndpoint(t, s, "idle")
	now := time.Now().Truncate(time.Microsecond)
	since := now.Add(-time.Hour)
	batch := []store.Attempt{
		// b first: the order of the log is not the order of the summary.
		attemptAt(b.ID, since, 503, "503 Service Unavailable"),
		attemptAt(b.ID, now.Add(-5*time.Minute), 204, ""),
		attemptAt(a.ID, now.Add(-2*time.Hour), 500, "500 Internal Server Error"),
		attemptAt(a.ID, now.Add(-30*time.Minute), 200, ""),
		// A 2xx the relay refused (a signature check, a body too big) is a
		// failure: only the error says.
		attemptAt(a.ID, now.Add(-10*time.Minute), 200, "response: body too large"),
		attemptAt(a.ID, now.Add(-time.Minute), 0, ""),
		attemptAt(a.ID, now.Add(-20*time.Minute), 0, "dial tcp: connection refused"),
		attemptAt(old.ID, since.Add(-time.Microsecond), 200, ""),
		attemptAt(old.ID, now.Add(-48*time.Hour), 500, "boom"),
	}
	if err := s.AttemptInsert(ctx, batch); err != nil {
		t.Fatal(err)
	}
	sameSummaries(t, "since an hour ago", summaries(t, s, since), []store.AttemptSummary{
		{EndpointID: a.ID, Attempts: 4, Succeeded: 2, Last: now.Add(-time.Minute)},
		{EndpointID: b.ID, Attempts: 2, Succeeded: 1, Last: now.Add(-5 * time.Minute)},
	})
	sameSummaries(t, "since a microsecond after the hour", summaries(t, s, since.Add(time.Microsecond)), []store.AttemptSummary{
		{EndpointID: a.ID, Attempts: 4, Succeeded: 2, Last: now.Add(-time.Minute)},
		{EndpointID: b.ID, Attempts: 1, Succeeded: 1, Last: now.Add(-5 * time.Minute)},
	})
	every := []store.AttemptSummary{
		{EndpointID: a.ID, Attempts: 5, Succeeded: 2, Last: now.Add(-time.Minute)},
		{EndpointID: b.ID, Attempts: 2, Succeeded: 1, Last: now.Add(-5 * time.Minute)},
		{EndpointID: old.ID, Attempts: 2, Succeeded: 1, Last: since.Add(-time.Microsecond)},
	}
	sameSummaries(t, "since the zero time", summaries(t, s, time.Time{}), every)
	sameSummaries(t, "since three days ago", summaries(t, s, now.Add(-72*time.Hour)), every)
	sameSummaries(t, "since now", summaries(t, s, now.Add(time.Microsecond)), nil)
	for _, g := range summaries(t, s, time.Time{}) {
		if g.EndpointID == idle.ID {
			t.Errorf("an endpoint without attempts is listed: %+v", g)
		}
	}

	if err := s.EndpointDelete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	sameSummaries(t, "after a is removed", summaries(t, s, since), []store.AttemptSummary{
		{EndpointID: b.ID, Attempts: 2, Succeeded: 1, Last: now.Add(-5 * time.Minute)},
	})
}

// testAttemptSummaryEdges: the hostile edges of AttemptSummary. Attempts
// at the first and the last microsecond of years 1 to 9999 are counted
// and read back; a since at the last microsecond counts the attempt made
// then; the zero since, and one before year 1, count every attempt, those
// before year 1 too; a since after year 9999 (one after PostgreSQL's last
// time, one whose Unix microseconds overflow) counts as the start of year
// 10000: only the attempts a store holds beyond year 9999. An attempt out
// of years 1 to 9999 is counted but never is Last, which is the latest of
// the others. Error texts that clean
// to something (NUL, invalid UTF-8, longer than a store keeps) are
// failures; endpoints' attempts never mix.
func testAttemptSummaryEdges(t *testing.T, s store.Endpoints) {
	ctx := ctxFor(t)
	e, other, odd := newEndpoint(t, s, "edges"), newEndpoint(t, s, "other"), newEndpoint(t, s, "odd")
	first := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC) // the zero time
	last := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	now := time.Now().Truncate(time.Microsecond)
	batch := []store.Attempt{
		attemptAt(e.ID, first, 200, ""),
		attemptAt(e.ID, last, 200, ""),
		attemptAt(e.ID, now, 500, "\x00"),
		attemptAt(e.ID, now, 500, "\xff\xfe"),
		attemptAt(e.ID, now, 500, strings.Repeat("x", 5000)),
		attemptAt(other.ID, now.Add(-time.Second), 200, ""),
		// Times no clock gives, which the stores hold all the same.
		attemptAt(odd.ID, time.Date(0, 6, 1, 0, 0, 0, 0, time.UTC), 200, ""),
		attemptAt(odd.ID, time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC), 500, "from the future"),
		attemptAt(odd.ID, now.Add(-time.Hour), 200, ""), // the last that is a time
	}
	if err := s.AttemptInsert(ctx, batch); err != nil {
		t.Fatal(err)
	}
	oddLate := store.AttemptSummary{EndpointID: odd.ID, Attempts: 1}
	for _, since := range []time.Time{{}, time.Unix(-1<<62, 0), first.Add(-time.Nanosecond)} {
		sameSummaries(t, fmt.Sprintf("since %v", since), summaries(t, s, since), []store.AttemptSummary{
			{EndpointID: e.ID, Attempts: 5, Succeeded: 2, Last: last},
			{EndpointID: other.ID, Attempts: 1, Succeeded: 1, Last: now.Add(-time.Second)},
			{EndpointID: odd.ID, Attempts: 3, Succeeded: 2, Last: now.Add(-time.Hour)},
		})
	}
	sameSummaries(t, "since a microsecond into year 1", summaries(t, s, first.Add(time.Microsecond)), []store.AttemptSummary{
		{EndpointID: e.ID, Attempts: 4, Succeeded: 1, Last: last},
		{EndpointID: other.ID, Attempts: 1, Succeeded: 1, Last: now.Add(-time.Second)},
		{EndpointID: odd.ID, Attempts: 2, Succeeded: 1, Last: now.Add(-time.Hour)},
	})
	sameSummaries(t, "since now", summaries(t, s, now), []store.AttemptSummary{
		{EndpointID: e.ID, Attempts: 4, Succeeded: 1, Last: last},
		oddLate,
	})
	sameSummaries(t, "since the last microsecond", summaries(t, s, last), []store.AttemptSummary{
		{EndpointID: e.ID, Attempts: 1, Succeeded: 1, Last: last},
		oddLate,
	})
	for _, since := range []time.Time{
		last.Add(time.Microsecond),                    // year 10000
		time.Date(13000, 1, 1, 0, 0, 0, 0, time.UTC),  // after the odd attempt: taken as year 10000
		time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC), // after PostgreSQL's last time
		time.Unix(1<<62, 0),                           // its Unix microseconds overflow int64
	} {
		sameSummaries(t, fmt.Sprintf("since %v", since), summaries(t, s, since), []store.AttemptSummary{oddLate})
	}
}

// testDeliveryCountsAll: DeliveryCountsAll has one entry per endpoint, each
// what DeliveryCounts says of it, across every status: pending (due and
// waiting), leased (processing: a lease of that endpoint; the same event's
// delivery to another endpoint stays pending there), done (kept), failed,
// dropped (a shadow endpoint's), retried (pending again); an endpoint
// without deliveries has zero counts, a removed one no entry.
func testDeliveryCountsAll(t *testing.T, s store.Endpoints) {
	ctx := ctxFor(t)
	a, b, idle := newEndpoint(t, s, "a"), newEndpoint(t, s, "b"), newEndpoint(t, s, "idle")
	shadow, err := s.EndpointCreate(ctx, store.Endpoint{Name: "shadow", URL: "https://example.com/shadow",
		Secret: clearSecret, Concurrency: 1, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	shared := laneEvents(5, "1")
	route(t, s, shared, a.ID, b.ID, shadow.ID)
	route(t, s, []postbox.Event{laneEvent("2", time.Now().Add(time.Hour))}, a.ID) // waiting for its time
	// a: of the 5 due, 2 delivered (kept), 1 failed, 1 retried (pending
	// again, due later), 1 still leased.
	la := s.EndpointLane(a)
	claimLane(t, la, store.ClaimParams{Owner: "r", Limit: 5})
	settleLane(t, la, store.SettleParams{Owner: "r", KeepDone: true, Done: eventIDs(shared[:2]),
		Failed: []store.Failure{{ID: shared[2].ID, LastError: "410 Gone"}},
		Retry:  []store.Retry{{ID: shared[3].ID, AvailableAt: time.Now().Add(time.Hour), LastError: "503"}}})
	// b: 2 leased by one relay, 1 by another; 2 pending.
	lb := s.EndpointLane(b)
	claimLane(t, lb, store.ClaimParams{Owner: "r1", Limit: 2})
	claimLane(t, lb, store.ClaimParams{Owner: "r2", Limit: 1})
	// shadow: 1 dropped, 1 delivered and deleted, 3 pending.
	ls := s.EndpointLane(shadow)
	claimLane(t, ls, store.ClaimParams{Owner: "r", Limit: 2})
	settleLane(t, ls, store.SettleParams{Owner: "r", Done: eventIDs(shared[:1]),
		Failed: []store.Failure{{ID: shared[1].ID, LastError: "500"}}})

	want := map[uuid.UUID]store.DeliveryCounts{
		a.ID:      {Pending: 2, Processing: 1, Done: 2, Failed: 1},
		b.ID:      {Pending: 2, Processing: 3},
		shadow.ID: {Pending: 3, Dropped: 1},
		idle.ID:   {},
	}
	checkCountsAll(t, s, want)

	if err := s.EndpointDelete(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	delete(want, b.ID)
	checkCountsAll(t, s, want)
}

// checkCountsAll fails t unless DeliveryCountsAll has exactly the
// endpoints of want, each with its counts, and each as DeliveryCounts
// counts it: the same counts, and an OldestPendingAge zero for both or
// for neither.
func checkCountsAll(t *testing.T, s store.Endpoints, want map[uuid.UUID]store.DeliveryCounts) {
	t.Helper()
	all, err := s.DeliveryCountsAll(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(want) {
		t.Errorf("DeliveryCountsAll has %d endpoints, want %d: %+v", len(all), len(want), all)
	}
	for id, w := range want {
		got, ok := all[id]
		if !ok {
			t.Errorf("DeliveryCountsAll has no entry for endpoint %s", id)
			continue
		}
		one, err := s.DeliveryCounts(ctxFor(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if countsOnly(got) != w || countsOnly(one) != w {
			t.Errorf("endpoint %s: DeliveryCountsAll %+v, DeliveryCounts %+v; want %+v", id, countsOnly(got), countsOnly(one), w)
		}
		if (got.OldestPendingAge == 0) != (one.OldestPendingAge == 0) || got.OldestPendingAge < 0 {
			t.Errorf("endpoint %s: oldest pending age %v in DeliveryCountsAll, %v in DeliveryCounts", id, got.OldestPendingAge, one.OldestPendingAge)
		}
		if w.Pending > 0 && got.OldestPendingAge == 0 {
			t.Errorf("endpoint %s: %d pending, oldest pending age 0", id, w.Pending)
		}
	}
}
