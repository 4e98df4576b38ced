package chaos

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// partition-drop runs only on a partitioned outbox: "all" includes it only
// with partitioned (as db-restart only with a restart command), and naming
// it partitions the outbox.
func TestPartitionDropFaultPartitions(t *testing.T) {
	for _, c := range []struct {
		partitioned, restart, want bool
	}{{false, false, false}, {true, false, true}, {true, true, true}} {
		all, err := ParseFaults("all", c.restart, c.partitioned)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(all, FaultPartitionDrop); got != c.want {
			t.Errorf("all, partitioned %v: %v; want partition-drop %v", c.partitioned, all, c.want)
		}
		if slices.Contains(all, FaultDBRestart) != c.restart {
			t.Errorf("all, restart %v: %v", c.restart, all)
		}
	}
	named, err := ParseFaults("partition-drop,kill", false, false)
	if err != nil || !slices.Equal(named, []string{FaultPartitionDrop, FaultKill}) {
		t.Fatalf("named: %v, %v", named, err)
	}
	cfg, err := Config{DB: "postgres://postgres@127.0.0.1:5432/postgres", Executable: "postbox", Faults: named}.withDefaults()
	if err != nil || !cfg.Partitioned {
		t.Errorf("partition-drop named: partitioned %v (%v), want true", cfg.Partitioned, err)
	}
	cfg, err = Config{DB: "postgres://postgres@127.0.0.1:5432/postgres", Executable: "postbox", Faults: []string{FaultKill}}.withDefaults()
	if err != nil || cfg.Partitioned {
		t.Errorf("kill alone: partitioned %v (%v), want false", cfg.Partitioned, err)
	}
}

// partitionBound is the lowest id of the partition a UUIDv7 made now falls
// in: at most the id, and the next partition's bound above it.
func TestPartitionBound(t *testing.T) {
	now := time.Now()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := partitionBound(now), partitionBound(now.Add(PartitionInterval))
	if bytes.Compare(lo[:], id[:]) > 0 || bytes.Compare(id[:], hi[:]) >= 0 {
		t.Errorf("id %s outside [%s, %s)", id, lo, hi)
	}
	if !bytes.Equal(lo[6:], make([]byte, 10)) {
		t.Errorf("bound %s: want every bit after the time zero", lo)
	}
	at := time.UnixMilli(1_764_662_401_999) // 2 s partitions start at even seconds
	if got, want := partitionBound(at), partitionBound(time.UnixMilli(1_764_662_400_000)); got != want {
		t.Errorf("bound of %v = %s, want %s", at, got, want)
	}
}
