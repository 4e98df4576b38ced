package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// Defaults of Config. They are the fast settings: a relay needs no tuning
// to drain a backlog or to deliver a single event within milliseconds.
const (
	BatchSizeDefault        = 2000
	ConcurrencyDefault      = 64
	LeaseDefault            = 30 * time.Second
	BackoffMinDefault       = time.Second
	BackoffMaxDefault       = 10 * time.Minute
	MaxAttemptsDefault      = 25
	RejectedAttemptsDefault = 5
	PollIntervalDefault     = time.Second
	ShutdownTimeoutDefault  = 10 * time.Second
	ProbeIntervalDefault    = 5 * time.Second
	DedupWindowDefault      = 24 * time.Hour
	StreamBehindPollDefault = 3 * time.Millisecond
	// ClaimBytesDefault bounds a claim to 64 MiB of payloads: far more
	// than BatchSizeDefault events of a few kilobytes, so it does not
	// slow the common case, yet 64 MiB crosses a gigabit link in about
	// half a second, within the shortest deadline of a claim (one
	// second), and it is the most payload a relay holds at once: a few
	// large events at a time (five of 12 MB), not a claim of 2,000 of them.
	ClaimBytesDefault = 64 << 20
)

// Config configures a Relay. Only Store and Sink are required.
type Config struct {
	// Store is what the relay drains: an outbox (store.Outbox: a store's
	// driver, such as (*postgres.Store).Driver()), or a webhook endpoint's
	// lane of deliveries (store.Endpoints.EndpointLane). Required.
	Store store.Source
	// Sink publishes the events. Required.
	Sink sink.Sink
	// Logger receives structured logs (event id, aggregate, attempt,
	// status code). Default: slog.Default().
	Logger *slog.Logger
	// Owner names this relay instance in leases. Default: host, pid and a
	// random suffix.
	Owner string
	// BatchSize is the most events claimed by one statement. Default
	// BatchSizeDefault.
	BatchSize int
	// Concurrency is the most deliveries in progress at once. Default
	// ConcurrencyDefault.
	Concurrency int
	// ClaimBytes bounds the payload bytes of the events the relay holds
	// (claimed, not yet settled) at once, and so of each claim
	// (store.ClaimParams.MaxBytes): a claim asks for no more than
	// ClaimBytes less what is held, and waits until a quarter of it is
	// free. An event larger than ClaimBytes is still claimed, alone.
	// Claims are bounded by time too: after a claim that timed out, the
	// next ones ask for half as many events (down to one), growing back
	// after claims that return well in time. Default ClaimBytesDefault.
	ClaimBytes int
	// PublishBatch, when above 1, publishes the claimed events in batches
	// of up to PublishBatch through the sink's PublishBatch, which Sink
	// must then implement (sink.BatchSink; New refuses it otherwise):
	// Concurrency/PublishBatch publishers (at least one) each take the
	// events waiting, up to a batch (of at most Concurrency), and publish
	// them together. A lease
	// lost or expired during a batch cuts the whole batch short (its events
	// not yet acknowledged are released and delivered again), and each
	// attempt's reported duration is its batch's. Probes during an outage
	// are still sent alone. 0 or 1 publishes one event at a time.
	PublishBatch int
	// Lease is how long a claimed event stays reserved to this relay; the
	// relay renews it while the delivery runs, and another relay takes the
	// event over when a crashed relay's lease expires. Default LeaseDefault.
	Lease time.Duration
	// BackoffMin and BackoffMax bound the delay before a retry; the delay
	// grows exponentially with the attempt, with full jitter. Defaults
	// BackoffMinDefault and BackoffMaxDefault.
	BackoffMin time.Duration
	BackoffMax time.Duration
	// MaxAttempts is the number of attempts after which an event is failed
	// (the dead-letter state). Failures while the sink is unreachable do
	// not count (see ProbeInterval). Default MaxAttemptsDefault.
	MaxAttempts int
	// RejectedAttempts is the number of attempts allowed to an event the
	// destination rejects (an HTTP 4xx other than 410 and 429), and to an
	// event the sink is unreachable with while it takes others (a message
	// that breaks a broker's connection: see the package doc's Sink
	// outages). Default RejectedAttemptsDefault, and never more than
	// MaxAttempts.
	RejectedAttempts int
	// Ordered delivers the events of one aggregate one at a time, in the
	// order they were committed; a retried event holds back its successors.
	// Every relay on one outbox must use the same setting. The PostgreSQL
	// store needs its MigrateOrdered once for this: Run checks it (the
	// store's CheckSchema) and returns the store's error otherwise.
	Ordered bool
	// PollInterval is how often the relay looks for due events when no
	// notification wakes it (retries that became due, stores or poolers
	// without LISTEN). Default PollIntervalDefault.
	PollInterval time.Duration
	// DisableListen turns LISTEN/NOTIFY off, for connection poolers in
	// transaction mode: the relay then only polls.
	DisableListen bool
	// ShutdownTimeout is how long deliveries in flight may finish after Run's
	// context is cancelled; the rest are released to the queue (recording
	// that may take up to five more seconds). Default ShutdownTimeoutDefault.
	ShutdownTimeout time.Duration
	// ProbeInterval is the longest wait between two probes of a sink found
	// unreachable (connections refused, DNS failures, every request timing
	// out, a broker connection down: sink.Unavailable, or three timeouts
	// in a row). During such an outage the relay claims nothing but one
	// event at a time, sent alone as a probe after a wait that grows from
	// 100ms to ProbeInterval; failures count no attempt, so no event is
	// dead-lettered however long the outage lasts; the first probe that
	// reaches the sink resumes claiming at full speed. Default
	// ProbeIntervalDefault.
	ProbeInterval time.Duration
	// Observer, when set, receives every claim, delivery attempt, lease
	// renewal and reclaim, for metrics (see Observer; package observe has
	// a Prometheus one). Default nil: nothing is observed, at no cost.
	Observer Observer
	// Tracer, when set, traces every delivery attempt in a publish span
	// (kind producer), a child of the trace context in the event's
	// traceparent header (a new trace when it has none), with the
	// attributes of the OpenTelemetry messaging conventions
	// (messaging.system, messaging.operation.type "send",
	// messaging.operation.name "publish", messaging.destination.name,
	// messaging.message.id: the event id) and postbox.event_type,
	// postbox.aggregate_type, postbox.attempt, postbox.outcome and, when
	// the sink reported one, http.response.status_code. The message sent
	// carries the span's traceparent (and tracestate) in place of the
	// event's, in a copy of its headers. Destinations are named by the
	// sink's Destination. Default nil: no span, at no cost.
	//
	// Give it the tracer of a TracerProvider, such as
	// otel.Tracer("github.com/postbox-go/postbox/relay") once the SDK is
	// set up.
	Tracer trace.Tracer
	// Stream, when set, brings new events as they commit (WAL mode: the
	// PostgreSQL store's WAL, a logical replication slot): the relay
	// delivers them at once, and confirms them to the stream only once
	// their outcomes are recorded; it polls the table every PollInterval
	// for retries and for what the stream did not bring, and does not
	// listen for notifications (producers need none). Run refuses to start
	// when the stream's Check fails. Not with Ordered: events of one
	// aggregate streamed together go in commit order, but a retry does not
	// hold back its successors. Default nil: notifications and polling.
	Stream Stream
	// StreamBehindPoll is how often the relay looks for new events in the
	// table while Stream is behind (Stream.Behind, asked every 100ms: it
	// still reads older writes, such as a drain's claims and settles or a
	// bulk load elsewhere on the server): new events are then delivered
	// within milliseconds, by the polling claim, which keeps no commit
	// order within an aggregate. Zero: StreamBehindPollDefault (3ms);
	// negative: never, new events then wait for the stream or PollInterval.
	StreamBehindPoll time.Duration
	// Retention is how long delivered events are kept, marked done, before
	// they are deleted in batches. Zero (the default, and the fast setting)
	// deletes each delivered event when its delivery is recorded; negative
	// keeps them forever.
	Retention time.Duration
	// DedupWindow is how long a delivered event's dedup_key stays refused
	// after delivery (store.SettleParams.DedupWindow): a producer that
	// writes the same key again meanwhile gets the duplicate-key error,
	// whatever the Retention. Zero: DedupWindowDefault (24h); negative:
	// not kept once the row is gone (the behaviour before).
	DedupWindow time.Duration
	// Archive, when set, is handed delivered events before retention
	// removes them (store.ExpireParams.Keep; package archive's
	// (*Archive).Keep): none is removed until it returned nil for it. It
	// needs a positive Retention: with none, delivered events are deleted
	// when delivered (zero) or never (negative).
	Archive func(ctx context.Context, events []store.HistoryEvent) error
}

// withDefaults fills the zero fields and validates the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Store == nil {
		return c, errors.New("relay: Config.Store is required")
	}
	if c.Sink == nil {
		return c, errors.New("relay: Config.Sink is required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Owner == "" {
		c.Owner = defaultOwner()
	}
	setDefault(&c.BatchSize, BatchSizeDefault)
	setDefault(&c.Concurrency, ConcurrencyDefault)
	setDefault(&c.ClaimBytes, ClaimBytesDefault)
	setDefault(&c.Lease, LeaseDefault)
	setDefault(&c.BackoffMin, BackoffMinDefault)
	setDefault(&c.BackoffMax, BackoffMaxDefault)
	setDefault(&c.MaxAttempts, MaxAttemptsDefault)
	setDefault(&c.RejectedAttempts, RejectedAttemptsDefault)
	setDefault(&c.PollInterval, PollIntervalDefault)
	setDefault(&c.ShutdownTimeout, ShutdownTimeoutDefault)
	setDefault(&c.ProbeInterval, ProbeIntervalDefault)
	setDefault(&c.DedupWindow, DedupWindowDefault)
	setDefault(&c.StreamBehindPoll, StreamBehindPollDefault)
	c.RejectedAttempts = min(c.RejectedAttempts, c.MaxAttempts)
	c.PublishBatch = min(c.PublishBatch, c.Concurrency)

	switch {
	case c.Archive != nil && c.Retention <= 0:
		return c, errors.New("relay: Config.Archive needs a positive Config.Retention (delivered events are otherwise deleted when delivered, or never)")
	case c.Stream != nil && c.Ordered:
		return c, errors.New("relay: Config.Stream (WAL mode) does not deliver in order (Config.Ordered) yet")
	case c.BatchSize < 0:
		return c, fmt.Errorf("relay: Config.BatchSize %d is negative", c.BatchSize)
	case c.Concurrency < 0:
		return c, fmt.Errorf("relay: Config.Concurrency %d is negative", c.Concurrency)
	case c.ClaimBytes < 0:
		return c, fmt.Errorf("relay: Config.ClaimBytes %d is negative", c.ClaimBytes)
	case c.PublishBatch < 0:
		return c, fmt.Errorf("relay: Config.PublishBatch %d is negative", c.PublishBatch)
	case c.PublishBatch > 1 && !isBatchSink(c.Sink):
		return c, fmt.Errorf("relay: Config.PublishBatch %d: the sink does not publish batches (it is no sink.BatchSink): %s", c.PublishBatch, c.Sink)
	case c.Lease < 100*time.Millisecond:
		return c, fmt.Errorf("relay: Config.Lease %v is shorter than 100ms", c.Lease)
	case c.BackoffMin < 0:
		return c, fmt.Errorf("relay: Config.BackoffMin %v is negative", c.BackoffMin)
	case c.BackoffMax < c.BackoffMin:
		return c, fmt.Errorf("relay: Config.BackoffMax %v is below BackoffMin %v", c.BackoffMax, c.BackoffMin)
	case c.MaxAttempts < 0:
		return c, fmt.Errorf("relay: Config.MaxAttempts %d is negative", c.MaxAttempts)
	case c.PollInterval < 0:
		return c, fmt.Errorf("relay: Config.PollInterval %v is negative", c.PollInterval)
	case c.ShutdownTimeout < 0:
		return c, fmt.Errorf("relay: Config.ShutdownTimeout %v is negative", c.ShutdownTimeout)
	case c.ProbeInterval < 0:
		return c, fmt.Errorf("relay: Config.ProbeInterval %v is negative", c.ProbeInterval)
	}
	return c, nil
}

func setDefault[T int | time.Duration](field *T, def T) {
	if *field == 0 {
		*field = def
	}
}

func defaultOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}
