package share

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomCase returns sources, distinct live slots (not necessarily
// contiguous: slots leave and come back) and replicas.
func randomCase(r *rand.Rand) ([]string, []int, int) {
	n := r.IntN(200)
	sources := make([]string, n)
	for i := range sources {
		sources[i] = fmt.Sprintf("postgres://db%d.example/outbox?schema=s%d", r.IntN(50), i)
	}
	var live []int
	for s := range 1 + r.IntN(12) {
		if r.IntN(4) != 0 {
			live = append(live, s)
		}
	}
	if len(live) == 0 {
		live = []int{r.IntN(5)}
	}
	return sources, live, r.IntN(5) // 0 counts as 1
}

// owners returns, by source index, the slots that drain it as Mine shares
// it out.
func owners(sources []string, live []int, replicas int) [][]int {
	own := make([][]int, len(sources))
	for _, slot := range live {
		mine := Mine(sources, live, slot, replicas)
		// In input order: a subsequence of sources.
		j := 0
		for i, src := range sources {
			if j < len(mine) && mine[j] == src {
				own[i] = append(own[i], slot)
				j++
			}
		}
		if j != len(mine) {
			panic(fmt.Sprintf("Mine for slot %d is not in the sources' order: %q", slot, mine))
		}
	}
	return own
}

func TestMineGivesEachSourceItsReplicas(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		sources, live, replicas := randomCase(r)
		want := min(max(replicas, 1), len(live))
		for i, o := range owners(sources, live, replicas) {
			if len(o) != want {
				t.Fatalf("live %v, replicas %d: %q has owners %v, want %d", live, replicas, sources[i], o, want)
			}
			byWeight := Owners(sources[i], live, replicas)
			slices.Sort(byWeight)
			if !slices.Equal(o, byWeight) {
				t.Fatalf("live %v, replicas %d: %q: Mine gives %v, Owners %v", live, replicas, sources[i], o, byWeight)
			}
		}
	}
}

func TestMineMovesOnlyTheLeaversSources(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		sources, live, replicas := randomCase(r)
		if len(live) < 2 {
			continue
		}
		gone := live[r.IntN(len(live))]
		rest := slices.DeleteFunc(slices.Clone(live), func(s int) bool { return s == gone })
		before, after := owners(sources, live, replicas), owners(sources, rest, replicas)
		for i := range sources {
			kept := slices.DeleteFunc(slices.Clone(before[i]), func(s int) bool { return s == gone })
			// Every owner but the leaver keeps the source...
			for _, s := range kept {
				if !slices.Contains(after[i], s) {
					t.Fatalf("live %v, replicas %d, %d leaves: %q moved off %d (%v → %v)", live, replicas, gone, sources[i], s, before[i], after[i])
				}
			}
			// ...and only a source the leaver had gains an owner.
			if len(kept) == len(before[i]) && !slices.Equal(before[i], after[i]) {
				t.Fatalf("live %v, replicas %d, %d leaves: %q was not its and moved (%v → %v)", live, replicas, gone, sources[i], before[i], after[i])
			}
		}
		// Joining is the same change backwards: a slot that joins takes
		// sources only for itself.
	}
}

func TestMineSharesEvenly(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for c := range 200 {
		sources := make([]string, 100)
		for i := range sources {
			sources[i] = fmt.Sprintf("postgres://pg%d.internal:5432/app%d?schema=outbox_%d", c, r.IntN(1000), i)
		}
		live := []int{0, 1, 2, 3}
		for _, slot := range live {
			if n := len(Mine(sources, live, slot, 1)); n < 10 || n > 40 {
				t.Fatalf("case %d: slot %d drains %d of 100 sources over 4 slots", c, slot, n)
			}
		}
		// Names that differ by one character spread too.
		for i := range sources {
			sources[i] = fmt.Sprintf("s%d", i)
		}
		for _, slot := range live {
			if n := len(Mine(sources, live, slot, 1)); n < 10 || n > 40 {
				t.Fatalf("slot %d drains %d of s0..s99", slot, n)
			}
		}
	}
}

func TestMineEdges(t *testing.T) {
	sources := []string{"a", "b", "c"}
	if got := Mine(sources, []int{0, 1}, 2, 1); got != nil {
		t.Fatalf("a slot that is not live drains %q", got)
	}
	if got := Mine(sources, []int{1, 1, 4}, 4, 3); !slices.Equal(got, sources) {
		t.Fatalf("with more replicas than live slots, slot 4 drains %q", got)
	}
	if got := Mine(sources, []int{7}, 7, 0); !slices.Equal(got, sources) {
		t.Fatalf("the only live slot drains %q", got)
	}
	if got := Mine(nil, []int{0}, 0, 1); len(got) != 0 {
		t.Fatalf("no sources: %q", got)
	}
}

// The weights are part of the protocol: processes built by different Go
// versions, on different platforms, must agree.
func TestWeightIsStable(t *testing.T) {
	for _, c := range []struct {
		source string
		slot   int
		want   uint64
	}{
		// Computed apart from this code, from Weight's documentation.
		{"", 0, 0x813f0174a2367c13},
		{"a", 1, 0xee02fd6b1ca767d1},
		{"postgres://db1/app?schema=outbox", 3, 0x9a345006c8980574},
	} {
		if got := Weight(c.source, c.slot); got != c.want {
			t.Errorf("Weight(%q, %d) = %#x, want %#x", c.source, c.slot, got, c.want)
		}
	}
}
