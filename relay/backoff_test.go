package relay

import (
	"testing"
	"time"
)

func TestBackoffStaysWithinBoundsAndGrows(t *testing.T) {
	lo, hi := time.Second, 10*time.Minute
	for attempt := 1; attempt <= 60; attempt++ {
		ceiling := min(hi, lo<<min(attempt, 30))
		var largest time.Duration
		for range 200 {
			d := backoff(attempt, lo, hi)
			if d < lo || d > ceiling {
				t.Fatalf("attempt %d: delay %v outside [%v, %v]", attempt, d, lo, ceiling)
			}
			largest = max(largest, d)
		}
		if attempt >= 3 && largest < ceiling/2 {
			t.Fatalf("attempt %d: largest of 200 delays %v, want jitter reaching near %v", attempt, largest, ceiling)
		}
	}
}

func TestBackoffIsJittered(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 50 {
		seen[backoff(5, time.Second, time.Hour)] = true
	}
	if len(seen) < 40 {
		t.Fatalf("50 delays took only %d distinct values: no jitter", len(seen))
	}
}

func TestRetryAfterIsCapped(t *testing.T) {
	cases := []struct{ wish, want time.Duration }{
		{0, time.Second},
		{30 * time.Second, 30 * time.Second},
		{24 * time.Hour, 10 * time.Minute},
	}
	for _, c := range cases {
		if got := retryAfterDelay(c.wish, time.Second, 10*time.Minute); got != c.want {
			t.Errorf("Retry-After %v: delay %v, want %v", c.wish, got, c.want)
		}
	}
}
