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
	label := labelOf(value)
	if v, ok := old[label]; ok {
		return v
	}
	if len(old) >= c.max {
		c.full.Store(true)
		return c.other()
	}
	v := c.build(label)
	m := make(map[string]T, len(old)+1)
	for k, x := range old {
		m[k] = x
	}
	m[label] = v
	c.known.Store(&m)
	return v
}

// maxLabelBytes bounds a label value: an event type or an endpoint name
// written by plain SQL may be megabytes long, and would be kept in every
// series it labels.
const maxLabelBytes = 128

// labelOf is value as a label: valid UTF-8, at most maxLabelBytes (cut on
// a character's start). Values alike up to the cut share their label.
func labelOf(value string) string {
	label := value
	if !utf8.ValidString(label) {
		label = strings.ToValidUTF8(label, "\uFFFD")
	}
	if len(label) <= maxLabelBytes {
		return label
	}
	cut := maxLabelBytes
	for cut > 0 && !utf8.RuneStart(label[cut]) {
		cut--
	}
	return label[:cut]
}
