package postbox

// The wire format: the header names an event travels under, a contract
// between the two ends of postbox. The sinks write them (the broker sinks
// NATS JetStream, RabbitMQ and Kafka as message headers, the webhook sink
// as HTTP headers, each with the payload as the body, unchanged) and the
// inbox's consumers read them back. They live here, in the vocabulary every
// package shares, rather than in package sink, so that the consuming side
// need not import the producing side to agree with it. The event id also
// travels in the broker's own message id (Nats-Msg-Id, AMQP message_id)
// where it has one.
const (
	HeaderEventID       = "Postbox-Event-Id"
	HeaderEventType     = "Postbox-Event-Type"
	HeaderAggregateType = "Postbox-Aggregate-Type"
	HeaderAggregateID   = "Postbox-Aggregate-Id"
	// HeaderAttempt is the relay's attempt number, from 1: a consumer may
	// log it; it never changes what the message means.
	HeaderAttempt = "Postbox-Attempt"
	// HeaderReplay marks a delivery of an event that was delivered
	// before, sent again on purpose (postbox replay); its value names the
	// replay. The event id is the first delivery's, so an inbox absorbs
	// what it already applied; the header is not signed: a consumer may
	// log or count it, never act on it alone.
	HeaderReplay = "Postbox-Replay"
	// HeaderContentType is the payload's media type, ContentTypeJSON.
	HeaderContentType = "Content-Type"
	ContentTypeJSON   = "application/json"
	// HeaderDebeziumID is the Kafka record header in which Debezium's
	// Outbox Event Router sends the event id. The Kafka sink sends it too,
	// and the Kafka consumer reads the id from it when HeaderEventID is
	// missing, so that it takes Debezium's records as well as the relay's.
	HeaderDebeziumID = "id"
)
