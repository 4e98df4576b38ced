package postgres

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/tracecontext"
)

// BenchmarkEnqueueArgs is the producer's work before the INSERT, per
// event: "untraced" is the path without any trace context step (as before
// tracing existed), "off" reads the trace context of a context without a
// span (tracing off), "on" records that of a recording span with the W3C
// propagator.
func BenchmarkEnqueueArgs(b *testing.B) {
	payload := []byte(`{"order_id": 42, "customer_id": "customer-42", "amount_cents": 1250, "currency": "EUR"}`)
	run := func(b *testing.B, ctx context.Context, trace func(context.Context) tracecontext.Headers) {
		b.ReportAllocs()
		for b.Loop() {
			e := postbox.Event{AggregateType: "order", AggregateID: "42", EventType: "order.created", Payload: payload}
			if _, err := enqueueArgs(&e, trace(ctx)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("untraced", func(b *testing.B) {
		run(b, context.Background(), func(context.Context) tracecontext.Headers { return tracecontext.Headers{} })
	})
	b.Run("off", func(b *testing.B) { run(b, context.Background(), tracecontext.FromContext) })
	b.Run("on", func(b *testing.B) {
		prev := otel.GetTextMapPropagator()
		otel.SetTextMapPropagator(propagation.TraceContext{})
		defer otel.SetTextMapPropagator(prev)
		ctx, span := sdktrace.NewTracerProvider().Tracer("bench").Start(context.Background(), "produce")
		defer span.End()
		run(b, ctx, tracecontext.FromContext)
	})
}
