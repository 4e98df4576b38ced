package store

import (
	"context"
	"time"
)

// RelayPresence is one running relay process, as its row in the presence
// table (relay_presence) says: the relay writes it at start, renews it
// every heartbeat with the state of its sink, and deletes it when it stops
// cleanly (package relay/presence). Status tools read it: a relay that
// crashed leaves a row whose heartbeat grows old (Stale).
type RelayPresence struct {
	// ID names the relay: the owner name of its leases (ClaimParams.Owner).
	ID string
	// Host and PID are where the relay process runs.
	Host string
	PID  int
	// Mode is how the relay finds events: "listening", "polling", "wal"
	// or "endpoints".
	Mode string
	// Sink describes where the relay delivers, without credentials: a
	// scheme and a host, and what names the destination when it is not
	// secret (a NATS subject, a RabbitMQ exchange, a Kafka topic).
	Sink string
	// Version is the relay's version.
	Version string
	// StartedAt is when the row was written first; HeartbeatAt when it was
	// renewed last, by the store's clock (the database server's on
	// PostgreSQL).
	StartedAt   time.Time
	HeartbeatAt time.Time
	// HeartbeatEvery is how often the relay renews its row.
	HeartbeatEvery time.Duration
	// SinkDownSince is when the relay found its sink unreachable (an outage
	// under way); zero while the sink is reachable.
	SinkDownSince time.Time
	// SinkError is the error that began the relay's last outage of the
	// sink (kept after it ended), short and without secrets; empty when it
	// had none.
	SinkError string
	// HeartbeatAge is how long ago HeartbeatAt was, by the store's clock,
	// when RelayPresences read the row (not written).
	HeartbeatAge time.Duration
}

// PresenceStaleBeats is how many heartbeats a relay may miss before its
// row is stale (Stale): it crashed, hangs, or cannot reach the database.
const PresenceStaleBeats = 3

// PresenceErrorMax bounds the bytes of RelayPresence.SinkError a store
// keeps.
const PresenceErrorMax = 300

// Stale reports whether the relay has missed PresenceStaleBeats heartbeats:
// what its row says may no longer hold.
func (p RelayPresence) Stale() bool {
	return p.HeartbeatAge > PresenceStaleBeats*p.HeartbeatEvery
}

// SinkDown reports whether the relay found its sink unreachable at its
// last heartbeat.
func (p RelayPresence) SinkDown() bool { return !p.SinkDownSince.IsZero() }

// PresenceReader reads the presence table: what status tools call.
type PresenceReader interface {
	// RelayPresences returns every row of the presence table, the relay
	// started first first, with its HeartbeatAge.
	RelayPresences(ctx context.Context) ([]RelayPresence, error)
}

// Presence is the presence table of the relays: one row per running relay
// process, written by the relay (package relay/presence), read by status
// tools. The drivers of the stores ((*postgres.Store).Driver(),
// (*sqlite.Store).Driver()) are Presences, the stores themselves
// PresenceReaders; postboxtest/storetest's Exercise holds them to the
// contract.
type Presence interface {
	PresenceReader
	// PresenceBeat writes p's row, keyed by p.ID: it inserts it (StartedAt
	// now) or updates every field but StartedAt, and sets HeartbeatAt to
	// now, by the store's clock. StartedAt, HeartbeatAt and HeartbeatAge of
	// p are ignored. SinkError is stored cleaned (CleanErrorText) and cut
	// to PresenceErrorMax bytes.
	PresenceBeat(ctx context.Context, p RelayPresence) error
	// PresenceLeave deletes the row of relay id; a row that is not there
	// is no error.
	PresenceLeave(ctx context.Context, id string) error
	// PresencePrune deletes the rows whose heartbeat is older than age
	// (relays that crashed long ago) and reports how many it deleted.
	PresencePrune(ctx context.Context, age time.Duration) (int, error)
}
