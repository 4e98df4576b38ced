package inbox_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/postbox-go/postbox/inbox"
)

const (
	senderTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	senderSpan   = "00f067aa0ba902b7"
	senderParent = "00-" + senderTrace + "-" + senderSpan + "-01"
)

// The handler continues the sender's trace: Process runs in a process span,
// a child of the request's traceparent, that names the event and what
// became of it.
func TestHandlerProcessSpanContinuesTrace(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	var f *fixture
	var inProcess trace.SpanContext
	f = newFixture(t, inbox.HandlerConfig{
		Tracer: tp.Tracer("test"),
		Process: func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
			inProcess = trace.SpanContextFromContext(ctx)
			return f.ib.Process(ctx, ev, f.apply)
		},
	})
	req, id := f.newRequest()
	req.Header.Set("Traceparent", senderParent)
	f.wantAnswer(req, http.StatusOK, "processed")
	duplicate := f.request(id.String(), payload(id), time.Now())
	duplicate.Header.Set("Traceparent", senderParent)
	f.wantAnswer(duplicate, http.StatusOK, "duplicate")

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for i, span := range spans {
		if span.SpanContext.TraceID().String() != senderTrace || span.Parent.SpanID().String() != senderSpan || !span.Parent.IsRemote() {
			t.Errorf("span %d: trace %s parent %s, want a child of %s", i, span.SpanContext.TraceID(), span.Parent.SpanID(), senderParent)
		}
		if span.SpanKind != trace.SpanKindConsumer || span.Name != "process order.created" {
			t.Errorf("span %d: kind %v name %q", i, span.SpanKind, span.Name)
		}
		a := map[string]string{}
		for _, kv := range span.Attributes {
			a[string(kv.Key)] = kv.Value.Emit()
		}
		want := map[string]string{"messaging.message.id": id.String(), "postbox.event_type": "order.created",
			"postbox.aggregate_type": "order", "messaging.operation.type": "process", "postbox.outcome": []string{"processed", "duplicate"}[i]}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("span %d: %s = %q, want %q", i, k, a[k], v)
			}
		}
	}
	if inProcess.SpanID() != spans[1].SpanContext.SpanID() {
		t.Errorf("Process's context carries span %v, want the process span %v", inProcess.SpanID(), spans[1].SpanContext.SpanID())
	}

	// A failing handler: the span says failed, with an error status.
	f.failures.Store(1)
	exp.Reset()
	failing, _ := f.newRequest()
	f.wantAnswer(failing, http.StatusInternalServerError, "error")
	spans = exp.GetSpans()
	if len(spans) != 1 || spans[0].Status.Code != codes.Error {
		t.Fatalf("failed processing: spans %v, want one with an error status", spans.Snapshots())
	}
	if spans[0].Parent.IsValid() {
		t.Errorf("a request without traceparent: span has parent %v, want a new trace", spans[0].Parent.SpanID())
	}
}

// Without HandlerConfig.Tracer, no span is recorded, not even by the
// global provider.
func TestHandlerWithoutTracerRecordsNothing(t *testing.T) {
	// Not parallel: it sets the global tracer provider, which the other
	// tests' handlers would record into.
	exp := tracetest.NewInMemoryExporter()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	f := newFixture(t, inbox.HandlerConfig{})
	req, _ := f.newRequest()
	req.Header.Set("Traceparent", senderParent)
	f.wantAnswer(req, http.StatusOK, "processed")
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans recorded without a tracer", n)
	}
}
