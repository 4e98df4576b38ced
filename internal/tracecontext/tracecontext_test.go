package tracecontext_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/postbox-go/postbox/internal/tracecontext"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func remote(t *testing.T) context.Context {
	t.Helper()
	ctx := tracecontext.Extract(context.Background(), map[string]string{"Traceparent": parent, "TraceState": "k=v"})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.TraceState().String() != "k=v" {
		t.Fatalf("Extract: span context %v", sc)
	}
	return ctx
}

func TestFromContextNeedsSpanAndPropagator(t *testing.T) {
	if h := tracecontext.FromContext(context.Background()); !h.IsZero() {
		t.Fatalf("no span: got %+v", h)
	}
	ctx := remote(t)
	if h := tracecontext.FromContext(ctx); !h.IsZero() {
		t.Fatalf("no-op global propagator: got %+v", h)
	}
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	h := tracecontext.FromContext(ctx)
	if h.Traceparent != parent || h.Tracestate != "k=v" {
		t.Fatalf("got %+v", h)
	}
}

func TestApplyKeepsOwnTraceparent(t *testing.T) {
	h := tracecontext.Headers{Traceparent: parent, Tracestate: "k=v"}
	own := map[string]string{"TraceParent": "00-11111111111111111111111111111111-2222222222222222-01"}
	if got := h.Apply(own); len(got) != 1 || got["TraceParent"] != own["TraceParent"] {
		t.Fatalf("own traceparent replaced: %v", got)
	}
	in := map[string]string{"x-tenant": "a"}
	got := h.Apply(in)
	if got["traceparent"] != parent || got["tracestate"] != "k=v" || got["x-tenant"] != "a" || len(in) != 1 {
		t.Fatalf("got %v, input %v", got, in)
	}
	if got := (tracecontext.Headers{}).Apply(in); len(got) != 1 {
		t.Fatalf("zero headers added something: %v", got)
	}
}

func TestInjectReplacesInACopy(t *testing.T) {
	ctx := remote(t)
	in := map[string]string{"Traceparent": "old", "x": "y"}
	got := tracecontext.Inject(ctx, in)
	if got["traceparent"] != parent || got["x"] != "y" || len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	if in["Traceparent"] != "old" || len(in) != 2 {
		t.Fatalf("input modified: %v", in)
	}
	if got := tracecontext.Inject(context.Background(), in); len(got) != 2 {
		t.Fatalf("no span: got %v", got)
	}
}

// BenchmarkFromContextOff is the producer's cost with tracing off: no span
// in the context.
func BenchmarkFromContextOff(b *testing.B) {
	ctx := context.Background()
	headers := map[string]string{"x": "y"}
	b.ReportAllocs()
	for b.Loop() {
		_ = tracecontext.FromContext(ctx).Apply(headers)
	}
}
