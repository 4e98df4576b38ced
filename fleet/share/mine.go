package share

import (
	"encoding/binary"
	"slices"
)

// Mine returns the sources, of sources, that the member holding slot self
// drains when the live slots are live (as Live returns them), in the order
// of sources. Each source goes to the replicas live slots with the highest
// Weight(source, slot), ties going to the lower slot: every live slot
// drains it when replicas exceeds the live slots' number; replicas below 1
// count as 1. A self that is not live drains nothing. Every member that
// reads the same live slots computes the same shares, and a slot that
// joins or leaves moves only the sources it gains or had.
func Mine(sources []string, live []int, self int, replicas int) []string {
	replicas = max(replicas, 1)
	slots := slices.Clone(live)
	slices.Sort(slots)
	slots = slices.Compact(slots)
	if _, found := slices.BinarySearch(slots, self); !found {
		return nil
	}
	var mine []string
	for _, src := range sources {
		if replicas >= len(slots) {
			mine = append(mine, src)
			continue
		}
		h := sourceHash(src)
		own := mix(h, self)
		above := 0
		for _, s := range slots {
			if s == self {
				continue
			}
			if w := mix(h, s); w > own || (w == own && s < self) {
				above++
				if above >= replicas {
					break
				}
			}
		}
		if above < replicas {
			mine = append(mine, src)
		}
	}
	return mine
}

// Owners returns the slots, of live, that drain source with replicas
// replicas (as Mine shares sources out), highest weight first.
func Owners(source string, live []int, replicas int) []int {
	replicas = max(replicas, 1)
	slots := slices.Clone(live)
	slices.Sort(slots)
	slots = slices.Compact(slots)
	h := sourceHash(source)
	slices.SortStableFunc(slots, func(a, b int) int {
		wa, wb := mix(h, a), mix(h, b)
		switch {
		case wa > wb:
			return -1
		case wa < wb:
			return 1
		}
		return a - b
	})
	return slots[:min(replicas, len(slots))]
}

// Weight returns the weight of slot for source, stable across processes,
// platforms and Go versions: the FNV-1a 64 hash of the source's bytes
// followed by the slot as 8 little-endian bytes, through SplitMix64's
// finalizer.
func Weight(source string, slot int) uint64 {
	return mix(sourceHash(source), slot)
}

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// sourceHash is the FNV-1a 64 state after the source's bytes.
func sourceHash(s string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}

// mix goes on from sourceHash's state with the slot's bytes, and mixes the
// result.
func mix(h uint64, slot int) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(int64(slot)))
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
