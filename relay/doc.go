// Package relay drains an outbox into a sink: it claims committed events in
// batches under a lease, publishes them concurrently, and settles the
// outcomes in batched statements, with exponential backoff, a dead-letter
// state, lease renewal and reclaiming, optional per-aggregate order and a
// graceful shutdown.
//
// Create a relay with New from a Config (only Store and Sink are
// required) and call Run: it delivers until its context is cancelled, then
// stops gracefully. Several relays, in one process or many, may drain one
// outbox. Ready and Stats tell, from any goroutine, whether a relay
// delivers and what it did: for a health check and metrics.
//
// # The pipeline
//
// Per relay instance:
//
//	claim ──► work queue ──► Concurrency publishers ──► settler
//	  ▲  (LISTEN/NOTIFY or poll)                          │
//	  └──────────── free slots ◄──────────────────────────┘
//
// The claim is one short statement; no transaction or row lock is held
// while a publisher waits on the network. Up to BatchSize + Concurrency
// events, and about ClaimBytes of payload, are in flight, so the next batch
// is claimed while the current one is being delivered; a claim that timed
// out is followed by smaller ones. A claim that fills its batch is followed by another
// at once, one that finds fewer events by another a moment later; after
// claims that find nothing the relay dozes: producers notify it from then
// on (where the store offers a store.Dozer), and it waits for a
// notification, a retry of its own falling due, or the poll. Beside the
// pipeline, background loops renew the leases of the events in flight,
// return the events of relays whose lease expired to the queue, and delete
// delivered events after the retention.
//
// # Sink outages
//
// A sink that cannot be reached at all (sink.Unavailable: connections
// refused, a DNS failure, a broker connection down; or three timeouts in a
// row) is an outage, not a failure of each event: the relay stops claiming,
// gives back what it holds without counting an attempt, and probes the
// sink with one event at a time, at most Config.ProbeInterval apart, until
// one gets through; then it claims at full speed again. No event is
// dead-lettered for an outage however long it lasts; answers about one
// event (a 4xx, a 5xx) count as before. One event cannot pass for an
// outage that never ends: a probe is never the event whose requests timed
// out, nor, while another can be taken, the one a gateway answered; and
// after three probes in a row that found the sink unreachable with one
// event, the next probe is another: if that one gets through, the first
// event's failures count as rejections (Config.RejectedAttempts) from then
// on, and it ends failed. SinkAvailable and Stats say whether
// the sink is down; the Observer hears of each outage and probe.
//
// # One row cannot hold the others
//
// A row the store could not read as an event (store.ClaimedEvent.Invalid)
// fails at once, unsent, with the store's reason in its last_error; an
// event the sink refuses fails alone after its attempts; and what the
// relay logs of producers' and receivers' text (types, aggregates, errors)
// is capped and has its control characters escaped.
//
// # Files
//
// (TestDocIndexesEveryFile checks that this index names every file.)
//
//	doc.go        this overview
//	relay.go      Relay, New, Run: starting the pipeline, and the graceful shutdown
//	config.go     Config, its defaults and their validation
//	claim.go      the claim loop, its waits and its wake-ups
//	claimsize.go  how many events a claim asks for: shrinking after a timeout
//	cursor.go     where a claim starts while a backlog drains
//	pace.go       how long deliveries take, which bounds the events claimed ahead
//	doze.go       the doze protocol: the claim loop's side of store.Dozer
//	listen.go     listening for notifications, and polling when that fails
//	wal.go        WAL mode: delivering what a Stream brings, in commit order
//	deliver.go    the publishers: one delivery, and what becomes of its event
//	batch.go      publishing in batches (Config.PublishBatch)
//	cut.go        cutting a delivery short when its lease is lost or expires
//	outage.go     telling an outage of the sink from a failed event, and probing
//	culprits.go   the events the sink is unreachable with, alone
//	backoff.go    exponential backoff with full jitter, and Retry-After
//	settle.go     the settler: outcomes recorded in batched statements
//	offer.go      Offer: delivering an event the store does not hold, without settling it
//	retries.go    when the retries this relay scheduled fall due
//	lease.go      the events in flight with their local lease deadlines,
//	              lease renewal, and reclaiming expired leases
//	timeouts.go   the deadlines of the relay's store calls
//	retention.go  deleting delivered events after the retention
//	stats.go      Stats, Ready and SinkAvailable
//	observer.go   Observer: claims, attempts, leases and outages, for metrics
//	trace.go      the publish spans (Config.Tracer)
//	logtext.go    producer- and receiver-written text as the relay logs it
package relay
