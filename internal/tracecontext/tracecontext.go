// Package tracecontext carries the W3C trace context (the traceparent and
// tracestate headers) in an event's Headers: the stores record the
// producer's context there when an event is enqueued, the relay starts its
// publish span from it and sends its own in a copy, and the inbox handler
// continues it from the request.
//
// It depends on the OpenTelemetry API only (otel, otel/propagation,
// otel/trace), never on the SDK. Without a span in the context, every
// function returns at once, without allocating.
package tracecontext

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Names of the W3C trace context headers, as they are stored in an
// event's Headers.
const (
	Traceparent = "traceparent"
	Tracestate  = "tracestate"
)

// Headers is a trace context in its W3C form. The zero Headers is no trace
// context.
type Headers struct {
	Traceparent string
	Tracestate  string
}

// IsZero reports whether h holds no traceparent.
func (h Headers) IsZero() bool { return h.Traceparent == "" }

// FromContext returns the trace context of ctx's span as the global
// propagator (otel.GetTextMapPropagator) writes it, keeping the traceparent
// and tracestate headers only. It is zero when ctx carries no valid span
// context, or when the global propagator writes no traceparent (the
// default, a no-op, writes nothing).
func FromContext(ctx context.Context) Headers {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return Headers{}
	}
	var c headersCarrier
	otel.GetTextMapPropagator().Inject(ctx, &c)
	if c.h.Traceparent == "" {
		return Headers{}
	}
	return c.h
}

// Apply returns headers with h added, unless h is zero or headers already
// has a traceparent (whatever the case of its name): an event's own trace
// context wins. headers is never modified; a new map is returned when
// something is added.
func (h Headers) Apply(headers map[string]string) map[string]string {
	if h.IsZero() || has(headers, Traceparent) {
		return headers
	}
	out := make(map[string]string, len(headers)+2)
	for k, v := range headers {
		out[k] = v
	}
	out[Traceparent] = h.Traceparent
	if h.Tracestate != "" && !has(headers, Tracestate) {
		out[Tracestate] = h.Tracestate
	}
	return out
}

// Extract returns ctx with the remote span context of the traceparent (and
// tracestate) in headers, whatever the case of their names; ctx unchanged
// when headers hold no valid traceparent. It reads the W3C format itself,
// whatever the global propagator: that is the wire format of postbox.
func Extract(ctx context.Context, headers map[string]string) context.Context {
	if len(headers) == 0 {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, foldCarrier(headers))
}

// Inject returns a copy of headers whose traceparent and tracestate are
// those of ctx's span, in the W3C format, any of their spellings in another
// case removed. headers is never modified. When ctx carries no valid span
// context, headers is returned as it is.
func Inject(ctx context.Context, headers map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return headers
	}
	out := make(map[string]string, len(headers)+2)
	for k, v := range headers {
		if strings.EqualFold(k, Traceparent) || strings.EqualFold(k, Tracestate) {
			continue
		}
		out[k] = v
	}
	propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(out))
	return out
}

// has reports whether headers has name, whatever its case.
func has(headers map[string]string, name string) bool {
	if _, ok := headers[name]; ok {
		return true
	}
	for k := range headers {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// headersCarrier is an injection carrier that keeps traceparent and
// tracestate in a struct, without a map.
type headersCarrier struct{ h Headers }

func (c *headersCarrier) Get(key string) string {
	switch {
	case strings.EqualFold(key, Traceparent):
		return c.h.Traceparent
	case strings.EqualFold(key, Tracestate):
		return c.h.Tracestate
	}
	return ""
}

func (c *headersCarrier) Set(key, value string) {
	switch {
	case strings.EqualFold(key, Traceparent):
		c.h.Traceparent = value
	case strings.EqualFold(key, Tracestate):
		c.h.Tracestate = value
	}
}

func (c *headersCarrier) Keys() []string { return []string{Traceparent, Tracestate} }

// foldCarrier reads a map of headers whatever the case of their names.
type foldCarrier map[string]string

func (c foldCarrier) Get(key string) string {
	if v, ok := c[key]; ok {
		return v
	}
	for k, v := range c {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return ""
}

func (c foldCarrier) Set(key, value string) { c[key] = value }

func (c foldCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
