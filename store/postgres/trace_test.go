package postgres_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store/postgres"
)

const ownTraceparent = "00-11111111111111111111111111111111-2222222222222222-01"

// withTraceContext sets the W3C propagator as the global one until the
// test ends.
func withTraceContext(t *testing.T) {
	t.Helper()
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
}

// inSpan returns a context with a recording span, ended with the test.
func inSpan(t *testing.T) (context.Context, trace.SpanContext) {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
	ctx, span := tp.Tracer("test").Start(context.Background(), "place order")
	t.Cleanup(func() { span.End() })
	return ctx, span.SpanContext()
}

func storedHeaders(t *testing.T, s *postgres.Store, id uuid.UUID) map[string]string {
	t.Helper()
	var raw []byte
	q := "select headers::text from " + pgx.Identifier{s.Schema()}.Sanitize() + ".outbox_events where id = $1"
	if err := s.Pool().QueryRow(context.Background(), q, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var h map[string]string
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatalf("headers %s: %v", raw, err)
	}
	return h
}

// Every way of enqueueing records the caller's trace context in an event
// without a traceparent, and keeps the traceparent of one that has it.
func TestEnqueueRecordsTraceContext(t *testing.T) {
	withTraceContext(t)
	s := pgtest.Store(t)
	ctx, sc := inSpan(t)
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"

	enqueue := map[string]func(events ...postbox.Event) error{
		"Enqueue": func(events ...postbox.Event) error { return s.Enqueue(ctx, events...) },
		"EnqueueTx": func(events ...postbox.Event) error {
			return pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error { return s.EnqueueTx(ctx, tx, events...) })
		},
		"DatabaseSQL": func(events ...postbox.Event) error {
			db := stdlib.OpenDBFromPool(s.Pool())
			defer db.Close()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			if err := s.DatabaseSQL().EnqueueTx(ctx, tx, events...); err != nil {
				return err
			}
			return tx.Commit()
		},
		"Transact": func(events ...postbox.Event) error {
			return s.Transact(ctx, func(_ pgx.Tx, out *postgres.Outgoing) error { return out.Add(events...) })
		},
	}
	for name, fn := range enqueue {
		t.Run(name, func(t *testing.T) {
			shared := map[string]string{"x-tenant": "acme"}
			plain := postbox.Event{ID: postbox.NewID(), EventType: "order.created", Payload: []byte(`{}`), Headers: shared}
			own := postbox.Event{ID: postbox.NewID(), EventType: "order.created", Payload: []byte(`{}`),
				Headers: map[string]string{"Traceparent": ownTraceparent}}
			if err := fn(plain, own); err != nil {
				t.Fatal(err)
			}
			if h := storedHeaders(t, s, plain.ID); h["traceparent"] != want || h["x-tenant"] != "acme" || len(h) != 2 {
				t.Errorf("headers of an event enqueued in a span = %v, want traceparent %s and x-tenant", h, want)
			}
			if len(shared) != 1 {
				t.Errorf("the caller's Headers map was modified: %v", shared)
			}
			if h := storedHeaders(t, s, own.ID); len(h) != 1 || h["Traceparent"] != ownTraceparent {
				t.Errorf("headers of an event with its own traceparent = %v, want it kept alone", h)
			}
		})
	}
}

// Without a span in the context, nothing is added, whatever the
// propagator.
func TestEnqueueWithoutSpanAddsNothing(t *testing.T) {
	withTraceContext(t)
	s := pgtest.Store(t)
	e := postbox.Event{ID: postbox.NewID(), EventType: "order.created", Payload: []byte(`{}`)}
	if err := s.Enqueue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if h := storedHeaders(t, s, e.ID); len(h) != 0 {
		t.Errorf("headers = %v, want none", h)
	}
}
