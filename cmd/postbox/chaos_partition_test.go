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
// aggregate.
func TestChaosPartitionDrop(t *testing.T) {
	faults := []string{chaos.FaultPartitionDrop, chaos.FaultKill}
	rep := runChaos(t, "--duration", "12s", "--events-per-second", "200", "--ordered", "--faults", strings.Join(faults, ","))
	checkExactlyOnce(t, rep, faults)
	if !rep.Partitioned || rep.PartitionsDropped == 0 || rep.PartitionEventsMoved == 0 {
		t.Errorf("partitioned %v, %d partitions dropped, %d unfinished events in them: want partitions dropped with events in them",
			rep.Partitioned, rep.PartitionsDropped, rep.PartitionEventsMoved)
	}
}
