package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/internal/pgtest"
)

// The reconciliation finds what it is there to find: an event never
// applied, an event applied twice, an event applied after a later one of
// its aggregate, each counted in the row of the fault in whose slot it was
// produced; and it measures the recovery after the fault.
func TestReconcileCountsLossesDoublesAndDisorder(t *testing.T) {
	ctx := context.Background()
	s := pgtest.Store(t)
	r := &run{cfg: Config{Ordered: true, Faults: []string{FaultKill}, Duration: time.Minute, Lease: time.Second}, store: s, tables: newTables(s),
		consumer: &consumer{deliveries: map[uuid.UUID]int{}}}
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
		if _, err := s.Pool().Exec(ctx, r.tables.insertApplied, id, "a", seq, prev, at(sec)); err != nil {
			t.Fatal(err)
		}
		r.consumer.deliveries[id]++
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
