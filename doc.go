// Package postbox makes "save the business change and tell the world about it"
// atomic and duplicate-safe.
//
// A producer writes an Event into the outbox table in the same database
// transaction as the business change that caused it (see the Enqueue calls of
// the store packages, such as store/postgres). The relay package claims
// committed events, publishes them through a sink (signed webhooks, in
// sink/webhook; NATS JetStream, RabbitMQ and Kafka, in sink/nats, sink/amqp
// and sink/kafka, all on the same interface) with retries, exponential backoff, leases and a dead-letter state, and the
// inbox package lets a consumer apply each event exactly once.
//
// The tables stay compatible with the plain SQL of the article postbox grew
// from, so producers in any language can keep writing
//
//	insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key)
//	values ('order', '42', 'order.created', '{"order_id": 42}', 'order.created:42');
package postbox
