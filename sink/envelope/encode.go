package envelope

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
)

// timeLayout is RFC 3339 in UTC with microseconds, as Standard Webhooks'
// example has it: "2022-11-03T20:26:10.344522Z".
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// timeLen is the length of a time in timeLayout, in UTC.
const timeLen = len("2006-01-02T15:04:05.000000Z")

// eventTime is the time of the event of id: the time in the id when it is
// a UUIDv7 of a year RFC 3339 can write, the current time otherwise.
func eventTime(id uuid.UUID) time.Time {
	if id.Version() == 7 && id.Variant() == uuid.RFC4122 {
		sec, nsec := id.Time().UnixTime()
		if t := time.Unix(sec, nsec).UTC(); t.Year() <= 9999 {
			return t
		}
	}
	return time.Now().UTC()
}

// appendTime appends t in timeLayout, in UTC.
func appendTime(b []byte, t time.Time) []byte { return t.UTC().AppendFormat(b, timeLayout) }

// permanent is the error of an event that cannot be sent in its envelope.
func permanent(m *sink.Message, format string, args ...any) error {
	return &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("envelope: event %s: "+format, append([]any{m.ID}, args...)...)}
}

// contentType is the media type of m's payload.
func contentType(m *sink.Message) string {
	if m.ContentType == "" {
		return postbox.ContentTypeJSON
	}
	return m.ContentType
}

// checkJSON refuses a payload that is not valid JSON, to be embedded as a
// JSON value.
func checkJSON(m *sink.Message) error {
	if !json.Valid(m.Payload) {
		return permanent(m, "the payload (%d bytes) is not valid JSON, which the envelope embeds as it is", len(m.Payload))
	}
	return nil
}

// standard is the Standard Webhooks payload structure.
type standard struct{}

func (standard) encode(m *sink.Message) (*sink.Message, error) {
	if ct := contentType(m); !isJSONMediaType(ct) {
		return nil, permanent(m, "the payload's content type %.64q is not JSON, which the standard envelope's data is", ct)
	}
	if i, r := invalidUTF8(m.EventType); i >= 0 {
		return nil, permanent(m, "the event type is not valid UTF-8 (%s at byte %d)", r, i)
	}
	if err := checkJSON(m); err != nil {
		return nil, err
	}
	const fixed = len(`{"type":"","timestamp":"","data":}`)
	body := make([]byte, 0, fixed+2*len(m.EventType)+timeLen+len(m.Payload))
	body = append(body, `{"type":`...)
	body = appendJSONString(body, m.EventType)
	body = append(body, `,"timestamp":"`...)
	body = appendTime(body, eventTime(m.ID))
	body = append(body, `","data":`...)
	body = append(body, m.Payload...)
	body = append(body, '}')
	out := *m
	out.Payload = body
	out.ContentType = postbox.ContentTypeJSON
	return &out, nil
}

// attributes are the CloudEvents attributes of a message that come from
// the event, checked: what every CloudEvents envelope sends.
type attributes struct {
	id, eventType, subject, aggregateType, dataContentType string
	time                                                   time.Time
}

// attributesOf returns the attributes of m, or a sink.Permanent error
// naming the one that is no valid CloudEvents String.
func attributesOf(m *sink.Message) (attributes, error) {
	a := attributes{
		id: m.ID.String(), eventType: m.EventType, subject: m.AggregateID, aggregateType: m.AggregateType,
		dataContentType: contentType(m), time: eventTime(m.ID),
	}
	if a.eventType == "" {
		return a, permanent(m, "the event type is empty: CloudEvents requires a type")
	}
	for _, attr := range [...]struct{ name, value string }{
		{"type (the event type)", a.eventType},
		{"subject (the aggregate id)", a.subject},
		{attrAggregateType + " (the aggregate type)", a.aggregateType},
		{"datacontenttype (the payload's content type)", a.dataContentType},
	} {
		if i, what := invalidString(attr.value); i >= 0 {
			return a, permanent(m, "the CloudEvents attribute %s is no valid String: %s at byte %d", attr.name, what, i)
		}
	}
	return a, nil
}

// attrAggregateType is the extension attribute that holds the aggregate
// type (a CloudEvents attribute name: lower-case ASCII letters and digits,
// at most 20).
const attrAggregateType = "aggregatetype"

// structured is CloudEvents' structured content mode, the JSON event
// format.
type structured struct {
	// source is the source attribute, as a JSON string.
	source []byte
}

func newStructured(source string) structured {
	return structured{source: appendJSONString(nil, source)}
}

func (s structured) encode(m *sink.Message) (*sink.Message, error) {
	a, err := attributesOf(m)
	if err != nil {
		return nil, err
	}
	isJSON := isJSONMediaType(a.dataContentType)
	size := len(m.Payload)
	if isJSON {
		if err := checkJSON(m); err != nil {
			return nil, err
		}
	} else {
		size = base64.StdEncoding.EncodedLen(len(m.Payload))
	}
	const fixed = len(`{"specversion":"1.0","id":"","source":,"type":,"time":"","subject":,"aggregatetype":,"datacontenttype":,"data_base64":""}`)
	body := make([]byte, 0, fixed+len(a.id)+len(s.source)+timeLen+
		2*(len(a.eventType)+len(a.subject)+len(a.aggregateType)+len(a.dataContentType)+4)+size)
	body = append(body, `{"specversion":"1.0","id":"`...)
	body = append(body, a.id...)
	body = append(body, `","source":`...)
	body = append(body, s.source...)
	body = append(body, `,"type":`...)
	body = appendJSONString(body, a.eventType)
	body = append(body, `,"time":"`...)
	body = appendTime(body, a.time)
	body = append(body, '"')
	if a.subject != "" {
		body = append(body, `,"subject":`...)
		body = appendJSONString(body, a.subject)
	}
	if a.aggregateType != "" {
		body = append(body, `,"`+attrAggregateType+`":`...)
		body = appendJSONString(body, a.aggregateType)
	}
	body = append(body, `,"datacontenttype":`...)
	body = appendJSONString(body, a.dataContentType)
	if isJSON {
		body = append(body, `,"data":`...)
		body = append(body, m.Payload...)
	} else {
		body = append(body, `,"data_base64":"`...)
		body = base64.StdEncoding.AppendEncode(body, m.Payload)
		body = append(body, '"')
	}
	body = append(body, '}')
	out := *m
	out.Payload = body
	out.ContentType = ContentTypeCloudEvents
	return &out, nil
}

// binary is CloudEvents' binary content mode for one protocol binding.
type binary struct {
	// The header names of the attributes, prefixed as the binding says.
	specVersion, id, source, eventType, time, subject, aggregateType string
	// dataContentType is the header that would name the datacontenttype
	// in the binding's prefix, which the protocol's own content type
	// holds instead: an event header of that name is refused.
	dataContentType string
	// sourceValue is the source as a header value.
	sourceValue string
	// percentEncode says whether string values are percent-encoded
	// (HTTP).
	percentEncode bool
	// otherPrefix is the binding's other attribute prefix, which an event
	// header may not use at all: AMQP's "cloudEvents_" beside the
	// "cloudEvents:" the envelope writes (the binding lets consumers read
	// either, and a message must use one: a header under the other would
	// pass for an attribute).
	otherPrefix string
}

// bindingPrefixes are the prefixes of the attributes' header names, by
// Binding (CloudEvents 1.0.2 protocol bindings: HTTP 3.1.3.1, Kafka
// 3.2.3.1, AMQP 3.1.3.1).
var bindingPrefixes = [...]string{HTTP: "ce-", Kafka: "ce_", AMQP: "cloudEvents:"}

func newBinary(source string, b Binding) *binary {
	p := bindingPrefixes[b]
	e := &binary{
		specVersion: p + "specversion", id: p + "id", source: p + "source", eventType: p + "type", time: p + "time",
		subject: p + "subject", aggregateType: p + attrAggregateType, dataContentType: p + "datacontenttype",
		percentEncode: b == HTTP,
	}
	if b == AMQP {
		e.otherPrefix = "cloudEvents_"
	}
	e.sourceValue = e.value(source)
	return e
}

// value is s as a header value of the binding.
func (b *binary) value(s string) string {
	if b.percentEncode {
		return percentEncode(s)
	}
	return s
}

// claims reports whether an event header of name would set an attribute
// that the envelope sets, in any case, or uses the binding's other prefix.
func (b *binary) claims(name string) bool {
	if b.otherPrefix != "" && len(name) >= len(b.otherPrefix) && strings.EqualFold(name[:len(b.otherPrefix)], b.otherPrefix) {
		return true
	}
	for _, n := range [...]string{b.specVersion, b.id, b.source, b.eventType, b.time, b.subject, b.aggregateType, b.dataContentType} {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

func (b *binary) encode(m *sink.Message) (*sink.Message, error) {
	a, err := attributesOf(m)
	if err != nil {
		return nil, err
	}
	for name := range m.Headers {
		if b.claims(name) {
			return nil, permanent(m, "its header %.64q would set a CloudEvents attribute that the envelope sets", name)
		}
	}
	h := make(map[string]string, len(m.Headers)+7)
	maps.Copy(h, m.Headers)
	h[b.specVersion] = "1.0"
	h[b.id] = a.id
	h[b.source] = b.sourceValue
	h[b.eventType] = b.value(a.eventType)
	h[b.time] = string(appendTime(make([]byte, 0, timeLen), a.time))
	if a.subject != "" {
		h[b.subject] = b.value(a.subject)
	}
	if a.aggregateType != "" {
		h[b.aggregateType] = b.value(a.aggregateType)
	}
	out := *m
	out.Headers = h
	out.ContentType = a.dataContentType
	return &out, nil
}
