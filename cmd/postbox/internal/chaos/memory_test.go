package chaos

import "testing"

// A window keeps the most each relay used, marks a relay restarted in it,
// and the verdict compares the last minute with minute 2, relay by relay.
func TestMemoryWindowsAndVerdict(t *testing.T) {
	early := mostOf(nil, []ProcessSample{{Relay: 0, PID: 10, RSSKiB: 38000, FDs: 20}, {Relay: 1, PID: 11, RSSKiB: 40000, FDs: 70}})
	early = mostOf(early, []ProcessSample{{Relay: 0, PID: 10, RSSKiB: 37000, FDs: 75}, {Relay: 1, PID: 12, RSSKiB: 39000, FDs: 30}})
	want := []ProcessSample{{Relay: 0, PID: 10, RSSKiB: 38000, FDs: 75}, {Relay: 1, PID: 11, RSSKiB: 40000, FDs: 70, Restarted: true}}
	for i := range want {
		if early[i] != want[i] {
			t.Fatalf("window = %+v, want %+v", early, want)
		}
	}
	if flat := memoryFlat(nil, early); flat != nil {
		t.Fatalf("verdict without a minute-2 window = %v, want none", *flat)
	}
	steady := []ProcessSample{{Relay: 0, RSSKiB: 41000, FDs: 78}, {Relay: 1, RSSKiB: 40500, FDs: 71}}
	if flat := memoryFlat(early, steady); flat == nil || !*flat {
		t.Fatal("relays within 10 % of minute 2: not flat")
	}
	grown := []ProcessSample{{Relay: 0, RSSKiB: 38000, FDs: 75}, {Relay: 1, RSSKiB: 45000, FDs: 70}}
	if flat := memoryFlat(early, grown); flat == nil || *flat {
		t.Fatal("a relay 12 % larger than at minute 2: flat")
	}
	leaking := []ProcessSample{{Relay: 0, RSSKiB: 38000, FDs: 90}, {Relay: 1, RSSKiB: 40000, FDs: 70}}
	if flat := memoryFlat(early, leaking); flat == nil || *flat {
		t.Fatal("a relay with 20 % more descriptors than at minute 2: flat")
	}
}
