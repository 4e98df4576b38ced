package envelope_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink/envelope"
)

// cloudEventsConfigs are the CloudEvents envelopes, by name, with the
// system of the sink each wraps.
var cloudEventsConfigs = []struct {
	name   string
	system string
	config envelope.Config
}{
	{"structured", "webhook", envelope.Config{Kind: envelope.CloudEvents}},
	{"binary http", "webhook", envelope.Config{Kind: envelope.CloudEventsBinary, Binding: envelope.HTTP}},
	{"binary kafka", "kafka", envelope.Config{Kind: envelope.CloudEventsBinary, Binding: envelope.Kafka}},
	{"binary amqp", "rabbitmq", envelope.Config{Kind: envelope.CloudEventsBinary, Binding: envelope.AMQP}},
}

// An event type, aggregate type or aggregate id that is no CloudEvents
// String fails its event alone, Permanent, naming the attribute and what
// is wrong but not quoting the value; the next event goes through.
func TestHostileAttributesFailAlone(t *testing.T) {
	bad := map[string]string{
		"a\nb":             "control character U+000A",
		"a\r\nX-Forged":    "control character U+000D",
		"nul\x00":          "control character U+0000",
		"del\x7f":          "control character U+007F",
		"nel\u0085":        "control character U+0085",
		"bom\uFFFE":        "noncharacter U+FFFE",
		"\uFDD0":           "noncharacter U+FDD0",
		"\U0010FFFF":       "noncharacter U+10FFFF",
		"bad\xffutf8":      "invalid UTF-8 (byte 0xFF)",
		"surr\xed\xa0\x80": "invalid UTF-8 (byte 0xED)",
	}
	for _, c := range cloudEventsConfigs {
		next := &recorder{system: c.system}
		s, err := envelope.Wrap(next, c.config)
		if err != nil {
			t.Fatal(err)
		}
		for value, want := range bad {
			for _, attr := range []string{"type", "subject", "aggregatetype"} {
				e := postbox.Event{ID: postbox.NewID(), EventType: "ok", AggregateType: "order", AggregateID: "1", Payload: []byte(`{}`)}
				switch attr {
				case "type":
					e.EventType = value
				case "subject":
					e.AggregateID = value
				default:
					e.AggregateType = value
				}
				n := len(next.messages())
				err := s.Publish(t.Context(), message(e))
				isPermanent(t, err, attr+" (")
				isPermanent(t, err, want)
				if err != nil && strings.Contains(err.Error(), value) {
					t.Errorf("%s: the error quotes the hostile value: %v", c.name, err)
				}
				good := message(postbox.Event{ID: postbox.NewID(), EventType: "ok", Payload: []byte(`{}`)})
				if err := s.Publish(t.Context(), good); err != nil {
					t.Errorf("%s: the next event failed: %v", c.name, err)
				}
				if got := next.messages(); len(got) != n+1 || got[n].ID != good.ID {
					t.Errorf("%s: the sink was given %d messages after a hostile %s, want only the good one", c.name, len(got)-n, attr)
				}
			}
		}
		err = s.Publish(t.Context(), message(postbox.Event{ID: postbox.NewID(), Payload: []byte(`{}`)}))
		isPermanent(t, err, "the event type is empty")
	}
}

// The Standard envelope writes any valid UTF-8 event type as a JSON string
// (control characters escaped) and refuses only invalid UTF-8, which JSON
// cannot carry as it is.
func TestStandardEventTypes(t *testing.T) {
	next := &recorder{system: "webhook"}
	s, err := envelope.Wrap(next, envelope.Config{Kind: envelope.Standard})
	if err != nil {
		t.Fatal(err)
	}
	for _, eventType := range []string{"a\nb\t\"c\"\\d\x00\x1f\x7f", "</script>&", "Euro € 😀", "\u2028\u2029"} {
		if err := s.Publish(t.Context(), message(postbox.Event{ID: postbox.NewID(), EventType: eventType, Payload: []byte(`1`)})); err != nil {
			t.Fatalf("%q: %v", eventType, err)
		}
		var body struct{ Type string }
		if err := json.Unmarshal(next.last(t).Payload, &body); err != nil || body.Type != eventType {
			t.Errorf("%q: parsed back as %q, %v", eventType, body.Type, err)
		}
	}
	err = s.Publish(t.Context(), message(postbox.Event{ID: postbox.NewID(), EventType: "bad\xc3", Payload: []byte(`1`)}))
	isPermanent(t, err, "not valid UTF-8 (invalid UTF-8 (byte 0xC3) at byte 3)")
}

// A payload that is not JSON cannot be embedded as JSON: Standard and
// structured mode fail it alone; binary mode sends it as it is, as Raw
// does.
func TestPayloadThatIsNotJSON(t *testing.T) {
	for _, payload := range []string{``, `{"a":`, `{} {}`, `nul`, "\xff", `{"a":1}x`} {
		for _, kind := range []envelope.Kind{envelope.Standard, envelope.CloudEvents} {
			s, err := envelope.Wrap(&recorder{}, envelope.Config{Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Publish(t.Context(), message(postbox.Event{ID: postbox.NewID(), EventType: "t", Payload: []byte(payload)}))
			isPermanent(t, err, fmt.Sprintf("the payload (%d bytes) is not valid JSON", len(payload)))
		}
		next := &recorder{}
		s, _ := envelope.Wrap(next, envelope.Config{Kind: envelope.CloudEventsBinary})
		if err := s.Publish(t.Context(), message(postbox.Event{ID: postbox.NewID(), EventType: "t", Payload: []byte(payload)})); err != nil || string(next.last(t).Payload) != payload {
			t.Errorf("binary mode with payload %q: %v", payload, err)
		}
	}
}

// A payload of another content type is data_base64 in structured mode,
// which the SDK decodes back to its bytes, and keeps its content type in
// binary mode; the Standard envelope refuses it.
func TestPayloadOfAnotherContentType(t *testing.T) {
	payload := []byte("<order id=\"42\"/>\x00\xff")
	for _, kind := range []envelope.Kind{envelope.CloudEvents, envelope.CloudEventsBinary} {
		next := newHTTPSink(t)
		s, err := envelope.Wrap(next, envelope.Config{Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		m := message(postbox.Event{ID: postbox.NewID(), EventType: "t", Payload: payload})
		m.ContentType = "application/xml"
		if err := s.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		ev := next.last(t).event
		if err := ev.Validate(); err != nil || ev.DataContentType() != "application/xml" || string(ev.Data()) != string(payload) {
			t.Errorf("%s: datacontenttype %q, data %q, %v; want application/xml and the payload", kind, ev.DataContentType(), ev.Data(), err)
		}
	}
	rec := &recorder{}
	s, _ := envelope.Wrap(rec, envelope.Config{Kind: envelope.CloudEvents})
	m := message(postbox.Event{ID: postbox.NewID(), EventType: "t", Payload: payload})
	m.ContentType = "text/plain"
	if err := s.Publish(t.Context(), m); err != nil || !strings.Contains(string(rec.last(t).Payload), `"data_base64":"PG9yZGVyIGlkPSI0MiIvPgD/"`) {
		t.Errorf("structured text/plain: %v; body %s", err, rec.last(t).Payload)
	}
	s, _ = envelope.Wrap(&recorder{}, envelope.Config{Kind: envelope.Standard})
	isPermanent(t, s.Publish(t.Context(), m), `content type "text/plain" is not JSON`)
	for _, ct := range []string{"application/json", "application/problem+json; charset=utf-8", "TEXT/JSON", " application/vnd.api+JSON ;x=y"} {
		m.ContentType, m.Payload = ct, []byte(`{"a":1}`)
		if err := s.Publish(t.Context(), m); err != nil {
			t.Errorf("content type %q is JSON: %v", ct, err)
		}
	}
}

// In binary mode, an event header that would set an attribute the
// envelope sets (in any case) fails the event; one of another attribute
// name (an extension of the producer's) is sent as it is; structured mode
// sends every header as it is.
func TestEventHeadersCannotSetAttributes(t *testing.T) {
	claims := map[string][]string{
		"binary http":  {"ce-id", "CE-TYPE", "Ce-Source", "ce-specversion", "ce-time", "ce-subject", "ce-aggregatetype", "Ce-Datacontenttype"},
		"binary kafka": {"ce_id", "CE_TYPE", "ce_datacontenttype"},
		"binary amqp":  {"cloudEvents:id", "CLOUDEVENTS:SOURCE", "cloudevents:time", "cloudEvents_type", "CLOUDEVENTS_ID", "cloudEvents_anything"},
	}
	for _, c := range cloudEventsConfigs {
		next := &recorder{system: c.system}
		s, err := envelope.Wrap(next, c.config)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range claims[c.name] {
			m := message(postbox.Event{ID: postbox.NewID(), EventType: "t", Payload: []byte(`{}`), Headers: map[string]string{name: "forged"}})
			isPermanent(t, s.Publish(t.Context(), m), fmt.Sprintf("its header %q would set a CloudEvents attribute", name))
		}
		m := message(postbox.Event{ID: postbox.NewID(), EventType: "t", Payload: []byte(`{}`), Headers: map[string]string{"ce-traceparent": "x", "ce_partitionkey": "y"}})
		if c.name == "structured" {
			m.Headers["ce-id"] = "forged"
		}
		if err := s.Publish(t.Context(), m); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for name, v := range m.Headers {
			if got := next.last(t).Headers[name]; got != v {
				t.Errorf("%s: header %s = %q, want the event's %q", c.name, name, got, v)
			}
		}
	}
}
