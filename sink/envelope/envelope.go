// Package envelope wraps a sink so that each event goes out in an
// envelope that its consumers already know how to read: the payload alone
// (Raw, what postbox has always sent), the Standard Webhooks payload
// structure, or a CloudEvents 1.0 event in structured or binary content
// mode.
//
// # Envelopes
//
// Standard is the payload structure that the Standard Webhooks
// specification recommends: the body {"type": the event type,
// "timestamp": the event's time, "data": the payload}, as JSON.
//
// CloudEvents (structured content mode) sends the event in the JSON event
// format, media type "application/cloudevents+json; charset=utf-8":
// specversion "1.0", id (the event id), source (Config.Source), type (the
// event type), time, subject (the aggregate id, when there is one), the
// extension attribute aggregatetype (the aggregate type, when there is
// one), datacontenttype, and data, the payload as it is stored, or
// data_base64 when the payload's content type is not JSON.
//
// CloudEventsBinary (binary content mode) sends the payload unchanged, its
// content type the datacontenttype, and every other attribute as a header
// of the protocol the wrapped sink speaks (Config.Binding), named and
// encoded as its CloudEvents protocol binding says: "ce-type" with
// percent-encoded values over HTTP, "ce_type" over Kafka,
// "cloudEvents:type" over AMQP. The NATS binding (version 1.0.2) defines
// structured mode only, so Wrap refuses binary mode over NATS.
//
// The envelopes are written to the CloudEvents 1.0.2 and Standard Webhooks
// specifications by hand rather than with the CloudEvents Go SDK, which
// would bring a large tree of dependencies into every program for a few
// attributes; the tests decode what the envelopes send with that SDK.
//
// # Time
//
// The timestamp (Standard) and time (CloudEvents) of an event are the
// time in its id when the id is a UUIDv7, which the outbox gives every
// event it creates: the time the event was enqueued, the same on every
// attempt. Producers that insert rows with plain SQL may use other ids
// (a UUIDv4): their events carry the time of the publish instead. Times
// are RFC 3339 in UTC with microseconds.
//
// # Signatures
//
// Over the webhook sink, Standard and structured mode put everything in
// the body, which the webhook signature covers. Binary mode's ce-*
// headers are not signed: the signature covers the body (the payload) and
// the Postbox-* metadata headers (package signature), which carry the
// same event type, aggregate type and aggregate id; a receiver that must
// trust them reads those, or takes structured mode.
//
// # Failures
//
// An envelope never re-encodes the payload: data holds its bytes as they
// are. What an event cannot be sent as in its envelope (an event type or
// aggregate that is no valid CloudEvents String, such as one with a control
// character; a payload whose content type says JSON but that is not; an
// event header that would claim one of the attributes the envelope sets)
// fails that event alone, as a sink.Permanent error.
package envelope

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/postbox-go/postbox/sink"
)

// Kind is an envelope.
type Kind int

const (
	// Raw sends the payload as it is, with no envelope: Wrap returns the
	// sink itself.
	Raw Kind = iota
	// Standard sends the Standard Webhooks payload structure {"type",
	// "timestamp", "data"}.
	Standard
	// CloudEvents sends a CloudEvents 1.0 event in structured content
	// mode, the JSON event format.
	CloudEvents
	// CloudEventsBinary sends a CloudEvents 1.0 event in binary content
	// mode: the payload as it is, the attributes as headers.
	CloudEventsBinary
)

// kindNames are the names of the kinds, by Kind.
var kindNames = [...]string{Raw: "raw", Standard: "standard", CloudEvents: "cloudevents", CloudEventsBinary: "cloudevents-binary"}

// ParseKind returns the kind of name: "raw" (or ""), "standard",
// "cloudevents" or "cloudevents-binary".
func ParseKind(name string) (Kind, error) {
	if name == "" {
		return Raw, nil
	}
	for k, n := range kindNames {
		if n == name {
			return Kind(k), nil
		}
	}
	return Raw, fmt.Errorf("envelope: unknown envelope %q: want %s", name, strings.Join(kindNames[:], ", "))
}

// String returns the name of k that ParseKind reads.
func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// Binding is the protocol that the wrapped sink speaks, whose CloudEvents
// protocol binding names and encodes the headers of binary content mode.
type Binding int

const (
	// HTTP is the webhook sink's: headers "ce-id", "ce-type"..., their
	// values percent-encoded; the datacontenttype is the Content-Type.
	HTTP Binding = iota
	// Kafka is the Kafka sink's: headers "ce_id", "ce_type"..., UTF-8;
	// the datacontenttype is the header "content-type".
	Kafka
	// AMQP is the RabbitMQ sink's: headers (application properties)
	// "cloudEvents:id", "cloudEvents:type"..., strings; the
	// datacontenttype is the content_type property.
	AMQP
	// NATS is the NATS sink's. Its binding defines structured mode only:
	// Wrap refuses CloudEventsBinary over NATS.
	NATS
)

// bindingNames are the names of the bindings, by Binding, and the
// sink.Destination System of the sinks that speak them.
var bindingNames = [...]struct{ name, system string }{
	HTTP:  {"http", "webhook"},
	Kafka: {"kafka", "kafka"},
	AMQP:  {"amqp", "rabbitmq"},
	NATS:  {"nats", "nats"},
}

// String names b: "http", "kafka", "amqp" or "nats".
func (b Binding) String() string {
	if b < 0 || int(b) >= len(bindingNames) {
		return fmt.Sprintf("Binding(%d)", int(b))
	}
	return bindingNames[b].name
}

// BindingFor returns the binding of the sinks whose destination is d, by
// its System ("webhook", "kafka", "rabbitmq", "nats"), and false for a
// system it does not know.
func BindingFor(d sink.Destination) (Binding, bool) {
	for b, n := range bindingNames {
		if n.system == d.System {
			return Binding(b), true
		}
	}
	return HTTP, false
}

// SourceDefault is the CloudEvents source of Config's zero Source.
const SourceDefault = "/postbox"

// ContentTypeCloudEvents is the content type of structured mode: the
// CloudEvents JSON event format.
const ContentTypeCloudEvents = "application/cloudevents+json; charset=utf-8"

// Config chooses an envelope.
type Config struct {
	// Kind is the envelope; the zero Kind is Raw.
	Kind Kind
	// Source is the CloudEvents source attribute, a non-empty
	// URI-reference (RFC 3986), such as "/postbox/orders" or
	// "https://shop.example/orders"; empty means SourceDefault. Only the
	// CloudEvents kinds read it. Producers must keep source + id unique:
	// event ids are.
	Source string
	// Binding is the protocol of the wrapped sink, which names the
	// headers of binary mode (the zero Binding is HTTP, the webhook's);
	// only CloudEventsBinary reads it, and Wrap refuses one that differs
	// from what the wrapped sink's Destination says it is (BindingFor).
	Binding Binding
}

// Wrap returns a sink that publishes each message to next in the envelope
// c names, and next itself for Raw. The returned sink's String and
// Destination are next's (String adds the envelope's name); it is an
// io.Closer when next is one, closing next, and a sink.BatchSink when next
// is one. Wrap refuses a Config that is not valid, and binary mode over
// NATS.
func Wrap(next sink.Sink, c Config) (sink.Sink, error) {
	if next == nil {
		return nil, errors.New("envelope: no sink to wrap")
	}
	enc, err := newEncoder(next, c)
	if err != nil {
		return nil, err
	}
	if enc == nil {
		return next, nil
	}
	w := &wrapper{next: next, enc: enc, name: c.Kind.String()}
	closer, isCloser := next.(io.Closer)
	batcher, isBatch := next.(sink.BatchSink)
	switch {
	case isCloser && isBatch:
		return &struct {
			*wrapper
			batchWrapper
			io.Closer
		}{w, batchWrapper{w, batcher}, closer}, nil
	case isBatch:
		return &struct {
			*wrapper
			batchWrapper
		}{w, batchWrapper{w, batcher}}, nil
	case isCloser:
		return &struct {
			*wrapper
			io.Closer
		}{w, closer}, nil
	}
	return w, nil
}

// newEncoder returns the encoder of c for next, nil for Raw.
func newEncoder(next sink.Sink, c Config) (encoder, error) {
	switch c.Kind {
	case Raw:
		return nil, nil
	case Standard:
		return standard{}, nil
	case CloudEvents, CloudEventsBinary:
	default:
		return nil, fmt.Errorf("envelope: unknown envelope %s", c.Kind)
	}
	source := c.Source
	if source == "" {
		source = SourceDefault
	}
	if err := checkURIReference(source); err != nil {
		return nil, fmt.Errorf("envelope: CloudEvents source %q: %w", source, err)
	}
	if c.Kind == CloudEvents {
		return newStructured(source), nil
	}
	if c.Binding < 0 || int(c.Binding) >= len(bindingNames) {
		return nil, fmt.Errorf("envelope: unknown binding %s", c.Binding)
	}
	b, known := BindingFor(next.Destination())
	if c.Binding == NATS || known && b == NATS {
		return nil, errors.New("envelope: CloudEvents binary mode over NATS: the NATS protocol binding (CloudEvents 1.0.2) defines structured mode only; use the cloudevents envelope")
	}
	if known && b != c.Binding {
		return nil, fmt.Errorf("envelope: CloudEvents binary mode with the %s binding for a %s sink, which speaks %s: set Config.Binding to %s",
			c.Binding, next.Destination().System, b, b)
	}
	return newBinary(source, c.Binding), nil
}

// encoder puts a message in an envelope.
type encoder interface {
	// encode returns the message of m in the envelope, or a
	// sink.Permanent error saying why m cannot be sent in it. It never
	// modifies m, its Payload or its Headers.
	encode(m *sink.Message) (*sink.Message, error)
}

// wrapper is the sink Wrap returns: it encodes each message, then
// publishes it to next.
type wrapper struct {
	next sink.Sink
	enc  encoder
	name string
}

// Publish publishes m to the wrapped sink in the envelope.
func (w *wrapper) Publish(ctx context.Context, m *sink.Message) error {
	out, err := w.enc.encode(m)
	if err != nil {
		return err
	}
	return w.next.Publish(ctx, out)
}

// String is the wrapped sink's, with the envelope's name.
func (w *wrapper) String() string { return w.next.String() + " (envelope " + w.name + ")" }

// Destination is the wrapped sink's.
func (w *wrapper) Destination() sink.Destination { return w.next.Destination() }

// batchWrapper is the PublishBatch of a wrapper of a sink.BatchSink.
type batchWrapper struct {
	w    *wrapper
	next sink.BatchSink
}

// PublishBatch publishes the messages of msgs that have an envelope to the
// wrapped sink at once; those that have none fail alone.
func (b batchWrapper) PublishBatch(ctx context.Context, msgs []*sink.Message, errs []error) {
	out := make([]*sink.Message, 0, len(msgs))
	index := make([]int, 0, len(msgs))
	for i, m := range msgs {
		e, err := b.w.enc.encode(m)
		if err != nil {
			errs[i] = err
			continue
		}
		out = append(out, e)
		index = append(index, i)
	}
	if len(out) == 0 {
		return
	}
	outErrs := make([]error, len(out))
	b.next.PublishBatch(ctx, out, outErrs)
	for j, i := range index {
		errs[i] = outErrs[j]
	}
}
