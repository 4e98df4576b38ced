package sink

import (
	"strconv"
	"strings"
)

// The broker wire format: every broker sink (NATS JetStream, RabbitMQ,
// Kafka) sends an event's payload as the message body, unchanged, with
// these headers, and the inbox's broker consumers read them back. The
// webhook sink sends the same Postbox-* names as HTTP headers. The event id
// also travels in the broker's own message id (Nats-Msg-Id, AMQP
// message_id) where it has one.
const (
	HeaderEventID       = "Postbox-Event-Id"
	HeaderEventType     = "Postbox-Event-Type"
	HeaderAggregateType = "Postbox-Aggregate-Type"
	HeaderAggregateID   = "Postbox-Aggregate-Id"
	// HeaderAttempt is the relay's attempt number, from 1: a consumer may
	// log it; it never changes what the message means.
	HeaderAttempt = "Postbox-Attempt"
	// HeaderContentType is the payload's media type, ContentTypeJSON.
	HeaderContentType = "Content-Type"
	ContentTypeJSON   = "application/json"
)

// BrokerHeaders calls set with each header a broker message of m carries:
// the event's own headers first (trace context and the like), then the
// Postbox-* headers and the content type, which win over an event header
// of the same name.
func BrokerHeaders(m *Message, set func(name, value string)) {
	for name, value := range m.Headers {
		if !isWireHeader(name) {
			set(name, value)
		}
	}
	set(HeaderEventID, m.ID.String())
	set(HeaderEventType, m.EventType)
	set(HeaderAggregateType, m.AggregateType)
	set(HeaderAggregateID, m.AggregateID)
	set(HeaderAttempt, strconv.Itoa(m.Attempt))
	set(HeaderContentType, ContentTypeJSON)
}

// isWireHeader reports whether name is one of the headers BrokerHeaders
// sets itself, in any case.
func isWireHeader(name string) bool {
	for _, h := range [...]string{HeaderEventID, HeaderEventType, HeaderAggregateType, HeaderAggregateID, HeaderAttempt, HeaderContentType} {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}
