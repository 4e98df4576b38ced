package main_test

import (
	"strings"
	"testing"

	"github.com/postbox-go/postbox/cmd/postbox/internal/chaos"
)

// A partition drop while relays drain loses nothing: `postbox chaos
// --faults partition-drop,kill --ordered` partitions the outbox (2 s
// partitions), drops each partition moments after its range ends while the
// consumer answers slowly, so that its events are still pending or being
// delivered (moved to the DEFAULT partition, leases and all), and kills a
// relay besides; every event is applied exactly once, in order per
// aggregate. Whether a dropped partition still holds unfinished events
// depends on how far behind the relays are when its range ends: a run in
// which none did (the relays kept up) proves nothing about the move, and
// is run again, up to three runs.
func TestChaosPartitionDrop(t *testing.T) {
	faults := []string{chaos.FaultPartitionDrop, chaos.FaultKill}
	for run := 1; ; run++ {
		rep := runChaos(t, "--duration", "12s", "--events-per-second", "200", "--ordered", "--faults", strings.Join(faults, ","))
		checkExactlyOnce(t, rep, faults)
		if !rep.Partitioned || rep.PartitionsDropped == 0 {
			t.Fatalf("partitioned %v, %d partitions dropped: want partitions dropped", rep.Partitioned, rep.PartitionsDropped)
		}
		if rep.PartitionEventsMoved > 0 {
			return
		}
		if run == 3 {
			t.Fatalf("%d runs: %d partitions dropped in the last, none with unfinished events in it: want the move exercised", run, rep.PartitionsDropped)
		}
		t.Logf("run %d: %d partitions dropped, none with unfinished events in it (the relays kept up): again", run, rep.PartitionsDropped)
	}
}
