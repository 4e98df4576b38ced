package storetest

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

// testOrderedRuns: an ordered claim with AggregateRun takes, for each
// aggregate, a prefix of its unfinished events from its head, each due, at
// most AggregateRun of them; a store may take the heads only.
func testOrderedRuns(t *testing.T, s store.Outbox) {
	later := time.Now().Add(time.Hour)
	var a, b, c []postbox.Event
	for n := range 5 {
		a = append(a, event("A", n))
	}
	for n := range 4 {
		b = append(b, event("B", n))
	}
	b[2].AvailableAt = later // stops B's run after b1
	c = append(c, event("C", 0), event("C", 1))
	c[0].AvailableAt = later // C's head is not due: nothing of C
	for i := range 5 {
		for _, agg := range [][]postbox.Event{a, b, c} {
			if i < len(agg) {
				enqueue(t, s, agg[i])
			}
		}
	}
	got := claim(t, s, store.ClaimParams{Ordered: true, AggregateRun: 3})
	byAgg := map[string][]uuid.UUID{}
	for _, d := range got {
		byAgg[d.AggregateID] = append(byAgg[d.AggregateID], d.ID)
	}
	checkPrefix := func(name string, got []uuid.UUID, due []postbox.Event) {
		t.Helper()
		if len(got) == 0 || len(got) > len(due) || !slices.Equal(got, eventIDs(due[:len(got)])) {
			t.Errorf("aggregate %s: claimed %v, want a prefix of %v (its head first)", name, got, eventIDs(due))
		}
	}
	checkPrefix("A", byAgg["A"], a[:3])
	checkPrefix("B", byAgg["B"], b[:2])
	if len(byAgg["C"]) != 0 {
		t.Errorf("aggregate C, head not due: claimed %v", byAgg["C"])
	}
	// Nothing of A or B while their claimed events are leased.
	if again := claim(t, s, store.ClaimParams{Ordered: true, AggregateRun: 3, Owner: "relay-b"}); len(again) != 0 {
		t.Errorf("a second claim while the runs are leased: %v", ids(again))
	}
	// A run that stopped at its first failure: the first delivered, the
	// next released. The released one is A's head again.
	if len(byAgg["A"]) >= 2 {
		settle(t, s, store.SettleParams{Done: byAgg["A"][:1], Release: []store.Released{{ID: byAgg["A"][1]}}})
		next := claim(t, s, store.ClaimParams{Ordered: true, AggregateRun: 1, Owner: "relay-b"})
		if len(next) != 1 || next[0].ID != byAgg["A"][1] {
			t.Errorf("after A's run stopped at its second event: claimed %v, want %v (the rest of the run is still leased)", ids(next), byAgg["A"][1])
		}
	}
}

// testOrderedRunsModel drives ordered claims with random runs, limits and
// outcomes (delivered, retried now or later, released, a claim held by
// another relay meanwhile) against a model of the outbox, and checks each
// claim: for each aggregate, its claimed events are its lowest unfinished
// ones, none leased before, all due, at most the run; and in the end, each
// aggregate's events were delivered once each, in sequence order.
func testOrderedRunsModel(t *testing.T, s store.Outbox) {
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	seed := rng.Int63()
	rng = rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	type ev struct {
		agg      string
		n        int
		later    bool // AvailableAt an hour away: never due
		finished bool
		owner    string // leased by, "" when not leased
	}
	evs := map[uuid.UUID]*ev{}
	var order []uuid.UUID // in enqueue (sequence) order
	next := map[string]int{}
	for range 120 {
		agg := fmt.Sprint("agg-", rng.Intn(6))
		e := event(agg, next[agg])
		later := rng.Intn(40) == 0
		if later {
			e.AvailableAt = time.Now().Add(time.Hour)
		}
		enqueue(t, s, e)
		evs[e.ID] = &ev{agg: agg, n: next[agg], later: later}
		order = append(order, e.ID)
		next[agg]++
	}
	delivered := map[string][]int{}
	held := map[string][]store.ClaimedEvent{} // claims left unsettled, by owner
	unfinished := func(agg string) []uuid.UUID {
		var out []uuid.UUID
		for _, id := range order {
			if e := evs[id]; e.agg == agg && !e.finished {
				out = append(out, id)
			}
		}
		return out
	}
	settleRuns := func(owner string, got []store.ClaimedEvent) {
		p := store.SettleParams{Owner: owner}
		stopped := map[string]bool{}
		for _, d := range got { // in sequence order: the store sorts a claim
			e := evs[d.ID]
			e.owner = ""
			p.Ended = append(p.Ended, d.Lease)
			if stopped[e.agg] {
				p.Release = append(p.Release, store.Released{ID: d.ID})
				continue
			}
			switch rng.Intn(6) {
			case 0:
				p.Retry = append(p.Retry, store.Retry{ID: d.ID, AvailableAt: time.Now().Add(-time.Second), LastError: "503"})
				stopped[e.agg] = true
			case 1:
				p.Release = append(p.Release, store.Released{ID: d.ID})
				stopped[e.agg] = true
			default:
				p.Done = append(p.Done, d.ID)
				e.finished = true
				delivered[e.agg] = append(delivered[e.agg], e.n)
			}
		}
		settle(t, s, p)
	}
	for round := 0; ; round++ {
		if round == 2000 {
			t.Fatal("the outbox did not drain")
		}
		owner := []string{"relay-a", "relay-b", "relay-c"}[rng.Intn(3)]
		if h := held[owner]; h != nil {
			settleRuns(owner, h)
			delete(held, owner)
			continue
		}
		p := store.ClaimParams{Owner: owner, Limit: 1 + rng.Intn(12), Lease: lease, Ordered: true, AggregateRun: rng.Intn(5)}
		got := claim(t, s, p)
		if len(got) > p.Limit {
			t.Fatalf("claim %+v took %d events", p, len(got))
		}
		byAgg := map[string][]uuid.UUID{}
		for _, d := range got {
			e := evs[d.ID]
			if e == nil || e.finished || e.owner != "" || e.later {
				t.Fatalf("claimed %s (%+v): want an unfinished, due event no relay holds", d.ID, e)
			}
			byAgg[e.agg] = append(byAgg[e.agg], d.ID)
		}
		for agg, claimed := range byAgg {
			run := unfinished(agg)
			if len(claimed) > max(1, p.AggregateRun) || !slices.Equal(claimed, run[:min(len(claimed), len(run))]) {
				t.Fatalf("aggregate %s: claimed %v with AggregateRun %d, want a prefix of its unfinished events %v", agg, claimed, p.AggregateRun, run)
			}
		}
		for _, d := range got {
			evs[d.ID].owner = owner
		}
		if len(got) == 0 && len(held) == 0 {
			break
		}
		if len(got) > 0 && rng.Intn(4) == 0 {
			held[owner] = got
			continue
		}
		settleRuns(owner, got)
	}
	// An event never due holds back the rest of its aggregate.
	for agg := range next {
		var want []int
		for _, id := range order {
			if e := evs[id]; e.agg == agg {
				if e.later {
					break
				}
				want = append(want, e.n)
			}
		}
		if got := delivered[agg]; !slices.Equal(got, want) {
			t.Errorf("aggregate %s: delivered %v, want each of %v once, in order", agg, got, want)
		}
	}
}
