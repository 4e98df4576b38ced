package relay

import (
	"testing"
	"time"
)

// A store call under a lease gets the lease, at least a second and at most
// storeCallTimeout: the default 30 s lease keeps 10 s, the chaos suite's
// 2 s lease gives 2 s, a 100 ms lease a second.
func TestLeasedCallTimeout(t *testing.T) {
	for _, c := range []struct{ lease, want time.Duration }{
		{100 * time.Millisecond, time.Second},
		{time.Second, time.Second},
		{2 * time.Second, 2 * time.Second},
		{10 * time.Second, 10 * time.Second},
		{LeaseDefault, storeCallTimeout},
		{time.Hour, storeCallTimeout},
	} {
		if got := leasedCallTimeout(c.lease); got != c.want {
			t.Errorf("leasedCallTimeout(%v) = %v, want %v", c.lease, got, c.want)
		}
	}
}
