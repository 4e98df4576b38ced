package console

import (
	"strings"
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

// An age (a grace period, a filter's "older than") reads Go's durations
// and days, at most ageMax: a larger one is refused with the bound, never
// overflowed into a negative or a wrapped duration.
func TestParseAgeBounds(t *testing.T) {
	for text, want := range map[string]time.Duration{
		"90s": 90 * time.Second, "2h": 2 * time.Hour, "3d": 72 * time.Hour, "0.5d": 12 * time.Hour, "36500d": ageMax,
	} {
		if got, err := parseAge(text); err != nil || got != want {
			t.Errorf("parseAge(%q) = %v, %v; want %v", text, got, err, want)
		}
	}
	for _, text := range []string{"1e300d", "36501d", "876601h", "2562047h", "9e18ns", "Infd", "NaNd", "-1d", "-5s", "soon", ""} {
		if got, err := parseAge(text); err == nil {
			t.Errorf("parseAge(%q) = %v, want a refusal", text, got)
		} else if !strings.Contains(err.Error(), "at most 100 years") {
			t.Errorf("parseAge(%q): %v: the refusal does not give the bound", text, err)
		}
	}
}

// The rotation form's default grace period reads as typed.
func TestAgeText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour: "24h", 90 * time.Second: "1m30s", 90 * time.Minute: "1h30m", 45 * time.Second: "45s", time.Hour + time.Second: "1h0m1s",
	} {
		if got := ageText(d); got != want {
			t.Errorf("ageText(%v) = %q, want %q", d, got, want)
		}
		if back, err := parseAge(ageText(d)); err != nil || back != d {
			t.Errorf("parseAge(ageText(%v)) = %v, %v", d, back, err)
		}
	}
}
