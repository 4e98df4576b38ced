package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// runLane runs the suite of endpoint lanes
// (store.Endpoints.EndpointLane), of the Endpoints methods that lanes
// brought or that wake them (EndpointUpdate, Endpoint.AllowPrivate, the
// batched DeliveryInsert and its Route.Tried, DeliveryCounts.OldestPendingAge,
// DeliveryDue, DeliveryPending), and runs a relay over a lane.
func runLane(t *testing.T, newStore func(t *testing.T) store.Endpoints) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Endpoints)
	}{
		{"ClaimTakesDueDeliveriesInClaimOrder", testLaneClaimOrder},
		{"ClaimAfterCursor", testLaneClaimAfter},
		{"ClaimMaxBytes", testLaneClaimMaxBytes},
		{"ClaimCountsAttemptsAndLeases", testLaneClaimAttempts},
		{"EndedClaimsAndReleases", testLaneEnded},
		{"NoClaimUnlessEnabled", testLaneClaimEnabledOnly},
		{"SettleDoneDeletesOrKeeps", testLaneSettleDone},
		{"SettleRetryFailRelease", testLaneSettleRetryFailRelease},
		{"SettleShadowFailureIsDropped", testLaneSettleShadow},
		{"RetryAndFailOnlyByOwner", testLaneSettleOwner},
		{"ExtendLeaseReturnsWhatIsHeld", testLaneExtendLease},
		{"ReclaimExpiredCountsAndFails", testLaneReclaim},
		{"PurgeDoneOfTheEndpointOnly", testLanePurge},
		{"ExpireRefusesBadLimits", testLaneExpireLimits},
		{"OrderedClaimsHeadsPerEndpointAndAggregate", testLaneOrdered},
		{"OrderedClaimFindsHeadsBehindTheirSuccessors", testLaneOrderedWalk},
		{"LanesOfTwoEndpointsAreApart", testLanesApart},
		{"SchemaListenString", testLaneSource},
		{"InsertBatchOrderAndIdempotence", testLaneInsertBatch},
		{"EndpointUpdate", testEndpointUpdate},
		{"AllowPrivateRoundTrip", testAllowPrivate},
		{"OldestPendingAge", testDeliveryOldestPendingAge},
		{"DueNamesEndpointsWithDueDeliveries", testDeliveryDue},
		{"InsertTriedAsTheLaneWouldHaveLeftIt", testInsertTried},
		{"InsertTriedFailedIsADeadLetter", testInsertTriedDeadLetter},
		{"InsertTriedMixedBatch", testInsertTriedMixed},
		{"InsertTriedRefusedWritesNothing", testInsertTriedRefused},
		{"InsertTriedHostileValues", testInsertTriedHostile},
		{"PendingNamesEndpointsWithPendingDeliveries", testDeliveryPending},
		{"RelayDrainsALane", testRelayOverLane},
		{"EndpointRequeueFinishedAndAbsent", testEndpointRequeue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
}

// testLaneExpireLimits: a lane's Expire refuses a Limit out of 1 to
// HistoryBatchMax, as the outbox's (Limit 0 would report More for ever).
func testLaneExpireLimits(t *testing.T, s store.Endpoints) {
	l := s.EndpointLane(newEndpoint(t, s, "a"))
	for _, limit := range []int{0, -1, store.HistoryBatchMax + 1} {
		if res, err := l.Expire(context.Background(), store.ExpireParams{Before: time.Now(), Limit: limit}); err == nil {
			t.Errorf("lane Expire with Limit %d = %+v: no error", limit, res)
		}
	}
	if res, err := l.Expire(context.Background(), store.ExpireParams{Before: time.Now(), Limit: 1}); err != nil || res.More {
		t.Errorf("lane Expire with Limit 1, nothing to do = %+v, %v; want no work left", res, err)
	}
}

// laneEvent is an event of aggregate ("order", agg) with a JSON string
// payload (its text is the same in every store).
func laneEvent(agg string, availableAt time.Time) postbox.Event {
	return postbox.Event{ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: agg, EventType: "order.updated",
		Payload: []byte(`"0123456789"`), Headers: map[string]string{"traceparent": "00-y"}, AvailableAt: availableAt}
}

// route writes one delivery of each event to each endpoint, in order.
func route(t *testing.T, s store.Endpoints, events []postbox.Event, endpoints ...uuid.UUID) {
	t.Helper()
	routes := make([]store.Route, len(events))
	for i, ev := range events {
		routes[i] = store.Route{Event: ev, Endpoints: endpoints}
	}
	n, err := s.DeliveryInsert(context.Background(), routes)
	if err != nil || n != len(events)*len(endpoints) {
		t.Fatalf("insert: %d, %v; want %d", n, err, len(events)*len(endpoints))
	}
}

// laneEvents returns n events of aggregate agg, due at once.
func laneEvents(n int, agg string) []postbox.Event {
	out := make([]postbox.Event, n)
	for i := range out {
		out[i] = laneEvent(agg, time.Time{})
	}
	return out
}

func claimLane(t *testing.T, l store.Source, p store.ClaimParams) []store.ClaimedEvent {
	t.Helper()
	if p.Lease == 0 {
		p.Lease = time.Minute
	}
	got, err := l.Claim(context.Background(), p)
	if err != nil {
		t.Fatalf("claim %+v: %v", p, err)
	}
	for _, d := range got {
		if d.Invalid != "" {
			t.Fatalf("claimed delivery %s is invalid: %s", d.ID, d.Invalid)
		}
	}
	return got
}

func settleLane(t *testing.T, l store.Source, p store.SettleParams) {
	t.Helper()
	if err := l.Settle(context.Background(), p); err != nil {
		t.Fatalf("settle: %v", err)
	}
}

func deliveryIDs(ds []store.ClaimedEvent) []uuid.UUID {
	out := make([]uuid.UUID, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func eventIDs(evs []postbox.Event) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func sameIDs(t *testing.T, what string, got, want []uuid.UUID) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// delivery returns the endpoint's delivery of event id, as DeliveryList
// reads it (ok false when there is none).
func delivery(t *testing.T, s store.Endpoints, endpoint, id uuid.UUID) (store.EndpointDelivery, bool) {
	t.Helper()
	list, err := s.DeliveryList(context.Background(), endpoint, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		if d.ID == id {
			return d, true
		}
	}
	return store.EndpointDelivery{}, false
}

func counts(t *testing.T, s store.Endpoints, endpoint uuid.UUID) store.DeliveryCounts {
	t.Helper()
	c, err := s.DeliveryCounts(context.Background(), endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return countsOnly(c)
}

func testLaneClaimOrder(t *testing.T, s store.Endpoints) {
	a := newEndpoint(t, s, "a")
	now := time.Now()
	events := []postbox.Event{
		laneEvent("1", now.Add(-time.Minute)),
		laneEvent("2", now.Add(-3*time.Minute)),
		laneEvent("3", now.Add(-2*time.Minute)),
		laneEvent("4", now.Add(time.Hour)), // not due
	}
	route(t, s, events, a.ID)
	l := s.EndpointLane(a)
	got := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 2})
	// The two first due in claim order, returned in sequence order.
	sameIDs(t, "claim", deliveryIDs(got), []uuid.UUID{events[1].ID, events[2].ID})
	if got[0].OutboxSeq >= got[1].OutboxSeq {
		t.Errorf("seqs %d, %d: want the order the deliveries were written in", got[0].OutboxSeq, got[1].OutboxSeq)
	}
	d, ev := got[0], events[1]
	if d.AggregateType != "order" || d.AggregateID != "2" || d.EventType != ev.EventType || string(d.Payload) != string(ev.Payload) ||
		d.Headers["traceparent"] != "00-y" || d.Attempt != 1 || d.Lease == 0 || got[1].Lease != d.Lease || d.CreatedAt.IsZero() ||
		!d.AvailableAt.Equal(ev.AvailableAt.Truncate(time.Microsecond)) {
		t.Errorf("delivery = %+v, want a copy of %+v due at its AvailableAt, attempt 1, the claim's lease", d, ev)
	}
	rest := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10})
	sameIDs(t, "second claim", deliveryIDs(rest), []uuid.UUID{events[0].ID})
	if rest[0].Lease == 0 || rest[0].Lease == d.Lease {
		t.Errorf("second claim's lease = %d, want its own (the first's: %d)", rest[0].Lease, d.Lease)
	}
	if more := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10}); len(more) != 0 {
		t.Errorf("third claim = %v, want nothing (leased, or not due)", deliveryIDs(more))
	}
}

func testLaneClaimAfter(t *testing.T, s store.Endpoints) {
	a := newEndpoint(t, s, "a")
	events := laneEvents(5, "1")
	route(t, s, events, a.ID)
	l := s.EndpointLane(a)
	first := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 2})
	sameIDs(t, "claim", deliveryIDs(first), eventIDs(events[:2]))
	// Released, the first two are pending again but behind the cursor.
	settleLane(t, l, store.SettleParams{Owner: "r", Release: []store.Released{{ID: events[0].ID}, {ID: events[1].ID}}})
	after := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10, After: store.PositionOf(first[1])})
	sameIDs(t, "claim after the cursor", deliveryIDs(after), eventIDs(events[2:]))
	again := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10})
	sameIDs(t, "claim without a cursor", deliveryIDs(again), eventIDs(events[:2]))
}

func testLaneClaimMaxBytes(t *testing.T, s store.Endpoints) {
	a := newEndpoint(t, s, "a")
	events := laneEvents(5, "1") // payloads of 12 bytes
	route(t, s, events, a.ID)
	l := s.EndpointLane(a)
	got := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10, MaxBytes: 30})
	sameIDs(t, "claim of 30 bytes", deliveryIDs(got), eventIDs(events[:2]))
	got = claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10, MaxBytes: 5})
	sameIDs(t, "claim of 5 bytes", deliveryIDs(got), eventIDs(events[2:3]))
	got = claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10, MaxBytes: 24})
	sameIDs(t, "claim of 24 bytes", deliveryIDs(got), eventIDs(events[3:5]))
}

func testLaneClaimAttempts(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	events := laneEvents(2, "1")
	route(t, s, events, a.ID)
	l := s.EndpointLane(a)
	got := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 1})
	sameIDs(t, "claim", deliveryIDs(got), eventIDs(events[:1]))
	d, _ := delivery(t, s, a.ID, events[0].ID)
	if d.Status != store.StatusProcessing || d.Attempt != 1 {
		t.Errorf("claimed row = %s, %d attempts; want processing, 1", d.Status, d.Attempt)
	}
	if d, _ := delivery(t, s, a.ID, events[1].ID); d.Status != store.StatusPending || d.Attempt != 0 {
		t.Errorf("delivery not claimed = %s, %d attempts; want pending, 0", d.Status, d.Attempt)
	}
	due := time.Now().Add(-time.Second).Truncate(time.Microsecond)
	settleLane(t, l, store.SettleParams{Owner: "r", Retry: []store.Retry{{ID: events[0].ID, AvailableAt: due, LastError: "503"}}})
	got = claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 2})
	if len(got) != 2 || got[0].ID != events[0].ID || got[0].Attempt != 2 || !got[0].AvailableAt.Equal(due) || got[1].Attempt != 1 {
		t.Fatalf("claim after a retry = %+v; want the retried delivery as attempt 2, due at its retry, then the other as attempt 1", got)
	}
	// Leased together, one is extended, the other settled.
	settleLane(t, l, store.SettleParams{Owner: "r", Done: eventIDs(events[:1])})
	kept, err := l.ExtendLease(ctx, "r", eventIDs(events), time.Minute)
	sameIDs(t, "extended", kept, eventIDs(events[1:]))
	if err != nil {
		t.Fatal(err)
	}
}

// A claim's lease holds what it leased until each delivery is settled or
// released; ending the claim (SettleParams.Ended) after its deliveries
// were settled frees nothing else; an outcome naming an earlier claim
// (Released.Lease) leaves a newer claim of the same delivery alone.
func testLaneEnded(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	events := laneEvents(3, "1")
	route(t, s, events, a.ID)
	l := s.EndpointLane(a)
	first := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 2})
	second := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 2})
	sameIDs(t, "second claim", deliveryIDs(second), eventIDs(events[2:]))
	// The first claim ends: one delivered, one released.
	settleLane(t, l, store.SettleParams{Owner: "r", Done: eventIDs(events[:1]),
		Release: []store.Released{{ID: events[1].ID, Lease: first[1].Lease}}, Ended: []int64{first[0].Lease}})
	if c := counts(t, s, a.ID); c != (store.DeliveryCounts{Pending: 1, Processing: 1}) {
		t.Errorf("counts after the first claim ended = %+v, want 1 pending (released), 1 processing (the second claim's)", c)
	}
	again := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10})
	sameIDs(t, "claim after the release", deliveryIDs(again), eventIDs(events[1:2]))
	if again[0].Attempt != 1 {
		t.Errorf("released delivery claimed again as attempt %d, want 1", again[0].Attempt)
	}
	// A release naming the first claim leaves the third claim's lease.
	settleLane(t, l, store.SettleParams{Owner: "r", Release: []store.Released{{ID: events[1].ID, Lease: first[1].Lease}}})
	if kept, err := l.ExtendLease(ctx, "r", eventIDs(events), time.Minute); err != nil {
		t.Fatal(err)
	} else {
		sameIDs(t, "still held", kept, eventIDs(events[1:]))
	}
}

func testLaneClaimEnabledOnly(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	route(t, s, laneEvents(2, "1"), a.ID)
	l := s.EndpointLane(a)
	for _, state := range []string{store.EndpointDisabled, store.EndpointAutoDisabled} {
		if err := s.EndpointSetState(ctx, a.ID, state); err != nil {
			t.Fatal(err)
		}
		for _, ordered := range []bool{false, true} {
			if got := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10, Ordered: ordered}); len(got) != 0 {
				t.Errorf("claim (ordered %v) of a %s endpoint = %v, want nothing", ordered, state, deliveryIDs(got))
			}
		}
	}
	if err := s.EndpointSetState(ctx, a.ID, store.EndpointEnabled); err != nil {
		t.Fatal(err)
	}
	if got := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10}); len(got) != 2 {
		t.Errorf("claim once enabled = %v, want both", deliveryIDs(got))
	}
}

func testLaneSettleDone(t *testing.T, s store.Endpoints) {
	a := newEndpoint(t, s, "a")
	events := laneEvents(3, "1")
	route(t, s, events, a.ID)
	l := s.EndpointLane(a)
	claimLane(t, l, store.ClaimParams{Owner: "r1", Limit: 3})
	settleLane(t, l, store.SettleParams{Owner: "r1", Done: []uuid.UUID{events[0].ID}})
	if _, ok := delivery(t, s, a.ID, events[0].ID); ok {
		t.Error("a delivered delivery is still there, want it deleted")
	}
	settleLane(t, l, store.SettleParams{Owner: "r1", Done: []uuid.UUID{events[1].ID}, KeepDone: true})
	if d, ok := delivery(t, s, a.ID, events[1].ID); !ok || d.Status != store.StatusDone {
		t.Errorf("a delivered delivery kept = %+v, %v; want done", d, ok)
	}
	// Done applies whoever holds the delivery.
	settleLane(t, l, store.SettleParams{Owner: "r2", Done: []uuid.UUID{events[2].ID}, KeepDone: true})
	if c := counts(t, s, a.ID); c != (store.DeliveryCounts{Done: 2}) {
		t.Errorf("counts = %+v, want 2 done", c)
	}
}

func testLaneSettleRetryFailRelease(t *testing.T, s store.Endpoints) {
	a := newEndpoint(t, s, "a")
	events := laneEvents(3, "1")
	route(t, s, events, a.ID)
	l := s.EndpointLane(a)
	claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 3})
	later := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	settleLane(t, l, store.SettleParams{Owner: "r",
		Retry:   []store.Retry{{ID: events[0].ID, AvailableAt: later, LastError: "503 \xff\x00"}},
		Failed:  []store.Failure{{ID: events[1].ID, LastError: "410 gone"}},
		Release: []store.Released{{ID: events[2].ID}},
	})
	retried, _ := delivery(t, s, a.ID, events[0].ID)
	if retried.Status != store.StatusPending || !retried.AvailableAt.Equal(later) || retried.LastError != "503 \uFFFD\uFFFD" || retried.Attempt != 1 {
		t.Errorf("retried = %+v; want pending at %v, its error cleaned, 1 attempt", retried, later)
	}
	failed, _ := delivery(t, s, a.ID, events[1].ID)
	if failed.Status != store.StatusFailed || failed.LastError != "410 gone" || failed.Attempt != 1 {
		t.Errorf("failed = %+v; want failed with its error", failed)
	}
	released, _ := delivery(t, s, a.ID, events[2].ID)
	if released.Status != store.StatusPending || released.Attempt != 0 {
		t.Errorf("released = %+v; want pending, its attempt not counted", released)
	}
	got := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 3})
	if len(got) != 1 || got[0].ID != events[2].ID || got[0].Attempt != 1 {
		t.Errorf("claim = %+v; want the released delivery, attempt 1 again", got)
	}
}

func testLaneSettleShadow(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	shadow, err := s.EndpointCreate(ctx, store.Endpoint{Name: "shadow", URL: "https://example.com/s", Secret: "whsec_s", Concurrency: 1, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	events := laneEvents(1, "1")
	route(t, s, events, shadow.ID)
	l := s.EndpointLane(shadow)
	claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 1})
	settleLane(t, l, store.SettleParams{Owner: "r", Failed: []store.Failure{{ID: events[0].ID, LastError: "500"}}})
	if d, _ := delivery(t, s, shadow.ID, events[0].ID); d.Status != store.StatusDropped || d.LastError != "500" {
		t.Errorf("shadow's failed delivery = %+v; want dropped", d)
	}
}

func testLaneSettleOwner(t *testing.T, s store.Endpoints) {
	a := newEndpoint(t, s, "a")
	events := laneEvents(3, "1")
	route(t, s, events, a.ID)
	l := s.EndpointLane(a)
	claimLane(t, l, store.ClaimParams{Owner: "r1", Limit: 3})
	settleLane(t, l, store.SettleParams{Owner: "r2",
		Retry:   []store.Retry{{ID: events[0].ID, AvailableAt: time.Now(), LastError: "x"}},
		Failed:  []store.Failure{{ID: events[1].ID, LastError: "x"}},
		Release: []store.Released{{ID: events[2].ID}},
	})
	if c := counts(t, s, a.ID); c != (store.DeliveryCounts{Processing: 3}) {
		t.Errorf("counts after another relay's settle = %+v, want the 3 still processing", c)
	}
	for _, ev := range events {
		if d, _ := delivery(t, s, a.ID, ev.ID); d.LastError != "" || d.Attempt != 1 {
			t.Errorf("delivery = %+v, want untouched", d)
		}
	}
}

func testLaneExtendLease(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	events := laneEvents(4, "1")
	route(t, s, events, a.ID)
	l := s.EndpointLane(a)
	claimLane(t, l, store.ClaimParams{Owner: "r1", Limit: 3})
	claimLane(t, l, store.ClaimParams{Owner: "r2", Limit: 1})
	settleLane(t, l, store.SettleParams{Owner: "r1", Done: []uuid.UUID{events[1].ID}})
	kept, err := l.ExtendLease(ctx, "r1", eventIDs(events), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// events[1] was settled, events[3] is r2's.
	sameIDs(t, "extended", kept, []uuid.UUID{events[0].ID, events[2].ID})
	if kept, err := l.ExtendLease(ctx, "r1", nil, time.Minute); err != nil || len(kept) != 0 {
		t.Errorf("extend nothing = %v, %v", kept, err)
	}
}

func testLaneReclaim(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a, b := newEndpoint(t, s, "a"), newEndpoint(t, s, "b")
	events := laneEvents(3, "1")
	route(t, s, events, a.ID, b.ID)
	la, lb := s.EndpointLane(a), s.EndpointLane(b)
	claimLane(t, la, store.ClaimParams{Owner: "r1", Limit: 2, Lease: time.Millisecond})
	claimLane(t, la, store.ClaimParams{Owner: "r2", Limit: 1, Lease: time.Hour})
	claimLane(t, lb, store.ClaimParams{Owner: "r1", Limit: 3, Lease: time.Millisecond})
	time.Sleep(20 * time.Millisecond) // past the short leases
	got, err := la.ReclaimExpired(ctx, store.ReclaimParams{MaxAttempts: 2})
	if err != nil || len(got) != 1 || got[0] != (store.Reclaimed{Owner: "r1", Events: 2}) {
		t.Fatalf("reclaim = %+v, %v; want r1's 2 deliveries (r2's lease holds)", got, err)
	}
	d, _ := delivery(t, s, a.ID, events[0].ID)
	if d.Status != store.StatusPending || d.Attempt != 1 || !strings.Contains(d.LastError, "r1") || !strings.Contains(d.LastError, "expired") {
		t.Errorf("reclaimed = %+v; want pending, the attempt counted, the expired lease said", d)
	}
	if c := counts(t, s, b.ID); c != (store.DeliveryCounts{Processing: 3}) {
		t.Errorf("the other endpoint's counts = %+v, want its 3 expired leases left to its own lane", c)
	}
	// The second expired lease uses the last attempt: failed.
	claimLane(t, la, store.ClaimParams{Owner: "r1", Limit: 2, Lease: time.Millisecond})
	time.Sleep(20 * time.Millisecond)
	got, err = la.ReclaimExpired(ctx, store.ReclaimParams{MaxAttempts: 2})
	if err != nil || len(got) != 1 || got[0] != (store.Reclaimed{Owner: "r1", Events: 2}) {
		t.Fatalf("second reclaim = %+v, %v", got, err)
	}
	if c := counts(t, s, a.ID); c != (store.DeliveryCounts{Processing: 1, Failed: 2}) {
		t.Errorf("counts = %+v, want the two failed after their 2 attempts", c)
	}
	// A shadow endpoint's drops instead.
	if _, err := s.EndpointUpdate(ctx, store.Endpoint{ID: b.ID, Name: b.Name, URL: b.URL, Concurrency: 1, Shadow: true}); err != nil {
		t.Fatal(err)
	}
	b.Shadow = true
	got, err = s.EndpointLane(b).ReclaimExpired(ctx, store.ReclaimParams{MaxAttempts: 1})
	if err != nil || len(got) != 1 || got[0] != (store.Reclaimed{Owner: "r1", Events: 3}) {
		t.Fatalf("shadow's reclaim = %+v, %v", got, err)
	}
	if c := counts(t, s, b.ID); c != (store.DeliveryCounts{Dropped: 3}) {
		t.Errorf("shadow's counts = %+v, want 3 dropped", c)
	}
	if got, err := la.ReclaimExpired(ctx, store.ReclaimParams{MaxAttempts: 2}); err != nil || len(got) != 0 {
		t.Errorf("reclaim with nothing expired = %+v, %v", got, err)
	}
}

func testLanePurge(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a, b := newEndpoint(t, s, "a"), newEndpoint(t, s, "b")
	events := laneEvents(4, "1")
	route(t, s, events, a.ID, b.ID)
	for _, e := range []store.Endpoint{a, b} {
		l := s.EndpointLane(e)
		claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 3})
		settleLane(t, l, store.SettleParams{Owner: "r", KeepDone: true, Done: eventIDs(events[:2]),
			Failed: []store.Failure{{ID: events[2].ID, LastError: "x"}}})
	}
	if _, err := s.EndpointUpdate(ctx, store.Endpoint{ID: a.ID, Name: a.Name, URL: a.URL, Concurrency: 1, Shadow: true}); err != nil {
		t.Fatal(err)
	}
	a.Shadow = true
	la := s.EndpointLane(a)
	claimLane(t, la, store.ClaimParams{Owner: "r", Limit: 1})
	settleLane(t, la, store.SettleParams{Owner: "r", Failed: []store.Failure{{ID: events[3].ID, LastError: "x"}}})
	var attempts []store.Attempt
	for _, e := range []uuid.UUID{a.ID, b.ID} {
		attempts = append(attempts, store.Attempt{EndpointID: e, EventID: events[0].ID, Attempt: 1, At: time.Now().Add(-time.Minute)})
	}
	if err := s.AttemptInsert(ctx, attempts); err != nil {
		t.Fatal(err)
	}
	if n, err := purgeDone(ctx, la, time.Now().Add(-time.Hour), 10); err != nil || n != 0 {
		t.Errorf("purge before an hour ago = %d, %v; want nothing that old", n, err)
	}
	total := 0
	for {
		n, err := purgeDone(ctx, la, time.Now().Add(time.Hour), 2)
		if err != nil {
			t.Fatal(err)
		}
		if n > 4 {
			t.Fatalf("one purge deleted %d rows, want at most 2 of each table", n)
		}
		total += n
		if n < 2 {
			break
		}
	}
	// 2 done, 1 dropped and 1 attempt; the failed delivery stays.
	if total != 4 {
		t.Errorf("purged %d rows, want 4", total)
	}
	if c := counts(t, s, a.ID); c != (store.DeliveryCounts{Failed: 1}) {
		t.Errorf("counts = %+v, want the dead letter left", c)
	}
	if c := counts(t, s, b.ID); c != (store.DeliveryCounts{Pending: 1, Done: 2, Failed: 1}) {
		t.Errorf("the other endpoint's counts = %+v, want them untouched", c)
	}
	if got, _ := s.AttemptList(ctx, b.ID, 10); len(got) != 1 {
		t.Errorf("the other endpoint's attempts = %d, want 1 untouched", len(got))
	}
	if got, _ := s.AttemptList(ctx, a.ID, 10); len(got) != 0 {
		t.Errorf("the endpoint's attempts = %d, want purged", len(got))
	}
}

func testLaneOrdered(t *testing.T, s store.Endpoints) {
	a, b := newEndpoint(t, s, "a"), newEndpoint(t, s, "b")
	x, y := laneEvents(3, "x"), laneEvents(2, "y")
	route(t, s, []postbox.Event{x[0], y[0], x[1], y[1], x[2]}, a.ID, b.ID)
	la, lb := s.EndpointLane(a), s.EndpointLane(b)
	ordered := func(l store.Source) []uuid.UUID {
		t.Helper()
		return deliveryIDs(claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10, Ordered: true}))
	}
	sameIDs(t, "heads", ordered(la), []uuid.UUID{x[0].ID, y[0].ID})
	sameIDs(t, "heads, while they are processing", ordered(la), nil)
	// The other endpoint's heads are its own.
	sameIDs(t, "the other endpoint's heads", ordered(lb), []uuid.UUID{x[0].ID, y[0].ID})
	settleLane(t, lb, store.SettleParams{Owner: "r", Done: []uuid.UUID{x[0].ID, y[0].ID}})
	sameIDs(t, "the other endpoint's next heads", ordered(lb), []uuid.UUID{x[1].ID, y[1].ID})

	// A head waiting for a retry holds its aggregate back; a delivered
	// one frees the next.
	settleLane(t, la, store.SettleParams{Owner: "r", Done: []uuid.UUID{y[0].ID},
		Retry: []store.Retry{{ID: x[0].ID, AvailableAt: time.Now().Add(time.Hour), LastError: "503"}}})
	sameIDs(t, "heads after a retry", ordered(la), []uuid.UUID{y[1].ID})
	// A failed head holds nothing back.
	settleLane(t, la, store.SettleParams{Owner: "r", Done: []uuid.UUID{y[1].ID}})
	sameIDs(t, "heads while x's waits", ordered(la), nil)
	// Enabling makes the pending deliveries due at once: x's head is due
	// again; failed, it frees x[1].
	if err := s.EndpointSetState(context.Background(), a.ID, store.EndpointEnabled); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "the retried head", ordered(la), []uuid.UUID{x[0].ID})
	settleLane(t, la, store.SettleParams{Owner: "r", Failed: []store.Failure{{ID: x[0].ID, LastError: "410"}}})
	sameIDs(t, "heads after a dead letter", ordered(la), []uuid.UUID{x[1].ID})
	settleLane(t, la, store.SettleParams{Owner: "r", Done: []uuid.UUID{x[1].ID}})
	sameIDs(t, "last head", ordered(la), []uuid.UUID{x[2].ID})
}

// A head retried behind more of its successors than an ordered claim's
// window holds is still found (the window alone would see only its
// successors), and every delivery goes in order; the events without an
// aggregate (the least key, ("", "")) are one aggregate too.
func testLaneOrderedWalk(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	old := time.Now().Add(-time.Hour)
	var x []postbox.Event
	for range 12 {
		ev := laneEvent("", old)
		ev.AggregateType = ""
		x = append(x, ev)
	}
	z := laneEvents(2, "z")
	route(t, s, append(append([]postbox.Event{}, x...), z...), a.ID)
	l := s.EndpointLane(a)
	first := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 1, Ordered: true})
	sameIDs(t, "first head", deliveryIDs(first), eventIDs(x[:1]))
	// Retried now: due, but behind its 11 successors in claim order.
	settleLane(t, l, store.SettleParams{Owner: "r", Retry: []store.Retry{{ID: x[0].ID, AvailableAt: time.Now().Add(-time.Millisecond)}}})
	var got []uuid.UUID
	for range 2 * (len(x) + len(z)) {
		ds := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 1, Ordered: true})
		if len(ds) == 0 {
			break
		}
		got = append(got, ds[0].ID)
		settleLane(t, l, store.SettleParams{Owner: "r", Done: deliveryIDs(ds)})
	}
	var gotX, gotZ []uuid.UUID
	for _, id := range got {
		if id == z[0].ID || id == z[1].ID {
			gotZ = append(gotZ, id)
		} else {
			gotX = append(gotX, id)
		}
	}
	sameIDs(t, "x delivered", gotX, eventIDs(x))
	sameIDs(t, "z delivered", gotZ, eventIDs(z))
	if c, err := s.DeliveryCounts(ctx, a.ID); err != nil || countsOnly(c) != (store.DeliveryCounts{}) {
		t.Errorf("counts = %+v, %v; want every delivery made", c, err)
	}
}

func testLanesApart(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a, b := newEndpoint(t, s, "a"), newEndpoint(t, s, "b")
	events := laneEvents(2, "1")
	route(t, s, events, a.ID, b.ID)
	la, lb := s.EndpointLane(a), s.EndpointLane(b)
	claimLane(t, la, store.ClaimParams{Owner: "r", Limit: 10})
	if c := counts(t, s, b.ID); c != (store.DeliveryCounts{Pending: 2}) {
		t.Fatalf("b's counts after a's claim = %+v", c)
	}
	claimLane(t, lb, store.ClaimParams{Owner: "r", Limit: 1})
	// b's lane settles, extends and releases only b's rows.
	if kept, err := lb.ExtendLease(ctx, "r", eventIDs(events), time.Minute); err != nil || len(kept) != 1 || kept[0] != events[0].ID {
		t.Errorf("b extends %v, %v; want only its own", kept, err)
	}
	settleLane(t, lb, store.SettleParams{Owner: "r", Done: eventIDs(events[:1]), Failed: []store.Failure{{ID: events[1].ID, LastError: "x"}}})
	if c := counts(t, s, a.ID); c != (store.DeliveryCounts{Processing: 2}) {
		t.Errorf("a's counts after b's settle = %+v, want its 2 still processing", c)
	}
	if c := counts(t, s, b.ID); c != (store.DeliveryCounts{Pending: 1}) {
		t.Errorf("b's counts = %+v, want 1 done (deleted) and 1 pending (not leased: not failed)", c)
	}
	if n, err := purgeDone(ctx, lb, time.Now().Add(time.Hour), 10); err != nil || n != 0 {
		t.Errorf("b purges %d, %v; want nothing", n, err)
	}
}

func testLaneSource(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a, err := s.EndpointCreate(ctx, store.Endpoint{Name: "billing-hooks", URL: "https://user:hunter2@example.com/x", Secret: "whsec_topsecret", Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	l := s.EndpointLane(a)
	if err := l.CheckSchema(ctx, store.SchemaParams{Ordered: true}); err != nil {
		t.Errorf("CheckSchema = %v", err)
	}
	err = l.Listen(ctx, func(store.Listening) { t.Error("ready called") }, func() { t.Error("notify called") })
	if !errors.Is(err, store.ErrCannotListen) {
		t.Errorf("Listen = %v, want ErrCannotListen", err)
	}
	name := l.String()
	if !strings.Contains(name, "billing-hooks") || !strings.Contains(name, a.ID.String()) ||
		strings.Contains(name, "hunter2") || strings.Contains(name, "topsecret") {
		t.Errorf("String = %q, want the endpoint's name and id, no secret", name)
	}
}

func testLaneInsertBatch(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a, b, gone := newEndpoint(t, s, "a"), newEndpoint(t, s, "b"), newEndpoint(t, s, "gone")
	if err := s.EndpointDelete(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	e1, e2, e3 := laneEvent("1", time.Time{}), laneEvent("2", later), laneEvent("3", time.Time{})
	e1.Headers = nil
	routes := []store.Route{
		{Event: e3, Endpoints: []uuid.UUID{b.ID, a.ID}},
		{Event: e1, Endpoints: []uuid.UUID{a.ID, gone.ID}},
		{Event: e2, Endpoints: []uuid.UUID{a.ID}},
		{Event: e3, Endpoints: []uuid.UUID{a.ID}}, // already in this batch
	}
	before := time.Now().Add(-time.Minute)
	if n, err := s.DeliveryInsert(ctx, routes); err != nil || n != 4 {
		t.Fatalf("insert = %d, %v; want 4 (the removed endpoint's skipped, the repeated route kept once)", n, err)
	}
	list, err := s.DeliveryList(ctx, a.ID, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]uuid.UUID, len(list))
	for i, d := range list {
		got[i] = d.ID
	}
	sameIDs(t, "a's deliveries in sequence order", got, []uuid.UUID{e3.ID, e1.ID, e2.ID})
	if d := list[1]; d.AvailableAt.Before(before) || d.AvailableAt.After(time.Now().Add(time.Minute)) || len(d.Headers) != 0 || d.Status != store.StatusPending {
		t.Errorf("delivery of an event due at once = %+v; want due now, no headers", d)
	}
	if d := list[2]; !d.AvailableAt.Equal(later) {
		t.Errorf("delivery of an event due later = %v, want %v", d.AvailableAt, later)
	}
	// Again, with one new route: only it is written.
	e4 := laneEvent("4", time.Time{})
	if n, err := s.DeliveryInsert(ctx, append(routes, store.Route{Event: e4, Endpoints: []uuid.UUID{b.ID}})); err != nil || n != 1 {
		t.Fatalf("insert again = %d, %v; want 1", n, err)
	}
	if n, err := s.DeliveryInsert(ctx, nil); err != nil || n != 0 {
		t.Errorf("insert of nothing = %d, %v", n, err)
	}
	// Claims follow the sequence of the batch.
	ds := claimLane(t, s.EndpointLane(b), store.ClaimParams{Owner: "r", Limit: 10})
	sameIDs(t, "b's claim", deliveryIDs(ds), []uuid.UUID{e3.ID, e4.ID})
}

func testEndpointUpdate(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a", "order.*")
	if err := s.EndpointRotateSecret(ctx, a.ID, "whsec_next", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.EndpointSetState(ctx, a.ID, store.EndpointDisabled); err != nil {
		t.Fatal(err)
	}
	want := store.Endpoint{ID: a.ID, Name: "a2", URL: "https://example.org/hook", Types: []string{"payment.*", "refund.issued"},
		RatePerSecond: 7.5, Concurrency: 3, Shadow: true, AllowPrivate: true,
		Secret: "ignored", State: store.EndpointEnabled} // secrets and state are not changed
	got, err := s.EndpointUpdate(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.EndpointGet(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []store.Endpoint{got, stored} {
		if e.Name != want.Name || e.URL != want.URL || fmt.Sprint(e.Types) != fmt.Sprint(want.Types) || e.RatePerSecond != 7.5 ||
			e.Concurrency != 3 || !e.Shadow || !e.AllowPrivate || e.Secret != "whsec_next" || e.PreviousSecret != a.Secret ||
			e.State != store.EndpointDisabled || !e.CreatedAt.Equal(a.CreatedAt) || e.UpdatedAt.Before(a.UpdatedAt) {
			t.Errorf("updated endpoint = %+v, want the settings of %+v, its secrets and state kept", e, want)
		}
	}
	if _, err := s.EndpointUpdate(ctx, store.Endpoint{ID: uuid.New(), Name: "x", URL: "https://x", Concurrency: 1}); !errors.Is(err, store.ErrEndpointNotFound) {
		t.Errorf("update of an unknown endpoint: %v, want ErrEndpointNotFound", err)
	}
}

func testAllowPrivate(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	created, err := s.EndpointCreate(ctx, store.Endpoint{Name: "local", URL: "http://127.0.0.1:9/x", Secret: "whsec_l", Concurrency: 1, AllowPrivate: true})
	if err != nil || !created.AllowPrivate {
		t.Fatalf("create = %+v, %v", created, err)
	}
	other := newEndpoint(t, s, "public")
	if got, err := s.EndpointGet(ctx, created.ID); err != nil || !got.AllowPrivate {
		t.Errorf("get = %+v, %v; want AllowPrivate", got, err)
	}
	all, err := s.EndpointList(ctx)
	if err != nil || len(all) != 2 || !all[0].AllowPrivate || all[1].AllowPrivate || all[1].ID != other.ID {
		t.Errorf("list = %+v, %v; want AllowPrivate on the first only", all, err)
	}
	created.AllowPrivate = false
	if got, err := s.EndpointUpdate(ctx, created); err != nil || got.AllowPrivate {
		t.Errorf("update = %+v, %v; want AllowPrivate off", got, err)
	}
}

func testDeliveryOldestPendingAge(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	if c, err := s.DeliveryCounts(ctx, a.ID); err != nil || c.OldestPendingAge != 0 {
		t.Fatalf("age with nothing pending = %v, %v; want 0", c.OldestPendingAge, err)
	}
	events := []postbox.Event{laneEvent("1", time.Time{}), laneEvent("1", time.Now().Add(time.Hour))}
	route(t, s, events, a.ID)
	time.Sleep(5 * time.Millisecond) // so that the deliveries have an age
	l := s.EndpointLane(a)
	claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10})
	// The one waiting (not due) counts; the one processing does not.
	c, err := s.DeliveryCounts(ctx, a.ID)
	if err != nil || c.OldestPendingAge <= 0 {
		t.Fatalf("age = %v, %v; want that of the delivery waiting", c.OldestPendingAge, err)
	}
	settleLane(t, l, store.SettleParams{Owner: "r", Done: eventIDs(events)})
	if c, err := s.DeliveryCounts(ctx, a.ID); err != nil || c.OldestPendingAge != 0 {
		t.Errorf("age once delivered = %v, %v; want 0", c.OldestPendingAge, err)
	}
}

// DeliveryDue names the endpoints, among those asked about, that have a
// pending delivery due now: not those whose deliveries are leased,
// delivered, failed or due later, nor those with none.
func testDeliveryDue(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	leased, finished, due, later, idle := newEndpoint(t, s, "leased"), newEndpoint(t, s, "finished"),
		newEndpoint(t, s, "due"), newEndpoint(t, s, "later"), newEndpoint(t, s, "idle")
	events := laneEvents(2, "1")
	route(t, s, events, leased.ID, finished.ID, due.ID)
	route(t, s, []postbox.Event{laneEvent("2", time.Now().Add(time.Hour))}, later.ID)
	claimLane(t, s.EndpointLane(leased), store.ClaimParams{Owner: "r", Limit: 10})
	lf := s.EndpointLane(finished)
	claimLane(t, lf, store.ClaimParams{Owner: "r", Limit: 10})
	settleLane(t, lf, store.SettleParams{Owner: "r", Done: eventIDs(events[:1]), KeepDone: true,
		Failed: []store.Failure{{ID: events[1].ID, LastError: "410"}}})
	all := []uuid.UUID{leased.ID, finished.ID, due.ID, later.ID, idle.ID}
	got, err := s.DeliveryDue(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "due", got, []uuid.UUID{due.ID})
	if got, err := s.DeliveryDue(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("due among no endpoints = %v, %v; want none", got, err)
	}
}

// insertTried writes one delivery of each event to endpoint e, as tried
// says (same index), in one batch, and fails t unless all were written.
func insertTried(t *testing.T, s store.Endpoints, e uuid.UUID, events []postbox.Event, tried []store.Tried) {
	t.Helper()
	routes := make([]store.Route, len(events))
	for i, ev := range events {
		routes[i] = store.Route{Event: ev, Endpoints: []uuid.UUID{e}, Tried: []store.Tried{tried[i]}}
	}
	if n, err := s.DeliveryInsert(context.Background(), routes); err != nil || n != len(events) {
		t.Fatalf("insert of tried deliveries = %d, %v; want %d", n, err, len(events))
	}
}

// A delivery written with a Tried is what the lane's settle of that
// attempt would have left: a pending one due at its RetryAt (not claimed
// before it) with its attempts counted, claimed as the attempt after them;
// failed and dropped ones finished with their error; a done one delivered
// (no error), not pending, purged with the kept deliveries; the zero Tried
// a delivery never attempted, due when the event is.
func testInsertTried(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	past := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	future := time.Now().Add(24 * time.Hour).Truncate(time.Microsecond)
	events := laneEvents(6, "1")
	tried := []store.Tried{
		{Attempts: 1, RetryAt: past, LastError: "503"},                                // pending (empty status), due
		{Status: store.StatusPending, Attempts: 2, RetryAt: future, LastError: "429"}, // waiting for its retry
		{Status: store.StatusFailed, Attempts: 3, LastError: "410 gone"},
		{Status: store.StatusDropped, Attempts: 1, LastError: "500"},
		{Status: store.StatusDone, Attempts: 1, LastError: "a delivered delivery has none"},
		{}, // not tried
	}
	before := time.Now().Add(-time.Minute)
	insertTried(t, s, a.ID, events, tried)
	want := []struct {
		status    string
		attempt   int
		lastError string
		at        time.Time // zero: about now
	}{
		{store.StatusPending, 1, "503", past},
		{store.StatusPending, 2, "429", future},
		{store.StatusFailed, 3, "410 gone", time.Time{}},
		{store.StatusDropped, 1, "500", time.Time{}},
		{store.StatusDone, 1, "", time.Time{}},
		{store.StatusPending, 0, "", time.Time{}},
	}
	for i, w := range want {
		d, ok := delivery(t, s, a.ID, events[i].ID)
		if !ok || d.Status != w.status || d.Attempt != w.attempt || d.LastError != w.lastError {
			t.Errorf("delivery %d = %+v (found: %v); want %s, %d attempts, error %q", i, d, ok, w.status, w.attempt, w.lastError)
		}
		if !w.at.IsZero() && !d.AvailableAt.Equal(w.at) || w.at.IsZero() && (d.AvailableAt.Before(before) || d.AvailableAt.After(time.Now().Add(time.Minute))) {
			t.Errorf("delivery %d due at %v, want %v (zero: now)", i, d.AvailableAt, w.at)
		}
	}
	if c := counts(t, s, a.ID); c != (store.DeliveryCounts{Pending: 3, Failed: 1, Dropped: 1, Done: 1}) {
		t.Errorf("counts = %+v, want 3 pending, 1 of each finished status", c)
	}
	// The one due again and the untried one are claimed, each as its next
	// attempt; the one waiting for its retry is not.
	l := s.EndpointLane(a)
	got := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10})
	sameIDs(t, "claim", deliveryIDs(got), []uuid.UUID{events[0].ID, events[5].ID})
	if got[0].Attempt != 2 || got[1].Attempt != 1 {
		t.Errorf("claimed attempts = %d, %d; want 2 (one attempt made before), 1", got[0].Attempt, got[1].Attempt)
	}
	// Once events[0] is delivered, the head of the aggregate is the
	// delivery waiting for its retry: an ordered claim takes nothing, the
	// untried events[5] held back behind it.
	settleLane(t, l, store.SettleParams{Owner: "r", Done: eventIDs(events[:1]), Release: []store.Released{{ID: events[5].ID}}})
	if got := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10, Ordered: true}); len(got) != 0 {
		t.Errorf("ordered claim = %v, want nothing while the head waits for its retry", deliveryIDs(got))
	}
	// The finished kept ones, done and dropped, are purged; the dead letter
	// stays.
	if n, err := purgeDone(ctx, l, time.Now().Add(time.Hour), 10); err != nil || n != 2 {
		t.Errorf("purge = %d, %v; want the done and the dropped deliveries", n, err)
	}
	if c := counts(t, s, a.ID); c != (store.DeliveryCounts{Pending: 2, Failed: 1}) {
		t.Errorf("counts after the purge = %+v, want 2 pending, the failed one", c)
	}
}

// A failed Tried is a dead letter of its endpoint, as a failed settle's.
func testInsertTriedDeadLetter(t *testing.T, s store.Endpoints) {
	dl, ok := s.(store.DeadLetters)
	if !ok {
		t.Fatalf("%T is no store.DeadLetters: a store's driver must be", s)
	}
	a, b := newEndpoint(t, s, "a"), newEndpoint(t, s, "b")
	events := laneEvents(2, "1")
	insertTried(t, s, a.ID, events, []store.Tried{{Status: store.StatusFailed, Attempts: 4, LastError: "410 gone"}, {Attempts: 1, LastError: "503"}})
	route(t, s, events[:1], b.ID)
	page, err := dl.FailedList(context.Background(), store.FailedListParams{FailedFilter: store.FailedFilter{Endpoint: a.ID}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 {
		t.Fatalf("a's dead letters = %d, want the failed Tried only", len(page.Events))
	}
	r := page.Events[0]
	if r.ID != events[0].ID || r.Endpoint != a.ID || r.Status != store.StatusFailed || r.LastError != "410 gone" ||
		r.Attempts != 4 || r.ProcessedAt.IsZero() || r.EventType != events[0].EventType {
		t.Errorf("dead letter = %+v; want the failed delivery of a, 4 attempts, its error, processed", r)
	}
	if page, err := dl.FailedList(context.Background(), store.FailedListParams{FailedFilter: store.FailedFilter{Endpoint: b.ID}, Limit: 10}); err != nil || len(page.Events) != 0 {
		t.Errorf("b's dead letters = %+v, %v; want none", page.Events, err)
	}
}

// A batch mixes routes without Tried, routes with Tried, and zero Tried
// entries (endpoints not tried) beside tried ones: each delivery is
// written as its own entry says, all numbered in the batch's order. A
// batch whose Tried are all zero is a plain batch.
func testInsertTriedMixed(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a, b, c := newEndpoint(t, s, "a"), newEndpoint(t, s, "b"), newEndpoint(t, s, "c")
	later := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	evs := laneEvents(4, "1")
	routes := []store.Route{
		{Event: evs[0], Endpoints: []uuid.UUID{a.ID, b.ID}},
		{Event: evs[1], Endpoints: []uuid.UUID{a.ID, b.ID, c.ID}, Tried: []store.Tried{
			{}, {Status: store.StatusFailed, Attempts: 1, LastError: "410"}, {Attempts: 1, RetryAt: later, LastError: "503"}}},
		{Event: evs[2], Endpoints: []uuid.UUID{c.ID}, Tried: []store.Tried{{}}},
	}
	if n, err := s.DeliveryInsert(ctx, routes); err != nil || n != 6 {
		t.Fatalf("insert = %d, %v; want 6", n, err)
	}
	if c := counts(t, s, b.ID); c != (store.DeliveryCounts{Pending: 1, Failed: 1}) {
		t.Errorf("b's counts = %+v, want 1 pending, 1 failed", c)
	}
	sameIDs(t, "a's claim", deliveryIDs(claimLane(t, s.EndpointLane(a), store.ClaimParams{Owner: "r", Limit: 10})), eventIDs(evs[:2]))
	sameIDs(t, "b's claim", deliveryIDs(claimLane(t, s.EndpointLane(b), store.ClaimParams{Owner: "r", Limit: 10})), eventIDs(evs[:1]))
	gotC := claimLane(t, s.EndpointLane(c), store.ClaimParams{Owner: "r", Limit: 10})
	sameIDs(t, "c's claim", deliveryIDs(gotC), eventIDs(evs[2:3]))
	if gotC[0].Attempt != 1 {
		t.Errorf("c's untried delivery claimed as attempt %d, want 1", gotC[0].Attempt)
	}
	if d, _ := delivery(t, s, c.ID, evs[1].ID); d.Status != store.StatusPending || !d.AvailableAt.Equal(later) || d.Attempt != 1 || d.LastError != "503" {
		t.Errorf("c's tried delivery = %+v; want pending until %v, 1 attempt, its error", d, later)
	}
	// The seqs follow the batch: a's deliveries in the routes' order.
	list, err := s.DeliveryList(ctx, a.ID, "", 10)
	if err != nil || len(list) != 2 || list[0].ID != evs[0].ID || list[1].ID != evs[1].ID {
		t.Fatalf("a's list = %+v, %v", list, err)
	}
	// A batch whose Tried are all zero: plain pending deliveries.
	if n, err := s.DeliveryInsert(ctx, []store.Route{{Event: evs[3], Endpoints: []uuid.UUID{a.ID, b.ID}, Tried: make([]store.Tried, 2)}}); err != nil || n != 2 {
		t.Fatalf("insert of untried = %d, %v; want 2", n, err)
	}
	for _, e := range []uuid.UUID{a.ID, b.ID} {
		if d, _ := delivery(t, s, e, evs[3].ID); d.Status != store.StatusPending || d.Attempt != 0 || d.LastError != "" {
			t.Errorf("untried delivery = %+v; want pending, never attempted", d)
		}
	}
}

// A batch with a Tried of a status it does not name, or whose Tried does
// not hold one entry per endpoint, is refused with an error, and nothing
// of it is written, not even its valid routes.
func testInsertTriedRefused(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a, b := newEndpoint(t, s, "a"), newEndpoint(t, s, "b")
	ok := store.Route{Event: laneEvent("1", time.Time{}), Endpoints: []uuid.UUID{a.ID}}
	for name, bad := range map[string]store.Route{
		"status processing": {Event: laneEvent("2", time.Time{}), Endpoints: []uuid.UUID{a.ID, b.ID},
			Tried: []store.Tried{{}, {Status: store.StatusProcessing, Attempts: 1}}},
		"status in capitals": {Event: laneEvent("2", time.Time{}), Endpoints: []uuid.UUID{a.ID},
			Tried: []store.Tried{{Status: "FAILED"}}},
		"status unknown":     {Event: laneEvent("2", time.Time{}), Endpoints: []uuid.UUID{a.ID}, Tried: []store.Tried{{Status: "delivered"}}},
		"fewer Tried":        {Event: laneEvent("2", time.Time{}), Endpoints: []uuid.UUID{a.ID, b.ID}, Tried: []store.Tried{{}}},
		"more Tried":         {Event: laneEvent("2", time.Time{}), Endpoints: []uuid.UUID{a.ID}, Tried: make([]store.Tried, 2)},
		"empty, not nil":     {Event: laneEvent("2", time.Time{}), Endpoints: []uuid.UUID{a.ID}, Tried: []store.Tried{}},
		"Tried, no endpoint": {Event: laneEvent("2", time.Time{}), Tried: []store.Tried{{Status: store.StatusFailed}}},
	} {
		for _, routes := range [][]store.Route{{ok, bad}, {bad, ok}} {
			n, err := s.DeliveryInsert(ctx, routes)
			if err == nil || n != 0 {
				t.Errorf("%s: insert = %d, %v; want an error", name, n, err)
			}
		}
	}
	for _, e := range []uuid.UUID{a.ID, b.ID} {
		if c := counts(t, s, e); c != (store.DeliveryCounts{}) {
			t.Errorf("counts = %+v after refused batches, want nothing written", c)
		}
	}
	if n, err := s.DeliveryInsert(ctx, []store.Route{ok}); err != nil || n != 1 {
		t.Errorf("the valid route alone = %d, %v; want it written", n, err)
	}
}

// Hostile Tried values. The rule: values a delivery can hold are written,
// brought into the bounds the lanes keep (attempts from 0 to the
// 1,000,000,000 at which settles saturate, an error cleaned and cut as a
// settle's); a pending RetryAt out of the times a row may hold (years 1 to
// 9999) is refused with an error naming RetryAt, nothing written; a
// RetryAt that does not apply (a finished Tried) is ignored. Nothing
// panics, nothing fails a batch without an error.
func testInsertTriedHostile(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	// Year 1's first instant is the zero time: no RetryAt (due when the
	// event is). A second later is a retry at year 1.
	year1 := time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)
	year9999 := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	huge := "\xff\x00" + strings.Repeat("e", 2<<20)
	events := laneEvents(7, "1")
	insertTried(t, s, a.ID, events, []store.Tried{
		{Attempts: math.MaxInt, RetryAt: year1, LastError: huge},
		{Attempts: -5, RetryAt: year9999},
		{Attempts: math.MinInt, Status: store.StatusFailed, LastError: huge},
		{Status: store.StatusFailed, RetryAt: time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Status: store.StatusDropped, Attempts: math.MaxInt32 + 1, RetryAt: time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Attempts: 1_000_000_000},
		{Attempts: -7}, // due: claimed as attempt 1, not as a row out of bounds
	})
	// A settle's error, for the bound of the huge one.
	settled := laneEvent("2", time.Time{})
	route(t, s, []postbox.Event{settled}, a.ID)
	l := s.EndpointLane(a)
	for _, d := range claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10}) {
		if d.ID == settled.ID {
			settleLane(t, l, store.SettleParams{Owner: "r", Retry: []store.Retry{{ID: d.ID, AvailableAt: time.Now().Add(time.Hour), LastError: huge}}})
		}
	}
	bound, _ := delivery(t, s, a.ID, settled.ID)
	if len(bound.LastError) >= len(huge) || bound.LastError == "" {
		t.Fatalf("a settle's error of %d bytes kept %d bytes, want it cut", len(huge), len(bound.LastError))
	}
	want := []struct {
		status  string
		attempt int // as DeliveryList reads it
		bounded bool
	}{
		{store.StatusProcessing, 1_000_000_000 + 1, true}, // due at year 1: claimed above, its attempt in flight
		{store.StatusPending, 0, false},
		{store.StatusFailed, 0, true},
		{store.StatusFailed, 0, false},
		{store.StatusDropped, 1_000_000_000, false},
		{store.StatusProcessing, 1_000_000_000 + 1, false},
		{store.StatusProcessing, 1, false},
	}
	for i, w := range want {
		d, ok := delivery(t, s, a.ID, events[i].ID)
		if !ok || d.Status != w.status || d.Attempt != w.attempt {
			t.Errorf("delivery %d = %s, %d attempts (found: %v); want %s, %d", i, d.Status, d.Attempt, ok, w.status, w.attempt)
		}
		if w.bounded && (d.LastError != bound.LastError || !utf8.ValidString(d.LastError) || strings.ContainsRune(d.LastError, 0)) {
			t.Errorf("delivery %d: error of %d bytes, want it cleaned and cut as a settle's (%d bytes)", i, len(d.LastError), len(bound.LastError))
		}
	}
	if d, _ := delivery(t, s, a.ID, events[0].ID); !d.AvailableAt.Equal(year1) {
		t.Errorf("retry at year 1 read as %v", d.AvailableAt)
	}
	if d, _ := delivery(t, s, a.ID, events[1].ID); !d.AvailableAt.Equal(year9999) {
		t.Errorf("retry at year 9999 read as %v", d.AvailableAt)
	}
	// A pending RetryAt out of years 1 to 9999 is refused.
	for _, at := range []time.Time{time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(292277026596, 1, 1, 0, 0, 0, 0, time.UTC)} {
		ev := laneEvent("3", time.Time{})
		n, err := s.DeliveryInsert(ctx, []store.Route{{Event: ev, Endpoints: []uuid.UUID{a.ID}, Tried: []store.Tried{{Attempts: 1, RetryAt: at}}}})
		if err == nil || n != 0 || !strings.Contains(err.Error(), "RetryAt") {
			t.Errorf("retry at %v: insert = %d, %v; want an error naming RetryAt", at, n, err)
		}
		if _, ok := delivery(t, s, a.ID, ev.ID); ok {
			t.Errorf("retry at %v: the delivery was written", at)
		}
	}
}

// DeliveryPending names the endpoints, among those asked about, that have
// a pending delivery, due or not, leased or not: not those whose
// deliveries all ended (failed, dropped, done), nor those with none, nor
// ids of no endpoint.
func testDeliveryPending(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	due, later, leased, retrying := newEndpoint(t, s, "due"), newEndpoint(t, s, "later"), newEndpoint(t, s, "leased"), newEndpoint(t, s, "retrying")
	finished, idle, removed := newEndpoint(t, s, "finished"), newEndpoint(t, s, "idle"), newEndpoint(t, s, "removed")
	route(t, s, laneEvents(1, "1"), due.ID, leased.ID, removed.ID)
	route(t, s, []postbox.Event{laneEvent("2", time.Now().Add(time.Hour))}, later.ID)
	claimLane(t, s.EndpointLane(leased), store.ClaimParams{Owner: "r", Limit: 10})
	insertTried(t, s, retrying.ID, laneEvents(1, "3"), []store.Tried{{Attempts: 1, RetryAt: time.Now().Add(time.Hour), LastError: "503"}})
	insertTried(t, s, finished.ID, laneEvents(3, "4"), []store.Tried{
		{Status: store.StatusFailed, Attempts: 1, LastError: "410"}, {Status: store.StatusDropped, Attempts: 1}, {Status: store.StatusDone, Attempts: 1}})
	if err := s.EndpointDelete(ctx, removed.ID); err != nil {
		t.Fatal(err)
	}
	all := []uuid.UUID{due.ID, later.ID, leased.ID, retrying.ID, finished.ID, idle.ID, removed.ID, uuid.New()}
	got, err := s.DeliveryPending(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	sameSet(t, "pending", got, []uuid.UUID{due.ID, later.ID, leased.ID, retrying.ID})
	// A delivery made leaves its endpoint without a pending one.
	l := s.EndpointLane(due)
	settleLane(t, l, store.SettleParams{Owner: "r", Done: deliveryIDs(claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10}))})
	if got, err := s.DeliveryPending(ctx, []uuid.UUID{due.ID, later.ID}); err != nil {
		t.Fatal(err)
	} else {
		sameIDs(t, "pending once due's delivery was made", got, []uuid.UUID{later.ID})
	}
	for _, none := range [][]uuid.UUID{nil, {}} {
		if got, err := s.DeliveryPending(ctx, none); err != nil || len(got) != 0 {
			t.Errorf("pending among no endpoints = %v, %v; want none", got, err)
		}
	}
}

// recordingSink records what it publishes, failing the first attempt of
// the events in failFirst with a retryable error.
type recordingSink struct {
	mu        sync.Mutex
	failFirst map[uuid.UUID]bool
	published []sink.Message // accepted
	attempts  map[uuid.UUID][]int
}

func (s *recordingSink) Publish(_ context.Context, m *sink.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts[m.ID] = append(s.attempts[m.ID], m.Attempt)
	if s.failFirst[m.ID] && m.Attempt == 1 {
		return &sink.Error{Kind: sink.Retryable, Err: errors.New("try again")}
	}
	s.published = append(s.published, *m)
	return nil
}

func (s *recordingSink) String() string { return "recording sink" }

func (s *recordingSink) Destination() sink.Destination {
	return sink.Destination{System: "test", Name: "recording"}
}

func (s *recordingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.published)
}

// A relay drains a lane in ordered mode: every delivery of the endpoint
// once, each aggregate's in order, a retried one on its second attempt;
// another endpoint's deliveries are left alone.
func testRelayOverLane(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a, b := newEndpoint(t, s, "a"), newEndpoint(t, s, "b")
	var events []postbox.Event
	for i := range 20 {
		events = append(events, laneEvent([]string{"p", "q"}[i%2], time.Time{}))
	}
	route(t, s, events, a.ID, b.ID)
	rec := &recordingSink{failFirst: map[uuid.UUID]bool{events[2].ID: true}, attempts: map[uuid.UUID][]int{}}
	r, err := relay.New(relay.Config{
		Store: s.EndpointLane(a), Sink: rec, Owner: "lane-relay", Ordered: true,
		Logger:       testlog.Discard(),
		PollInterval: 10 * time.Millisecond, BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		BatchSize: 4, Concurrency: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	deadline := time.Now().Add(30 * time.Second)
	for rec.count() < len(events) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("relay: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.published) != len(events) {
		t.Fatalf("published %d deliveries, want %d", len(rec.published), len(events))
	}
	want, got := map[string][]uuid.UUID{}, map[string][]uuid.UUID{}
	for _, ev := range events {
		want[ev.AggregateID] = append(want[ev.AggregateID], ev.ID)
	}
	for _, m := range rec.published {
		got[m.AggregateID] = append(got[m.AggregateID], m.ID)
	}
	for agg := range want {
		sameIDs(t, "aggregate "+agg+" published", got[agg], want[agg])
	}
	if got := rec.attempts[events[2].ID]; fmt.Sprint(got) != "[1 2]" {
		t.Errorf("attempts of the retried delivery = %v, want [1 2]", got)
	}
	if c := counts(t, s, a.ID); c != (store.DeliveryCounts{}) {
		t.Errorf("counts = %+v, want every delivery made and deleted", c)
	}
	if c := counts(t, s, b.ID); c != (store.DeliveryCounts{Pending: int64(len(events))}) {
		t.Errorf("the other endpoint's counts = %+v, want its deliveries untouched", c)
	}
}
