package sink

import (
	"strconv"
	"strings"

	"github.com/postbox-go/postbox"
)

// BrokerHeaders calls set with each header a broker message of m carries:
// the event's own headers first (trace context and the like), then the
// Postbox-* headers and the content type of the wire format
// (postbox.HeaderEventID and the others), which win over an event header
// of the same name. The content type is m.ContentType, or
// postbox.ContentTypeJSON when that is empty. Every broker sink (NATS JetStream, RabbitMQ, Kafka)
// sends them with the payload as the message body, unchanged.
func BrokerHeaders(m *Message, set func(name, value string)) {
	for name, value := range m.Headers {
		if !isWireHeader(name) {
			set(name, value)
		}
	}
	set(postbox.HeaderEventID, m.ID.String())
	set(postbox.HeaderEventType, m.EventType)
	set(postbox.HeaderAggregateType, m.AggregateType)
	set(postbox.HeaderAggregateID, m.AggregateID)
	set(postbox.HeaderAttempt, strconv.Itoa(m.Attempt))
	contentType := m.ContentType
	if contentType == "" {
		contentType = postbox.ContentTypeJSON
	}
	set(postbox.HeaderContentType, contentType)
}

// isWireHeader reports whether name is one of the headers BrokerHeaders
// sets itself, in any case.
func isWireHeader(name string) bool {
	for _, h := range [...]string{
		postbox.HeaderEventID, postbox.HeaderEventType, postbox.HeaderAggregateType,
		postbox.HeaderAggregateID, postbox.HeaderAttempt, postbox.HeaderContentType,
	} {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}
