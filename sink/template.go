package sink

import (
	"fmt"
	"strings"

	"github.com/postbox-go/postbox"
)

// Placeholders a Template may hold, each replaced by a field of the event.
const (
	PlaceholderEventType     = "{event_type}"
	PlaceholderAggregateType = "{aggregate_type}"
	PlaceholderAggregateID   = "{aggregate_id}"
)

// Template names a broker destination (a NATS subject, an AMQP routing key,
// a Kafka topic) from an event's fields: "orders.{event_type}" sends an
// event of type "order.paid" to "orders.order.paid". A template without a
// placeholder names one fixed destination. The zero Template is empty.
type Template struct {
	raw string
	// parts alternate literal text and placeholders; a placeholder is
	// stored as its field's getter.
	parts []templatePart
}

type templatePart struct {
	literal string
	field   func(*postbox.Event) string
}

// ParseTemplate parses a template. Text in braces must be one of the
// placeholders: a misspelt "{eventtype}" is an error, not a literal.
func ParseTemplate(s string) (Template, error) {
	t := Template{raw: s}
	rest := s
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			t.parts = append(t.parts, templatePart{literal: rest})
			break
		}
		if open > 0 {
			t.parts = append(t.parts, templatePart{literal: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return Template{}, fmt.Errorf("sink: template %q: unclosed %q", s, "{")
		}
		name := rest[open : open+end+1]
		field, ok := templateFields[name]
		if !ok {
			return Template{}, fmt.Errorf("sink: template %q: unknown placeholder %s (want %s, %s or %s)",
				s, name, PlaceholderEventType, PlaceholderAggregateType, PlaceholderAggregateID)
		}
		t.parts = append(t.parts, templatePart{field: field})
		rest = rest[open+end+1:]
	}
	if strings.IndexByte(s, '}') >= 0 && strings.Count(s, "}") != strings.Count(s, "{") {
		return Template{}, fmt.Errorf("sink: template %q: unmatched %q", s, "}")
	}
	return t, nil
}

var templateFields = map[string]func(*postbox.Event) string{
	PlaceholderEventType:     func(e *postbox.Event) string { return e.EventType },
	PlaceholderAggregateType: func(e *postbox.Event) string { return e.AggregateType },
	PlaceholderAggregateID:   func(e *postbox.Event) string { return e.AggregateID },
}

// Expand returns the destination of e.
func (t Template) Expand(e *postbox.Event) string {
	if len(t.parts) == 1 && t.parts[0].field == nil {
		return t.parts[0].literal
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.field != nil {
			b.WriteString(p.field(e))
		} else {
			b.WriteString(p.literal)
		}
	}
	return b.String()
}

// IsFixed reports whether the template has no placeholder: every event goes
// to the same destination, which can be checked once at start.
func (t Template) IsFixed() bool {
	for _, p := range t.parts {
		if p.field != nil {
			return false
		}
	}
	return true
}

// String returns the template as it was written.
func (t Template) String() string { return t.raw }
