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

// NewEndpoints returns a fresh, migrated, empty store for one test.
type NewEndpoints func(t *testing.T) store.Endpoints

// RunEndpoints runs the conformance suite of store.Endpoints.
func RunEndpoints(t *testing.T, newStore NewEndpoints) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Endpoints)
	}{
		{"CreateGetListRemove", testEndpointCRUD},
		{"RotateSecretKeepsThePreviousOneForItsGrace", testEndpointRotate},
		{"InsertIsIdempotentAndSkipsRemovedEndpoints", testDeliveryInsert},
		{"ClaimSettleByOwner", testDeliveryClaimSettle},
		{"ReclaimExpiredLeases", testDeliveryReclaim},
		{"EnableMakesPendingDue", testEndpointEnable},
		{"FailingSinceIsKeptUntilRecovered", testEndpointFailing},
		{"AttemptsWrittenListedPurged", testAttempts},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
}

func newEndpoint(t *testing.T, s store.Endpoints, name string, types ...string) store.Endpoint {
	t.Helper()
	e, err := s.EndpointCreate(context.Background(), store.Endpoint{
		Name: name, URL: "https://example.com/" + name, Types: types,
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Concurrency: 4, RatePerSecond: 2.5,
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

func testDeliveryClaimSettle(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a, b := newEndpoint(t, s, "a"), newEndpoint(t, s, "b")
	var events []postbox.Event
	for range 3 {
		ev := testEvent("t")
		events = append(events, ev)
		if _, err := s.DeliveryInsert(ctx, []store.Route{{Event: ev, Endpoints: []uuid.UUID{a.ID, b.ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(owner string, limit int) []store.EndpointDelivery {
		t.Helper()
		got, err := s.DeliveryClaim(ctx, store.DeliveryClaimParams{EndpointID: a.ID, Owner: owner, Limit: limit, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := claim("r1", 2)
	if len(first) != 2 || first[0].ID != events[0].ID || first[1].ID != events[1].ID || first[0].Attempt != 1 {
		t.Fatalf("claim = %+v", first)
	}
	if second := claim("r2", 10); len(second) != 1 || second[0].ID != events[2].ID {
		t.Fatalf("second claim = %+v, want only the third event", second)
	}
	outcomes := []store.DeliveryOutcome{
		{EventID: events[0].ID, EndpointID: a.ID, Status: store.StatusDone},
		{EventID: events[1].ID, EndpointID: a.ID, Status: store.StatusPending, AvailableAt: time.Now().Add(-time.Second), LastError: "503"},
		{EventID: events[2].ID, EndpointID: a.ID, Status: store.StatusFailed, LastError: "not mine"},
	}
	if err := s.DeliverySettle(ctx, "r1", outcomes); err != nil {
		t.Fatal(err)
	}
	c, err := s.DeliveryCounts(ctx, a.ID)
	c.OldestPendingAge = 0 // RunLane tests it
	if want := (store.DeliveryCounts{Pending: 1, Processing: 1, Done: 1}); err != nil || c != want {
		t.Fatalf("counts = %+v, %v; want %+v (r1 may not settle r2's claim)", c, err, want)
	}
	retried := claim("r1", 10)
	if len(retried) != 1 || retried[0].ID != events[1].ID || retried[0].Attempt != 2 || retried[0].LastError != "503" {
		t.Fatalf("retry claim = %+v", retried)
	}
	if c, _ := s.DeliveryCounts(ctx, b.ID); countsOnly(c) != (store.DeliveryCounts{Pending: 3}) {
		t.Errorf("the other endpoint's counts = %+v, want 3 pending", c)
	}
	idle := newEndpoint(t, s, "idle")
	due, err := s.DeliveryDue(ctx, []uuid.UUID{a.ID, b.ID, idle.ID})
	if err != nil || len(due) != 1 || due[0] != b.ID {
		t.Errorf("due = %v, %v; want only %s (a's deliveries are leased or done, idle has none)", due, err, b.ID)
	}
}

func testDeliveryReclaim(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	for range 2 {
		if _, err := s.DeliveryInsert(ctx, []store.Route{{Event: testEvent("t"), Endpoints: []uuid.UUID{a.ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.DeliveryClaim(ctx, store.DeliveryClaimParams{EndpointID: a.ID, Owner: "r1", Limit: 1, Lease: time.Millisecond})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	if _, err := s.DeliveryClaim(ctx, store.DeliveryClaimParams{EndpointID: a.ID, Owner: "r1", Limit: 1, Lease: time.Hour}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	n, err := s.DeliveryReclaim(ctx, 1)
	if err != nil || n != 1 {
		t.Fatalf("reclaim = %d, %v; want 1 (the unexpired lease stays)", n, err)
	}
	if c, _ := s.DeliveryCounts(ctx, a.ID); c != (store.DeliveryCounts{Processing: 1, Failed: 1}) {
		t.Errorf("counts = %+v, want the reclaimed one failed after its one attempt", c)
	}
	for i, want := range []int{1, 0} {
		if n, err := s.DeliveryRetryFailed(ctx, a.ID, 10); err != nil || n != want {
			t.Fatalf("retry %d: %d, %v; want %d", i+1, n, err, want)
		}
	}
	again, err := s.DeliveryClaim(ctx, store.DeliveryClaimParams{EndpointID: a.ID, Owner: "r2", Limit: 5, Lease: time.Minute})
	if err != nil || len(again) != 1 || again[0].Attempt != 1 {
		t.Errorf("claim after the retry = %+v, %v; want the failed delivery as attempt 1", again, err)
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
	got, err := s.DeliveryClaim(ctx, store.DeliveryClaimParams{EndpointID: a.ID, Owner: "r", Limit: 5, Lease: time.Minute})
	if err != nil || len(got) != 1 {
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
	claimed, _ := s.DeliveryClaim(ctx, store.DeliveryClaimParams{EndpointID: a.ID, Owner: "r", Limit: 1, Lease: time.Minute})
	if len(claimed) != 1 {
		t.Fatal("no claim")
	}
	if err := s.DeliverySettle(ctx, "r", []store.DeliveryOutcome{{EventID: ev.ID, EndpointID: a.ID, Status: store.StatusDone}}); err != nil {
		t.Fatal(err)
	}
	total := 0
	for {
		n, err := s.EndpointsPurge(ctx, time.Now().Add(-time.Hour), 2)
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
	if n, _ := s.EndpointsPurge(ctx, time.Now().Add(time.Hour), 10); n != 2 {
		t.Errorf("purged %d recent rows, want the last attempt and the done delivery", n)
	}
}

// countsOnly is c without its OldestPendingAge.
func countsOnly(c store.DeliveryCounts) store.DeliveryCounts {
	c.OldestPendingAge = 0
	return c
}
