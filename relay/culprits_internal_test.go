package relay

import (
	"testing"

	"github.com/google/uuid"
)

// A full list of culprits still takes the newest (one it held is
// forgotten): culprits never settled here must not switch the rule off.
func TestCulpritsTakeTheNewestWhenFull(t *testing.T) {
	var c culprits
	for range culpritsMax {
		c.add(uuid.New())
	}
	newest := uuid.New()
	c.add(newest)
	if !c.has(newest) {
		t.Fatal("a full list of culprits did not take the newest")
	}
	if n := c.n.Load(); n != culpritsMax {
		t.Fatalf("%d culprits remembered, want at most %d", n, culpritsMax)
	}
}
