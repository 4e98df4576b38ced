package chaos

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
)

// The reconciliation finds what it is there to find: an event never
// applied, an event applied twice, an event applied after a later one of
// its aggregate, each counted in the row of the fault in whose slot it was
// produced; and it measures the recovery after the fault.
func TestReconcileCountsLossesDoublesAndDisorder(t *testing.T) {
	ctx := context.Background()
	s := pgtest.Store(t)
	c := &consumer{deliveries: map[uuid.UUID]int{}}
	r := &run{cfg: Config{Ordered: true, Faults: []string{FaultKill}, Duration: time.Minute, Lease: time.Second}, store: s, tables: newTables(s),
		destinations: []*destination{{consumer: c}}}
	for _, q := range r.tables.create {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Hour)
	r.begin = t0
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	// The kill's slot is [10s, 20s); the fault itself ends at 15s.
	r.windows = []window{{kind: FaultKill, slotStart: at(10), start: at(10), end: at(15), slotEnd: at(20)}}
	produce := func(sec float64, seq int64) uuid.UUID {
		id := uuid.New()
		if _, err := s.Pool().Exec(ctx, r.tables.insertProduced, id, "a", seq, at(sec), "sql"); err != nil {
			t.Fatal(err)
		}
		return id
	}
	apply := func(id uuid.UUID, seq, prev int64, sec float64) {
		if _, err := s.Pool().Exec(ctx, r.tables.insertApplied, 0, id, "a", seq, prev, at(sec)); err != nil {
			t.Fatal(err)
		}
		c.deliveries[id]++
	}
	before := produce(1, 1) // no fault: applied once
	apply(before, 1, 0, 1.1)
	twice := produce(12, 2) // applied twice
	apply(twice, 2, 1, 12.5)
	apply(twice, 2, 2, 18) // a second application: not its first
	late := produce(13, 4) // applied after 5: out of order
	early := produce(14, 5)
	apply(early, 5, 3, 14.5)
	apply(late, 4, 5, 17)
	// The first event produced after the fault's end is applied 1.5 s after
	// it; the last one before it (late), 2 s after.
	after := produce(16, 6)
	apply(after, 6, 5, 16.5)
	produce(16.5, 7) // in the kill's slot too: never applied

	rep, err := r.reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	none, kill := rep.Faults[0], rep.Faults[1]
	if none.Kind != NoFault || none.Produced != 1 || none.AppliedOnce != 1 || none.Lost != 0 {
		t.Errorf("outside the faults: %+v", none)
	}
	want := KindReport{Kind: FaultKill, Injected: 1, Produced: 5, AppliedOnce: 3, Lost: 1, AppliedTwice: 1, OutOfOrder: 1,
		MaxDeliveries: 2, RecoverySeconds: 1.5, BacklogSeconds: 2}
	if kill != want {
		t.Errorf("the kill's row\n got %+v\nwant %+v", kill, want)
	}
	if rep.OK || rep.Total.Lost != 1 || rep.Total.AppliedTwice != 1 || rep.Total.OutOfOrder != 1 {
		t.Errorf("total %+v, OK %v: want the loss, the double and the disorder counted, and not OK", rep.Total, rep.OK)
	}
}

// In endpoints mode the reconciliation checks every event at every
// endpoint: a duplicate, a disorder and a loss at one endpoint show in its
// own row, not in the other's, and fail the run; the event rows count each
// event once, by its worst endpoint.
func TestReconcileChecksEachEndpoint(t *testing.T) {
	ctx := context.Background()
	s := pgtest.Store(t)
	r := &run{cfg: Config{Ordered: true, Endpoints: 2, Duration: time.Minute, Lease: time.Second}, store: s, tables: newTables(s)}
	for _, q := range r.tables.create {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range []string{"clean", "faulty"} {
		e, err := s.EndpointCreate(ctx, store.Endpoint{Name: name, URL: "https://example.com/" + name, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		r.destinations = append(r.destinations, &destination{index: i, name: name, id: e.ID, consumer: &consumer{deliveries: map[uuid.UUID]int{}}})
	}
	t0 := time.Now().Add(-time.Hour)
	r.begin = t0
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	produce := func(sec float64, seq int64) uuid.UUID {
		id := uuid.New()
		if _, err := s.Pool().Exec(ctx, r.tables.insertProduced, id, "a", seq, at(sec), "sql"); err != nil {
			t.Fatal(err)
		}
		return id
	}
	apply := func(dest int, id uuid.UUID, seq, prev int64, sec float64) {
		if _, err := s.Pool().Exec(ctx, r.tables.insertApplied, dest, id, "a", seq, prev, at(sec)); err != nil {
			t.Fatal(err)
		}
		r.destinations[dest].consumer.deliveries[id]++
	}
	e1, e2, e3, e4, e5 := produce(1, 1), produce(2, 2), produce(3, 3), produce(4, 4), produce(5, 5)
	// The clean endpoint applies each event once, in order.
	for i, id := range []uuid.UUID{e1, e2, e3, e4, e5} {
		apply(0, id, int64(i+1), int64(i), float64(i)+1.5)
	}
	// The faulty one applies e2 twice, e4 before e3, and never e5.
	apply(1, e1, 1, 0, 1.5)
	apply(1, e2, 2, 1, 2.5)
	apply(1, e2, 2, 2, 2.6)
	apply(1, e4, 4, 2, 4.5)
	apply(1, e3, 3, 4, 4.6)

	rep, err := r.reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Endpoints) != 2 {
		t.Fatalf("%d endpoint rows, want 2: %+v", len(rep.Endpoints), rep.Endpoints)
	}
	clean := EndpointReport{Name: "clean", ID: r.destinations[0].id, AppliedOnce: 5, MaxDeliveries: 1}
	faulty := EndpointReport{Name: "faulty", ID: r.destinations[1].id, AppliedOnce: 3, Lost: 1, AppliedTwice: 1, OutOfOrder: 1, MaxDeliveries: 2}
	if rep.Endpoints[0] != clean || rep.Endpoints[1] != faulty {
		t.Errorf("endpoint rows\n got %+v\n     %+v\nwant %+v\n     %+v", rep.Endpoints[0], rep.Endpoints[1], clean, faulty)
	}
	total := KindReport{Kind: "total", Produced: 5, AppliedOnce: 3, Lost: 1, AppliedTwice: 1, OutOfOrder: 1, MaxDeliveries: 2}
	if rep.Total != total {
		t.Errorf("total\n got %+v\nwant %+v", rep.Total, total)
	}
	if rep.OK {
		t.Error("the run is OK with a duplicate, a disorder and a loss at one endpoint")
	}
	var out bytes.Buffer
	rep.Print(&out)
	if !strings.Contains(out.String(), "FAILED") || !strings.Contains(out.String(), "endpoint faulty: 1 lost, 1 applied twice, 1 out of order") ||
		strings.Contains(out.String(), "endpoint clean:") {
		t.Errorf("the printed report does not name the faulty endpoint alone:\n%s", out.String())
	}
}
