package relay

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/postbox-go/postbox/internal/tracecontext"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// Attributes of the publish span, after the OpenTelemetry messaging
// semantic conventions, and postbox's own.
const (
	attrSystem        = attribute.Key("messaging.system")
	attrOperationType = attribute.Key("messaging.operation.type")
	attrOperationName = attribute.Key("messaging.operation.name")
	attrDestination   = attribute.Key("messaging.destination.name")
	attrMessageID     = attribute.Key("messaging.message.id")
	attrStatusCode    = attribute.Key("http.response.status_code")
	attrEventType     = attribute.Key("postbox.event_type")
	attrAggregateType = attribute.Key("postbox.aggregate_type")
	attrAttempt       = attribute.Key("postbox.attempt")
	attrOutcome       = attribute.Key("postbox.outcome")
)

// startPublish starts the publish span of one delivery attempt, a child of
// the trace context in the event's headers (a new trace when they hold
// none), and sets the span's own trace context in a copy of those headers
// in msg: the stored event is never modified.
func (r *Relay) startPublish(ctx context.Context, d store.ClaimedEvent, msg *sink.Message) (context.Context, trace.Span) {
	dest := r.destination
	ctx, span := r.cfg.Tracer.Start(tracecontext.Extract(ctx, d.Headers), "publish "+dest.Name,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attrSystem.String(dest.System),
			attrOperationType.String("send"),
			attrOperationName.String("publish"),
			attrDestination.String(dest.Name),
			attrMessageID.String(d.ID.String()),
			attrEventType.String(d.EventType),
			attrAggregateType.String(d.AggregateType),
			attrAttempt.Int(d.Attempt),
		))
	msg.Headers = tracecontext.Inject(ctx, d.Headers)
	return ctx, span
}

// endPublish records what became of the attempt and ends its span.
func endPublish(span trace.Span, o outcome) {
	span.SetAttributes(attrOutcome.String(outcomeOf[o.action].String()))
	if o.statusCode != 0 {
		span.SetAttributes(attrStatusCode.Int(o.statusCode))
	}
	if o.action == actionRetry || o.action == actionFail {
		span.SetStatus(codes.Error, o.lastError)
	}
	span.End()
}
