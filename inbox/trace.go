package inbox

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attributes of the process span, after the OpenTelemetry messaging
// semantic conventions, and postbox's own.
const (
	attrSystem        = attribute.Key("messaging.system")
	attrOperationType = attribute.Key("messaging.operation.type")
	attrOperationName = attribute.Key("messaging.operation.name")
	attrMessageID     = attribute.Key("messaging.message.id")
	attrEventType     = attribute.Key("postbox.event_type")
	attrAggregateType = attribute.Key("postbox.aggregate_type")
	attrOutcome       = attribute.Key("postbox.outcome")
)

// process runs Process on ev, in a process span when HandlerConfig.Tracer
// is set: a child of the request's W3C traceparent.
func (h *Handler) process(ctx context.Context, header map[string][]string, ev *Event) (Outcome, error) {
	if h.cfg.Tracer == nil {
		return h.cfg.Process(ctx, ev)
	}
	name := "process"
	if ev.EventType != "" {
		name += " " + ev.EventType
	}
	ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(header))
	ctx, span := h.cfg.Tracer.Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attrSystem.String("webhook"),
			attrOperationType.String("process"),
			attrOperationName.String("process"),
			attrMessageID.String(ev.ID.String()),
			attrEventType.String(ev.EventType),
			attrAggregateType.String(ev.AggregateType),
		))
	defer span.End()
	outcome, err := h.cfg.Process(ctx, ev)
	seen := outcomeOf(outcome, err)
	if errors.Is(err, ErrDuplicate) {
		seen = Duplicate
	}
	span.SetAttributes(attrOutcome.String(seen.String()))
	if seen == Failed || seen == Rejected {
		span.SetStatus(codes.Error, err.Error())
	}
	return outcome, err
}
