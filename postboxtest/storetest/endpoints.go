package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

// runEndpoints runs the suite of store.Endpoints.
func runEndpoints(t *testing.T, newStore func(t *testing.T) store.Endpoints) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Endpoints)
	}{
		{"CreateGetListRemove", testEndpointCRUD},
		{"RotateSecretKeepsThePreviousOneForItsGrace", testEndpointRotate},
		{"InsertIsIdempotentAndSkipsRemovedEndpoints", testDeliveryInsert},
		{"EnableMakesPendingDue", testEndpointEnable},
		{"FailingSinceIsKeptUntilRecovered", testEndpointFailing},
		{"BreakerRecordedAndCleared", testEndpointBreaker},
		{"AttemptsWrittenListedPurged", testAttempts},
		{"FilterEnvelopeSignatureSealedRoundTrip", testSealedSettingsRoundTrip},
		{"SealSwapsOnlyFromTheDataRead", testEndpointSeal},
		{"SealRaceHasOneWinner", testEndpointSealRace},
		{"UpdateFromAStaleUpdatedAtChangesNothing", testEndpointUpdateStale},
		{"UpdateFromTheCurrentUpdatedAtOrZero", testEndpointUpdateCurrent},
		{"ConcurrentUpdatesLoseNoChange", testEndpointUpdateRace},
		{"RefusedTextsWriteNothing", testEndpointRefusedTexts},
		{"HostileSettingsAndBlobsRoundTripExactly", testSealedHostileRoundTrip},
		{"AttemptSummaryCountsSinceAndSuccesses", testAttemptSummary},
		{"AttemptSummaryHostileEdges", testAttemptSummaryEdges},
		{"DeliveryCountsAllIsDeliveryCountsOfEach", testDeliveryCountsAll},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
}

func newEndpoint(t *testing.T, s store.Endpoints, name string, types ...string) store.Endpoint {
	t.Helper()
	e, err := s.EndpointCreate(context.Background(), store.Endpoint{
		Name: name, URL: "https://example.com/" + name, Types: types,
		Secret: clearSecret, Concurrency: 4, RatePerSecond: 2.5,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func testEvent(eventType string) postbox.Event {
	return postbox.Event{ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: "1", EventType: eventType,
		Payload: []byte(`{"n":1}`), Headers: map[string]string{"traceparent": "00-x"}}
}

func testEndpointCRUD(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a", "order.*", "payment.succeeded")
	b := newEndpoint(t, s, "b")
	got, err := s.EndpointGet(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != a.URL || !reflect.DeepEqual(got.Types, a.Types) || got.Secret != a.Secret ||
		got.Concurrency != 4 || got.RatePerSecond != 2.5 || got.State != store.EndpointEnabled || got.Shadow {
		t.Fatalf("got %+v, want %+v", got, a)
	}
	all, err := s.EndpointList(ctx)
	if err != nil || len(all) != 2 || all[0].ID != a.ID || all[1].ID != b.ID || all[1].Types != nil {
		t.Fatalf("list = %+v, %v", all, err)
	}
	if err := s.EndpointDelete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		func() error { _, err := s.EndpointGet(ctx, a.ID); return err }(),
		s.EndpointDelete(ctx, a.ID),
		s.EndpointSetState(ctx, a.ID, store.EndpointDisabled),
		s.EndpointRotateSecret(ctx, a.ID, "whsec_x", time.Now()),
	} {
		if !errors.Is(err, store.ErrEndpointNotFound) {
			t.Errorf("on a removed endpoint: %v, want ErrEndpointNotFound", err)
		}
	}
}

func testEndpointRotate(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	e := newEndpoint(t, s, "a")
	grace := time.Now().Add(time.Hour)
	if err := s.EndpointRotateSecret(ctx, e.ID, "whsec_new", grace); err != nil {
		t.Fatal(err)
	}
	got, err := s.EndpointGet(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"whsec_new", e.Secret}; !reflect.DeepEqual(got.Secrets(time.Now()), want) {
		t.Errorf("secrets during the grace = %q, want %q", got.Secrets(time.Now()), want)
	}
	if want := []string{"whsec_new"}; !reflect.DeepEqual(got.Secrets(grace.Add(time.Second)), want) {
		t.Errorf("secrets after the grace = %q, want %q", got.Secrets(grace.Add(time.Second)), want)
	}
}

func testDeliveryInsert(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a, b := newEndpoint(t, s, "a"), newEndpoint(t, s, "b")
	ev := testEvent("order.created")
	for i := range 2 {
		n, err := s.DeliveryInsert(ctx, []store.Route{{Event: ev, Endpoints: []uuid.UUID{a.ID, b.ID}}})
		if want := []int{2, 0}[i]; err != nil || n != want {
			t.Fatalf("insert %d: %d, %v; want %d", i+1, n, err, want)
		}
	}
	if err := s.EndpointDelete(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeliveryInsert(ctx, []store.Route{{Event: testEvent("x"), Endpoints: []uuid.UUID{a.ID, b.ID}}})
	if err != nil || n != 1 {
		t.Fatalf("insert with a removed endpoint: %d, %v; want 1", n, err)
	}
	list, err := s.DeliveryList(ctx, a.ID, store.StatusPending, 10)
	if err != nil || len(list) != 2 {
		t.Fatalf("list = %d, %v", len(list), err)
	}
	d := list[0]
	if d.ID != ev.ID || d.EventType != ev.EventType || string(d.Payload) != `{"n": 1}` && string(d.Payload) != `{"n":1}` ||
		d.AggregateID != "1" || d.Headers["traceparent"] != "00-x" || d.EndpointID != a.ID {
		t.Errorf("delivery = %+v, want a copy of %+v", d, ev)
	}
}

func testEndpointEnable(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	ev := testEvent("t")
	ev.AvailableAt = time.Now().Add(time.Hour)
	if _, err := s.DeliveryInsert(ctx, []store.Route{{Event: ev, Endpoints: []uuid.UUID{a.ID}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.EndpointSetState(ctx, a.ID, store.EndpointAutoDisabled); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.EndpointGet(ctx, a.ID); got.State != store.EndpointAutoDisabled {
		t.Fatalf("state = %q", got.State)
	}
	if err := s.EndpointSetState(ctx, a.ID, store.EndpointEnabled); err != nil {
		t.Fatal(err)
	}
	got, err := s.EndpointLane(a).Claim(ctx, store.ClaimParams{Owner: "r", Limit: 5, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != ev.ID {
		t.Fatalf("claim after enable = %v, %v; want the accumulated delivery", got, err)
	}
}

func testEndpointFailing(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	t0 := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	for i, now := range []time.Time{t0, t0.Add(time.Minute)} {
		since, err := s.EndpointFailing(ctx, a.ID, now)
		if err != nil || !since.Equal(t0) {
			t.Fatalf("failing %d: since %v, %v; want %v", i, since, err, t0)
		}
	}
	if err := s.EndpointRecovered(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.EndpointGet(ctx, a.ID); !got.FailingSince.IsZero() {
		t.Errorf("failing since %v after recovery", got.FailingSince)
	}
}

// testEndpointBreaker: the breaker's time is read back by EndpointGet and
// EndpointList, is the endpoint's alone, replaced by a later one (a probe
// that failed), cleared by the zero time, and an unknown endpoint is
// ErrEndpointNotFound.
func testEndpointBreaker(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a, b := newEndpoint(t, s, "a"), newEndpoint(t, s, "b")
	if !a.BreakerOpenUntil.IsZero() {
		t.Fatalf("a new endpoint's breaker is open until %v", a.BreakerOpenUntil)
	}
	breakers := func() map[uuid.UUID]time.Time {
		t.Helper()
		all, err := s.EndpointList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[uuid.UUID]time.Time{}
		for _, e := range all {
			out[e.ID] = e.BreakerOpenUntil
		}
		return out
	}
	until := time.Now().Add(5 * time.Second).Truncate(time.Microsecond)
	for i, at := range []time.Time{until, until.Add(10 * time.Second)} {
		if err := s.EndpointBreaker(ctx, a.ID, at); err != nil {
			t.Fatalf("breaker %d: %v", i, err)
		}
		got, err := s.EndpointGet(ctx, a.ID)
		if err != nil || !got.BreakerOpenUntil.Equal(at) {
			t.Fatalf("breaker %d: get says open until %v, %v; want %v", i, got.BreakerOpenUntil, err, at)
		}
		if all := breakers(); !all[a.ID].Equal(at) || !all[b.ID].IsZero() {
			t.Fatalf("breaker %d: list says a open until %v, b until %v; want %v and closed", i, all[a.ID], all[b.ID], at)
		}
	}
	// An update returns the endpoint as stored, its breaker included.
	a.Name = "a2"
	if got, err := s.EndpointUpdate(ctx, a); err != nil || !got.BreakerOpenUntil.Equal(until.Add(10*time.Second)) {
		t.Fatalf("update: breaker open until %v, %v; want %v", got.BreakerOpenUntil, err, until.Add(10*time.Second))
	}
	if err := s.EndpointBreaker(ctx, a.ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.EndpointGet(ctx, a.ID); err != nil || !got.BreakerOpenUntil.IsZero() {
		t.Errorf("breaker open until %v, %v after it closed; want zero", got.BreakerOpenUntil, err)
	}
	if err := s.EndpointBreaker(ctx, uuid.New(), until); !errors.Is(err, store.ErrEndpointNotFound) {
		t.Errorf("breaker of an unknown endpoint: %v, want ErrEndpointNotFound", err)
	}
}

func testAttempts(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	old := time.Now().Add(-48 * time.Hour).Truncate(time.Microsecond)
	var batch []store.Attempt
	for i := range 5 {
		batch = append(batch, store.Attempt{EndpointID: a.ID, EventID: uuid.New(), EventType: "t", Attempt: 1,
			StatusCode: 500, Duration: 1500 * time.Microsecond, Response: "oops\x00", Error: "boom", At: old.Add(time.Duration(i) * time.Second)})
	}
	batch[4].At = time.Now()
	if err := s.AttemptInsert(ctx, batch); err != nil {
		t.Fatal(err)
	}
	got, err := s.AttemptList(ctx, a.ID, 10)
	if err != nil || len(got) != 5 {
		t.Fatalf("list = %d, %v", len(got), err)
	}
	if g := got[0]; g.EventID != batch[4].EventID || g.StatusCode != 500 || g.Duration != 1500*time.Microsecond || g.Response != "oops\uFFFD" || g.Error != "boom" {
		t.Errorf("first attempt listed = %+v, want the most recent, %+v", g, batch[4])
	}
	ev := testEvent("t")
	if _, err := s.DeliveryInsert(ctx, []store.Route{{Event: ev, Endpoints: []uuid.UUID{a.ID}}}); err != nil {
		t.Fatal(err)
	}
	lane := s.EndpointLane(a)
	claimed, err := lane.Claim(ctx, store.ClaimParams{Owner: "r", Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim = %v, %v; want the delivery", claimed, err)
	}
	if err := lane.Settle(ctx, store.SettleParams{Owner: "r", Done: []uuid.UUID{ev.ID}, KeepDone: true}); err != nil {
		t.Fatal(err)
	}
	total := 0
	for {
		n, err := purgeDone(ctx, lane, time.Now().Add(-time.Hour), 2)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if n > 4 {
			t.Fatalf("one purge deleted %d rows, want at most 2 of each table", n)
		}
		total += n
	}
	if total != 4 {
		t.Errorf("purged %d rows before an hour ago, want the 4 old attempts", total)
	}
	if n, _ := purgeDone(ctx, lane, time.Now().Add(time.Hour), 10); n != 2 {
		t.Errorf("purged %d recent rows, want the last attempt and the done delivery", n)
	}
}

// countsOnly is c without its OldestPendingAge.
func countsOnly(c store.DeliveryCounts) store.DeliveryCounts {
	c.OldestPendingAge = 0
	return c
}
