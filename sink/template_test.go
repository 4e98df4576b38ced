package sink_test

import (
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
)

func TestTemplateExpands(t *testing.T) {
	ev := &postbox.Event{EventType: "order.paid", AggregateType: "order", AggregateID: "42"}
	for _, c := range []struct{ template, want string }{
		{"orders", "orders"},
		{"{event_type}", "order.paid"},
		{"outbox.event.{aggregate_type}", "outbox.event.order"},
		{"{aggregate_type}.{aggregate_id}.{event_type}", "order.42.order.paid"},
		{"", ""},
	} {
		tpl, err := sink.ParseTemplate(c.template)
		if err != nil {
			t.Fatalf("ParseTemplate(%q): %v", c.template, err)
		}
		if got := tpl.Expand(ev); got != c.want {
			t.Errorf("%q expands to %q, want %q", c.template, got, c.want)
		}
		if tpl.String() != c.template {
			t.Errorf("String() = %q, want %q", tpl.String(), c.template)
		}
	}
}

func TestTemplateIsFixed(t *testing.T) {
	for s, want := range map[string]bool{"orders": true, "orders.{event_type}": false, "{aggregate_id}": false} {
		tpl, err := sink.ParseTemplate(s)
		if err != nil {
			t.Fatal(err)
		}
		if tpl.IsFixed() != want {
			t.Errorf("%q: IsFixed %v, want %v", s, tpl.IsFixed(), want)
		}
	}
}

func TestTemplateRefusesUnknownPlaceholders(t *testing.T) {
	for _, s := range []string{"{eventtype}", "orders.{event_type", "orders}", "{}", "{aggregate_id}}"} {
		if _, err := sink.ParseTemplate(s); err == nil {
			t.Errorf("ParseTemplate(%q) accepted it", s)
		}
	}
}

func TestBrokerHeadersWin(t *testing.T) {
	m := &sink.Message{Event: postbox.Event{
		ID: postbox.NewID(), EventType: "order.paid", AggregateType: "order", AggregateID: "42",
		Headers: map[string]string{"traceparent": "00-1-2-01", "postbox-event-type": "forged", "content-type": "text/plain"},
	}, Attempt: 3}
	got := map[string]string{}
	sink.BrokerHeaders(m, func(name, value string) {
		if _, dup := got[name]; dup {
			t.Errorf("header %s set twice", name)
		}
		got[name] = value
	})
	want := map[string]string{
		"traceparent":               "00-1-2-01",
		postbox.HeaderEventID:       m.ID.String(),
		postbox.HeaderEventType:     "order.paid",
		postbox.HeaderAggregateType: "order",
		postbox.HeaderAggregateID:   "42",
		postbox.HeaderAttempt:       "3",
		postbox.HeaderContentType:   postbox.ContentTypeJSON,
	}
	if len(got) != len(want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
}

// The content type is the message's, JSON when it names none; an event
// header never replaces it.
func TestBrokerHeadersCarryTheContentType(t *testing.T) {
	for _, tc := range []struct{ contentType, want string }{
		{"", postbox.ContentTypeJSON},
		{"application/cloudevents+json; charset=utf-8", "application/cloudevents+json; charset=utf-8"},
	} {
		m := &sink.Message{Event: postbox.Event{
			ID: postbox.NewID(), EventType: "order.paid", Headers: map[string]string{"Content-Type": "text/plain"},
		}, ContentType: tc.contentType}
		var got []string
		sink.BrokerHeaders(m, func(name, value string) {
			if name == postbox.HeaderContentType {
				got = append(got, value)
			}
		})
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("ContentType %q: Content-Type headers %q, want [%q]", tc.contentType, got, tc.want)
		}
	}
}
