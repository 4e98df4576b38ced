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

// OtherEndpoint is the endpoint label of the endpoints named after the
// first Options.MaxEndpoints.
const OtherEndpoint = "other"

// cappedTypes hands out a T per label value (an event type, an endpoint
// name), for the first max values seen; every later value shares the T of
// the other label (OtherEventType, OtherEndpoint). Reads take no lock: the
// map is replaced, never changed, when a value is added.
type cappedTypes[T any] struct {
	max   int
	build func(label string) T
	known atomic.Pointer[map[string]T]
	full  atomic.Bool
	// other builds the T of the other label once, when first needed.
	other func() T

	mu sync.Mutex // held to add a type
}

func newCappedTypes[T any](max int, otherLabel string, build func(label string) T) *cappedTypes[T] {
	c := &cappedTypes[T]{max: max, build: build, other: sync.OnceValue(func() T { return build(otherLabel) })}
	c.known.Store(&map[string]T{})
	return c
}

// get returns the T of value.
func (c *cappedTypes[T]) get(value string) T {
	if v, ok := (*c.known.Load())[value]; ok {
		return v
	}
	if c.full.Load() {
		return c.other()
	}
	return c.add(value)
}

func (c *cappedTypes[T]) add(value string) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.known.Load()
	if v, ok := old[value]; ok {
		return v
	}
	if len(old) >= c.max {
		c.full.Store(true)
		return c.other()
	}
	label := value
	if !utf8.ValidString(label) {
		label = strings.ToValidUTF8(label, "\uFFFD")
	}
	v := c.build(label)
	m := make(map[string]T, len(old)+1)
	for k, x := range old {
		m[k] = x
	}
	m[value] = v
	c.known.Store(&m)
	return v
}
