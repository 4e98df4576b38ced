package envelope_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/envelope"
)

// The Standard Webhooks envelope parses back to the event type, the
// event's time and the payload, whose bytes are in the body as they are.
func TestStandard(t *testing.T) {
	next := &recorder{system: "webhook"}
	s, err := envelope.Wrap(next, envelope.Config{Kind: envelope.Standard})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range testEvents() {
		t.Run(tc.name, func(t *testing.T) {
			m := message(tc.event)
			before := time.Now()
			if err := s.Publish(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			unchanged(t, m, tc.event)
			got := next.last(t)
			if got.ContentType != postbox.ContentTypeJSON || got.ID != m.ID || got.Attempt != 1 || got.Headers["traceparent"] != m.Headers["traceparent"] {
				t.Errorf("content type %q, id %s, attempt %d, headers %v: want JSON and the event's", got.ContentType, got.ID, got.Attempt, got.Headers)
			}
			var body struct {
				Type      string          `json:"type"`
				Timestamp string          `json:"timestamp"`
				Data      json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(got.Payload, &body); err != nil {
				t.Fatalf("the body is no JSON: %v", err)
			}
			if body.Type != m.EventType || !bytes.Equal(body.Data, bytes.TrimSpace(m.Payload)) {
				t.Errorf("type %q, data %.80q; want %q, the payload", body.Type, body.Data, m.EventType)
			}
			if !bytes.HasSuffix(got.Payload, append(append([]byte(`"data":`), m.Payload...), '}')) {
				t.Errorf("the body does not end in the payload's bytes as they are: %.200q", got.Payload)
			}
			ts, err := time.Parse(time.RFC3339Nano, body.Timestamp)
			if err != nil || len(body.Timestamp) != len("2006-01-02T15:04:05.000000Z") {
				t.Fatalf("timestamp %q is not RFC 3339 in UTC with microseconds: %v", body.Timestamp, err)
			}
			checkTime(t, ts, m.ID, before, after)
		})
	}
}

// The structured CloudEvents envelope, posted as the webhook sink posts a
// message, is read by the CloudEvents SDK's HTTP binding as a structured
// event that validates, with the event's attributes and the payload as
// its data.
func TestCloudEventsStructuredOverHTTP(t *testing.T) {
	next := newHTTPSink(t)
	s, err := envelope.Wrap(next, envelope.Config{Kind: envelope.CloudEvents, Source: "https://shop.example/orders"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range testEvents() {
		t.Run(tc.name, func(t *testing.T) {
			m := message(tc.event)
			before := time.Now()
			if err := s.Publish(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			unchanged(t, m, tc.event)
			got := next.last(t)
			if got.encoding != binding.EncodingStructured {
				t.Errorf("the SDK read a %v message, want structured", got.encoding)
			}
			if ct := got.header.Get("Content-Type"); ct != envelope.ContentTypeCloudEvents {
				t.Errorf("Content-Type %q", ct)
			}
			checkEvent(t, got.event, m, "https://shop.example/orders", before, after, nil)
			// The SDK reads the data from its first byte to the end of
			// the JSON value: the payload's trailing whitespace is not
			// in it (TestDataIsByteExact checks every byte).
			if !bytes.Equal(got.event.Data(), bytes.TrimRight(m.Payload, " \t\r\n")) {
				t.Errorf("data %.80q, want the payload %.80q", got.event.Data(), m.Payload)
			}
		})
	}
}

// The binary CloudEvents envelope over HTTP is read by the SDK as a binary
// event that validates, its data the payload byte for byte, its content
// type the payload's. The SDK does not percent-decode header values, as
// the HTTP binding (3.1.3.2) says a receiver must: the test does.
func TestCloudEventsBinaryOverHTTP(t *testing.T) {
	next := newHTTPSink(t)
	s, err := envelope.Wrap(next, envelope.Config{Kind: envelope.CloudEventsBinary, Binding: envelope.HTTP})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range testEvents() {
		t.Run(tc.name, func(t *testing.T) {
			m := message(tc.event)
			before := time.Now()
			if err := s.Publish(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			unchanged(t, m, tc.event)
			got := next.last(t)
			if got.encoding != binding.EncodingBinary {
				t.Errorf("the SDK read a %v message, want binary", got.encoding)
			}
			for name, values := range got.header {
				if !strings.HasPrefix(name, "Ce-") {
					continue
				}
				for _, v := range values {
					for i := range len(v) {
						if c := v[i]; c <= ' ' || c >= 0x7F || c == '"' {
							t.Errorf("header %s: %q holds 0x%02X, which the binding percent-encodes", name, v, c)
						}
					}
				}
			}
			if got.header.Get("Ce-Datacontenttype") != "" || got.header.Get("Traceparent") != m.Headers["traceparent"] {
				t.Errorf("headers %v: want no ce-datacontenttype and the event's traceparent", got.header)
			}
			checkEvent(t, got.event, m, envelope.SourceDefault, before, after, percentDecode)
			if !bytes.Equal(got.event.Data(), m.Payload) {
				t.Errorf("data %.80q, want the payload %.80q", got.event.Data(), m.Payload)
			}
		})
	}
}

// The percent-encoding of the binding's own example (HTTP 3.1.3.2).
func TestBinaryHTTPHeaderIsPercentEncodedAsTheSpecSays(t *testing.T) {
	next := &recorder{system: "webhook"}
	s, err := envelope.Wrap(next, envelope.Config{Kind: envelope.CloudEventsBinary, Source: "/a%20b"})
	if err != nil {
		t.Fatal(err)
	}
	m := message(postbox.Event{ID: postbox.NewID(), EventType: "Euro € 😀", AggregateID: `say "100%"`, Payload: []byte(`{}`)})
	if err := s.Publish(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	h := next.last(t).Headers
	for name, want := range map[string]string{
		"ce-type": "Euro%20%E2%82%AC%20%F0%9F%98%80", "ce-subject": "say%20%22100%25%22", "ce-source": "/a%2520b", "ce-specversion": "1.0",
	} {
		if h[name] != want {
			t.Errorf("%s: %q, want %q", name, h[name], want)
		}
	}
}

// percentDecode is the HTTP binding's single round of percent-decoding.
func percentDecode(t *testing.T, s string) string {
	d, err := url.PathUnescape(s)
	if err != nil {
		t.Errorf("%q: %v", s, err)
	}
	return d
}

// checkEvent fails t when ev, which a receiver made of m, is not valid or
// does not carry m's attributes; decode, when not nil, decodes each string
// attribute as the receiver should have.
func checkEvent(t *testing.T, ev *event.Event, m *sink.Message, source string, before, after time.Time, decode func(*testing.T, string) string) {
	t.Helper()
	if err := ev.Validate(); err != nil {
		t.Errorf("the event does not validate: %v", err)
	}
	if decode == nil {
		decode = func(_ *testing.T, s string) string { return s }
	}
	ct := m.ContentType
	if ct == "" {
		ct = postbox.ContentTypeJSON
	}
	if ev.SpecVersion() != "1.0" || ev.ID() != m.ID.String() || decode(t, ev.Source()) != source ||
		decode(t, ev.Type()) != m.EventType || decode(t, ev.Subject()) != m.AggregateID || ev.DataContentType() != ct {
		t.Errorf("specversion %q id %q source %q type %q subject %q datacontenttype %q; want 1.0, %s, %s, %q, %q, %s",
			ev.SpecVersion(), ev.ID(), ev.Source(), ev.Type(), ev.Subject(), ev.DataContentType(),
			m.ID, source, m.EventType, m.AggregateID, ct)
	}
	aggregateType, _ := ev.Extensions()["aggregatetype"].(string)
	if _, has := ev.Extensions()["aggregatetype"]; decode(t, aggregateType) != m.AggregateType || has != (m.AggregateType != "") {
		t.Errorf("extension aggregatetype %q (present %v), want %q", aggregateType, has, m.AggregateType)
	}
	checkTime(t, ev.Time(), m.ID, before, after)
}

// A UUIDv7 whose time RFC 3339 cannot write (beyond year 9999), and an id
// of another version, carry the time of the publish.
func TestTimeOfIDsWithoutAUsableTime(t *testing.T) {
	next := &recorder{}
	s, err := envelope.Wrap(next, envelope.Config{Kind: envelope.Standard})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ffffffff-ffff-7fff-bfff-ffffffffffff", "6e8bc430-9c3a-11d9-9669-0800200c9a66", "00000000-0000-0000-0000-000000000000"} {
		before := time.Now()
		if err := s.Publish(t.Context(), message(postbox.Event{ID: uuid.MustParse(id), EventType: "t", Payload: []byte(`{}`)})); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		var body struct{ Timestamp time.Time }
		if err := json.Unmarshal(next.last(t).Payload, &body); err != nil {
			t.Fatal(err)
		}
		if body.Timestamp.Before(before.Truncate(time.Microsecond)) || body.Timestamp.After(after) {
			t.Errorf("id %s: timestamp %v, want the publish's, between %v and %v", id, body.Timestamp, before, after)
		}
	}
}
