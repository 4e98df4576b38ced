package observe

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// OtherEventType is the event_type label of the event types seen after
// the first Options.MaxEventTypes.
const OtherEventType = "other"

// cappedTypes hands out a T per event type, for the first max types
// seen; every later type shares the T of OtherEventType. Reads take no
// lock: the map is replaced, never changed, when a type is added.
type cappedTypes[T any] struct {
	max   int
	build func(eventType string) T
	known atomic.Pointer[map[string]T]
	full  atomic.Bool
	// other builds the T of OtherEventType once, when first needed.
	other func() T

	mu sync.Mutex // held to add a type
}

func newCappedTypes[T any](max int, build func(eventType string) T) *cappedTypes[T] {
	c := &cappedTypes[T]{max: max, build: build, other: sync.OnceValue(func() T { return build(OtherEventType) })}
	c.known.Store(&map[string]T{})
	return c
}

// get returns the T of eventType.
func (c *cappedTypes[T]) get(eventType string) T {
	if v, ok := (*c.known.Load())[eventType]; ok {
		return v
	}
	if c.full.Load() {
		return c.other()
	}
	return c.add(eventType)
}

func (c *cappedTypes[T]) add(eventType string) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.known.Load()
	if v, ok := old[eventType]; ok {
		return v
	}
	if len(old) >= c.max {
		c.full.Store(true)
		return c.other()
	}
	label := eventType
	if !utf8.ValidString(label) {
		label = strings.ToValidUTF8(label, "\uFFFD")
	}
	v := c.build(label)
	m := make(map[string]T, len(old)+1)
	for k, x := range old {
		m[k] = x
	}
	m[eventType] = v
	c.known.Store(&m)
	return v
}
