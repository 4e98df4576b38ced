package relay_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store/postgres"
)

const (
	producerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	producerSpan   = "00f067aa0ba902b7"
	producerParent = "00-" + producerTrace + "-" + producerSpan + "-01"
)

// insertPlain writes an event the way a producer in any language does, with
// plain SQL (without the headers column when headers is empty), and
// returns its id.
func insertPlain(t *testing.T, s *postgres.Driver, aggregateID, headers string) string {
	t.Helper()
	table := pgx.Identifier{s.Schema()}.Sanitize() + ".outbox_events"
	q := "insert into " + table + "(aggregate_type, aggregate_id, event_type, payload) values ('order', $1, 'order.created', '{}') returning id::text"
	args := []any{aggregateID}
	if headers != "" {
		q = "insert into " + table + "(aggregate_type, aggregate_id, event_type, payload, headers) values ('order', $1, 'order.created', '{}', $2::jsonb) returning id::text"
		args = append(args, headers)
	}
	var id string
	if err := s.Pool().QueryRow(context.Background(), q, args...).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func attrs(span tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range span.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// A row written by plain SQL with a traceparent keeps its trace id across
// the hop: each attempt is a publish span, a child of the producer's span,
// and the request carries that span's traceparent. The stored headers stay
// as they were.
func TestPublishSpanContinuesPlainSQLTrace(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, func(_ http.ResponseWriter, _ *http.Request, _ receiver.Delivery, n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	stored := `{"traceparent": "` + producerParent + `", "tracestate": "vendor=1", "x-tenant": "acme"}`
	id := insertPlain(t, s, "1", stored)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	stop := start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second),
		Tracer: tp.Tracer("test"), BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	rcv.WaitAccepted(t, 1, 10*time.Second)
	stop()

	d := rcv.Accepted()[0]
	if d.ID != id {
		t.Fatalf("delivered %s, want %s", d.ID, id)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans recorded, want 2 (a retry and a delivery): %v", len(spans), spans.Snapshots())
	}
	delivered := spans[1]
	sc := delivered.SpanContext
	want := "00-" + producerTrace + "-" + sc.SpanID().String() + "-01"
	if got := d.Header.Get("Traceparent"); got != want {
		t.Errorf("request traceparent = %q, want %q (the publish span's)", got, want)
	}
	if got := d.Header.Get("Tracestate"); got != "vendor=1" {
		t.Errorf("request tracestate = %q, want vendor=1", got)
	}
	if got := d.Header.Get("X-Tenant"); got != "acme" {
		t.Errorf("request x-tenant = %q, want the event's own header", got)
	}
	u := "http://" + rcv.Server.Listener.Addr().String()
	for i, span := range spans {
		if span.SpanContext.TraceID().String() != producerTrace || span.Parent.SpanID().String() != producerSpan || !span.Parent.IsRemote() {
			t.Errorf("span %d: trace %s, parent %s: want a child of the producer's span %s in trace %s",
				i, span.SpanContext.TraceID(), span.Parent.SpanID(), producerSpan, producerTrace)
		}
		if span.SpanContext.SpanID().String() == producerSpan {
			t.Errorf("span %d reuses the producer's span id", i)
		}
		if span.SpanKind != trace.SpanKindProducer || span.Name != "publish "+u {
			t.Errorf("span %d: kind %v name %q, want producer, %q", i, span.SpanKind, span.Name, "publish "+u)
		}
		a := attrs(span)
		for k, v := range map[attribute.Key]any{
			"messaging.system":           "webhook",
			"messaging.operation.type":   "send",
			"messaging.operation.name":   "publish",
			"messaging.destination.name": u,
			"messaging.message.id":       id,
			"postbox.event_type":         "order.created",
			"postbox.attempt":            int64(i + 1),
		} {
			if got := a[k].AsInterface(); got != v {
				t.Errorf("span %d: %s = %v, want %v", i, k, got, v)
			}
		}
	}
	if a := attrs(spans[0]); a["postbox.outcome"].AsString() != "retry" || a["http.response.status_code"].AsInt64() != 503 || spans[0].Status.Code != codes.Error {
		t.Errorf("first attempt: outcome %v, status code %v, span status %v: want retry, 503, error",
			a["postbox.outcome"].AsString(), a["http.response.status_code"].AsInt64(), spans[0].Status)
	}
	if a := attrs(delivered); a["postbox.outcome"].AsString() != "delivered" || delivered.Status.Code == codes.Error {
		t.Errorf("second attempt: outcome %v, span status %v: want delivered, not an error", a["postbox.outcome"].AsString(), delivered.Status)
	}
	var headers string
	q := "select headers::text from " + pgx.Identifier{s.Schema()}.Sanitize() + ".outbox_events where id = $1"
	if err := s.Pool().QueryRow(context.Background(), q, id).Scan(&headers); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(headers, producerParent) {
		t.Errorf("stored headers changed to %s", headers)
	}
}

// Without Config.Tracer, no span is recorded (not even by the global
// provider) and the request carries the event's headers as stored: a
// traceparent when it has one, none otherwise.
func TestNoTracerNoSpanNoHeader(t *testing.T) {
	// Not parallel: it sets the global tracer provider, which the other
	// tests' relays would record into.
	exp := tracetest.NewInMemoryExporter()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, nil)
	traced := insertPlain(t, s, "1", `{"traceparent": "`+producerParent+`"}`)
	plain := insertPlain(t, s, "2", "")
	stop := start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second)})
	rcv.WaitAccepted(t, 2, 10*time.Second)
	stop()
	for _, d := range rcv.Accepted() {
		want := ""
		if d.ID == traced {
			want = producerParent
		} else if d.ID != plain {
			t.Fatalf("unexpected delivery %s", d.ID)
		}
		if got := d.Header.Get("Traceparent"); got != want {
			t.Errorf("event %s: traceparent %q, want %q", d.ID, got, want)
		}
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans recorded without a tracer", n)
	}
}
