package console

import (
	"testing"
	"time"
)

// A success rate never rounds up to 100% while an attempt failed, nor
// down to 0% while one delivered; under nine in ten is bad.
func TestEndpointSuccessRateText(t *testing.T) {
	for _, tc := range []struct {
		rate successRate
		want string
		bad  bool
	}{
		{successRate{}, "–", false},
		{successRate{Attempts: 1, Delivered: 1}, "100% of 1 attempt", false},
		{successRate{Attempts: 3, Delivered: 2}, "66.6% of 3 attempts", true},
		{successRate{Attempts: 10, Delivered: 9}, "90% of 10 attempts", false},
		{successRate{Attempts: 10_000, Delivered: 9_999}, "99.9% of 10000 attempts", false},
		{successRate{Attempts: 10_000, Delivered: 1}, "<0.1% of 10000 attempts", true},
		{successRate{Attempts: 5}, "0% of 5 attempts", true},
	} {
		if got := tc.rate.Text(); got != tc.want || tc.rate.Bad() != tc.bad {
			t.Errorf("%+v: %q, bad %v; want %q, bad %v", tc.rate, got, tc.rate.Bad(), tc.want, tc.bad)
		}
	}
}

// Latencies read in milliseconds under a second, in seconds above.
func TestEndpointLatencyText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0 ms", 42 * time.Millisecond: "42 ms", 999 * time.Millisecond: "999 ms",
		1500 * time.Millisecond: "1.5 s", 10 * time.Second: "10.0 s",
	} {
		if got := millis(d); got != want {
			t.Errorf("millis(%v) = %q, want %q", d, got, want)
		}
	}
}
