package relay

import (
	"testing"
	"time"
)

func TestPaceAhead(t *testing.T) {
	var p pace
	if got := p.ahead(2000, 64, 30*time.Second); got != 2000 {
		t.Fatalf("ahead with no attempt known = %d, want the batch (2000)", got)
	}
	p.record(time.Second)
	cases := []struct {
		batch, concurrency int
		lease              time.Duration
		want               int
	}{
		{2000, 64, 30 * time.Second, 960},    // 64 × 15 s / 1 s
		{2000, 64, 2 * time.Second, 64},      // at least concurrency
		{100, 64, 30 * time.Second, 100},     // at most the batch
		{2000, 1024, 30 * time.Second, 2000}, // 1024 × 15 > 2000
	}
	for _, c := range cases {
		if got := p.ahead(c.batch, c.concurrency, c.lease); got != c.want {
			t.Errorf("ahead(%d, %d, %v) at 1s a delivery = %d, want %d", c.batch, c.concurrency, c.lease, got, c.want)
		}
	}
	for range 100 {
		p.record(10 * time.Millisecond)
	}
	if got := p.ahead(2000, 64, 30*time.Second); got != 2000 {
		t.Errorf("ahead once deliveries take 10 ms = %d, want the batch (2000)", got)
	}
}
