// Package inbox applies each incoming event exactly once: the consumer side
// of postbox.
//
// The sender (a postbox relay, or anything that delivers at least once)
// may deliver an event several times, at once or late, and in another order
// than it was written. The inbox absorbs this. For every event it writes a
// row, keyed by the event id, into the article's inbox_events table in the
// same database transaction as the application's own changes, so both
// commit or neither does:
//
//	ib := inbox.New(pgStore.Driver()) // pgStore is a *postgres.Store
//
//	out, err := ib.Process(ctx, ev, func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
//		_, err := tx.Exec(ctx, "insert into shipments(order_id) values ($1)", orderID(ev))
//		return err
//	})
//
// Process reports Processed, or Duplicate when the event was applied before
// (answer both as a success). When the handler fails, everything rolls back
// and the error comes back: answer it as a temporary failure, so the sender
// delivers the event again, and that delivery is processed. (The article's
// consumer inserted the inbox row, ran the logic and marked the row done in
// three statements: a failure after the insert turned every retry into a
// "duplicate" and the event was lost.) Deliveries of one event at once wait
// for each other on the row; the handler commits once.
//
// # Routes
//
// A Router dispatches events by type to handlers that take the decoded
// payload, so a consumer writes neither a switch on the event type nor the
// JSON decoding. Its Apply method is a ProcessFunc, and Inbox.Processor
// turns any ProcessFunc into the Process function of the webhook handler:
//
//	r := inbox.NewRouter[pgx.Tx]()
//	inbox.Handle(r, "order.created", func(ctx context.Context, tx pgx.Tx, ev *inbox.Event, p OrderCreated) error {
//		if p.OrderID == 0 {
//			return inbox.Reject(errors.New("order_id is missing"))
//		}
//		_, err := tx.Exec(ctx, "insert into shipments(order_id) values ($1)", p.OrderID)
//		return err
//	})
//	out, err := ib.Process(ctx, ev, r.Apply) // or HandlerConfig{Process: ib.Processor(r.Apply)}
//
// Payloads are decoded with encoding/json: fields the type lacks are
// ignored, and a payload that does not decode is rejected. An event type
// without a route is rejected by default; SetUnknown chooses to ignore such
// events (recorded done) or to fail them temporarily (retried).
//
// A handler error is temporary: the sender retries. Reject marks an error
// as permanent, for an event no retry can apply. Its error matches
// ErrRejected and ErrInvalidEvent; the event's row is recorded failed with
// the reason as its last error, the webhook handler answers 400, and a
// postbox relay stops after its few attempts for rejections (5 by default)
// and moves the event to its dead-letter state.
//
// # Webhooks
//
// NewHandler returns an http.Handler for signed webhook deliveries, such as
// those of the relay's webhook sink. It takes only POST, refuses sources
// outside an optional allowlist, reads at most MaxBodyBytes of the body,
// verifies the signature (package signature: the Standard Webhooks scheme or
// the article's X-Signature scheme, several secrets during a rotation,
// compared in constant time) and the timestamp's tolerance before it parses
// anything, then hands the event to HandlerConfig.Process:
//
//	h, err := inbox.NewHandler(inbox.HandlerConfig{
//		Secrets: []string{os.Getenv("WEBHOOK_SECRET")},
//		Process: func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
//			return ib.Process(ctx, ev, applyOrderEvent)
//		},
//	})
//	mux.Handle("POST /webhooks/postbox", h)
//
// Process: ib.Processor(applyOrderEvent) does the same without the closure,
// and takes a Router's Apply alike.
//
// # What the handler trusts
//
// The handler acts only on what a signature covers. The body and the event
// id are covered by the scheme's signature (Standard Webhooks signs
// id.timestamp.body). The X-Signature scheme signs only the timestamp and
// body, so a captured request could be replayed under a fresh X-Event-Id,
// past the inbox; the handler therefore requires the signed JSON body's
// "event_id" to name the same id (producers must put the outbox row id
// there).
//
// The metadata the inbox acts on, the event type (which route runs), the
// aggregate type and id and the sequence number (which order is enforced),
// travel in Postbox-* headers, which the body's signature does not cover:
// anyone on the path could re-send a captured delivery first with its
// event type changed to one the consumer ignores, which the inbox would
// record done, and the genuine delivery would then be a duplicate, never
// applied. So a postbox sender (package signature's Signer, which the
// relay's webhook sink uses) signs them too, into a second header,
// Postbox-Metadata-Signature, with the same secrets and scheme, over the
// id, the timestamp and the four values (package signature documents the
// exact bytes signed). By default (MetadataSigned) the handler takes the
// metadata only from headers that signature covers, and refuses a request
// without one (400) or whose headers do not match it (401), storing
// nothing. The body's signature header, Standard or X-Signature, is
// unchanged, so verifiers that know nothing of the metadata signature keep
// verifying it.
//
// A second header was chosen over the alternatives: a Standard Webhooks
// envelope ({"type", "timestamp", "data"}) or a copy of the metadata inside
// the body would change the body from the payload exactly as stored, which
// receivers written for the article's X-Signature and independent
// verifiers rely on; refusing a request whose header disagrees with the
// body needs a type field in every payload, which plain-SQL producers do
// not write. A second signature costs an HMAC of about a hundred bytes per
// request (an ed25519 signature with v1a keys), and leaves the body alone.
//
// For senders that are not postbox and sign the body only, HandlerConfig.Metadata
// chooses: MetadataIgnored reads no Postbox-* header, leaving the metadata
// to Process, which can take it from the signed payload (set ev.EventType
// and ev.Seq before Inbox.Process); MetadataUnsigned trusts the headers as
// they come, which gives anyone on the path the attack above, and is
// meant for paths nobody else can write to. Upgrade senders before
// receivers: a receiver with the default refuses deliveries of a relay
// that does not sign metadata yet, while an older receiver ignores the
// extra header.
//
// A receiver that is not postbox checks, for each request: the body's
// signature (id, timestamp and body in Standard; timestamp and body in
// X-Signature, plus the body's "event_id" against the id header) and the
// timestamp's tolerance; then, before acting on any Postbox-* header, the
// Postbox-Metadata-Signature over the id, the same timestamp and the
// values of Postbox-Event-Type, Postbox-Aggregate-Type, Postbox-Aggregate-Id
// and Postbox-Sequence ("" for an absent one), signed as package signature
// describes, refusing a request where it is missing or matches no key, or
// where one of those headers appears twice. In Go, signature.Verifier's
// Verify and VerifyMetadata make both checks.
// Postbox-Attempt, trace context and other headers are not signed: use
// them for logs and traces only.
//
// An allowlist sees the connection's remote address, which behind a proxy
// is the proxy's.
//
// # Ordering
//
// Events carry an optional per-aggregate sequence number (Event.Seq, from
// 1; the handler reads it from a signed Postbox-Sequence header, and Process
// functions may set it from the signed payload instead, for instance from a
// version field). An ordered event is applied only when the last applied
// number of its aggregate is Seq-1. Otherwise it is refused, with nothing
// stored, by an *OrderError matching ErrOutOfOrder, which the handler
// answers 503 with Retry-After: the sender retries it later, and its
// predecessor, delivered meanwhile, goes first. An event whose number was
// already taken by another event id is refused with ErrSequenceApplied (HTTP
// 409): a sender bug that no retry cures.
//
// Refusing is chosen over parking the early event and applying it when the
// gap fills: it needs no second queue, no worker that could fail after the
// sender was told "done", and keeps every event's fate with its sender's
// retry and dead-letter machinery. The cost is a retry per early event,
// which the relay's ordered mode (one event of an aggregate in flight at a
// time) makes rare. The last applied numbers live in their own small table,
// inbox_sequences, which retention does not touch.
//
// # External work
//
// A handler that must call something outside the database (a payment
// provider, an e-mail service) cannot roll that back. For it, Claim writes
// the event's row as pending with a lease and commits; other deliveries see
// the lease and back off with ErrInProgress (HTTP 503). The consumer does
// the work, then calls Complete (optionally with a transactional handler to
// record its result) or Fail. A claim whose lease expired is taken over by
// the next delivery, so the external effect is at least once: make it
// idempotent at its destination, keyed by the event id.
//
// # Retention
//
// Done rows are what recognises duplicates. DeleteProcessedBefore removes
// old ones in batches; keep them longer than the sender may retry an event
// (its whole backoff schedule, plus time in its dead-letter state): within
// that window every duplicate is caught. Failed and pending rows are kept.
// RunRetention does it on a schedule until its context ends, logging
// failures and going on: go ib.RunRetention(ctx, inbox.Retention{}) keeps
// done rows for RetentionKeepDefault (7 days) and deletes older ones every
// hour.
//
// # Brokers
//
// The relay also publishes to NATS JetStream, RabbitMQ and Kafka (packages
// sink/nats, sink/amqp, sink/kafka), and packages inbox/nats, inbox/amqp
// and inbox/kafka consume them into an inbox: each message is decoded
// with EventFromBroker and acknowledged by VerdictOf of its outcome, ack
// when err is nil (both Processed and Duplicate), redeliver later on
// ErrOutOfOrder, ErrInProgress and handler failures, and drop (or
// dead-letter) on ErrInvalidEvent and ErrSequenceApplied.
//
// Broker messages carry no signature: a consumer trusts the broker's own
// authentication and authorization of publishers, for the payload as for
// the Postbox-* headers it routes and orders on. Whoever may publish to the
// subject, exchange or topic can send any event, so grant that right to
// the relay alone (NATS accounts and subject permissions, RabbitMQ users
// with write permission on the exchange, Kafka ACLs on the topic) and use
// the broker's TLS. Signing only the headers of a broker message would not
// help while its body is unsigned; see the consumer packages.
//
// A consumer of events that reach a broker some other way maps each
// message to the same Process call, with the event id carried in the
// message id. With NATS JetStream:
//
//	func(msg jetstream.Msg) {
//		id, err := uuid.Parse(msg.Headers().Get(jetstream.MsgIDHeader)) // Nats-Msg-Id
//		if err != nil {
//			msg.Term()
//			return
//		}
//		_, err = ib.Process(ctx, &inbox.Event{ID: id, EventType: msg.Subject(), Payload: msg.Data()}, apply)
//		switch inbox.VerdictOf(err) {
//		case inbox.Ack:
//			msg.Ack()
//		case inbox.Discard:
//			msg.Term()
//		default:
//			msg.NakWithDelay(5 * time.Second)
//		}
//	}
//
// With Kafka, commit the offset after Process returns nil; since a
// partition is consumed in order, a refused event is retried in place
// (after a pause) rather than skipped. With RabbitMQ (AMQP 0-9-1) the id is
// the delivery's MessageId; ack with d.Ack(false) and redeliver with
// d.Nack(false, true), or route to a dead-letter exchange with
// d.Nack(false, false).
//
// # Stores
//
// Store is the interface a database implements for the inbox
// (store.Inbox), generic over its transaction type: the driver of
// store/postgres ((*postgres.Store).Driver()) implements it for pgx.Tx,
// that of store/sqlite for *sql.Tx. Every implementation passes the suite
// in postboxtest/inboxtest.
package inbox
