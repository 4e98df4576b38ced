package sqlite_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store/sqlite"
)

func storedHeaders(t *testing.T, s *sqlite.Store, id uuid.UUID) map[string]string {
	t.Helper()
	var raw string
	if err := s.DB().QueryRow("select headers from outbox_events where id = ?", id.String()).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		t.Fatalf("headers %s: %v", raw, err)
	}
	return h
}

// Enqueue and EnqueueTx record the caller's trace context in an event
// without a traceparent, keep the traceparent of one that has it, and add
// nothing without a span.
func TestEnqueueRecordsTraceContext(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
	ctx, span := tp.Tracer("test").Start(context.Background(), "place order")
	defer span.End()
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	const own = "00-11111111111111111111111111111111-2222222222222222-01"

	s := newStore(t, sqlite.Config{})
	newEvent := func(h map[string]string) postbox.Event {
		return postbox.Event{ID: postbox.NewID(), EventType: "order.created", Payload: []byte(`{}`), Headers: h}
	}
	plain, withOwn, untraced := newEvent(nil), newEvent(map[string]string{"traceparent": own}), newEvent(nil)
	if err := s.Enqueue(ctx, plain); err != nil {
		t.Fatal(err)
	}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnqueueTx(ctx, tx, withOwn); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(context.Background(), untraced); err != nil {
		t.Fatal(err)
	}
	if h := storedHeaders(t, s, plain.ID); len(h) != 1 || h["traceparent"] != want {
		t.Errorf("headers of an event enqueued in a span = %v, want traceparent %s", h, want)
	}
	if h := storedHeaders(t, s, withOwn.ID); len(h) != 1 || h["traceparent"] != own {
		t.Errorf("headers of an event with its own traceparent = %v", h)
	}
	if h := storedHeaders(t, s, untraced.ID); len(h) != 0 {
		t.Errorf("headers of an event enqueued without a span = %v, want none", h)
	}
}
