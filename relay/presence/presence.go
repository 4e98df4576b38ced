// Package presence keeps a relay's row in the presence table of its store
// (store.Presence) current, so that tools reading only the database
// (postbox status) can say which relays are alive and whether they find
// their sink down.
//
// A Heartbeat writes the row when it starts, renews it every Config.Every
// with the relay's state (read from Relay.Stats: the outage of the sink
// under way, its error, whether the relay listens or polls), and deletes
// it when it stops; a relay that crashed leaves a row that grows stale
// (store.RelayPresence.Stale), which the heartbeats of other relays prune
// after Config.PruneAfter. As the relay's Observer (compose it with others
// through relay.Observers), it also writes the row at once when the sink
// goes down or comes back, rather than at the next beat.
//
// Every write has its own timeout; a write that fails is logged (at most
// once a minute while they keep failing) and never stops the relay.
package presence

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store"
)

// Defaults of Config.
const (
	// EveryDefault is Config.Every when zero.
	EveryDefault = 5 * time.Second
	// TimeoutDefault is Config.Timeout when zero (never more than Every).
	TimeoutDefault = 5 * time.Second
	// PruneAfterDefault is Config.PruneAfter when zero.
	PruneAfterDefault = 24 * time.Hour
)

// Modes of a relay, as its row says.
const (
	ModeListening = "listening"
	ModePolling   = "polling"
	ModeWAL       = "wal"
	ModeEndpoints = "endpoints"
)

// failureLogEvery is how often failed writes are logged while they keep
// failing.
const failureLogEvery = time.Minute

// pruneEvery is how often a heartbeat prunes the rows of relays long gone.
const pruneEvery = time.Hour

// Config configures a Heartbeat.
type Config struct {
	// Store holds the presence table. Required.
	Store store.Presence
	// Sink describes the relay's sink without credentials (a scheme and a
	// host); it is written as given.
	Sink string
	// Mode is ModeWAL or ModeEndpoints for a relay in those modes; empty:
	// ModeListening or ModePolling, as the relay's Stats say at each beat.
	Mode string
	// Version is the relay's version.
	Version string
	// Secrets are texts that must never reach the table (a sink's
	// password, its URL's query): a sink error holding one is written
	// with "…" in its place.
	Secrets []string
	// Every is how often the row is renewed (EveryDefault when zero).
	Every time.Duration
	// Timeout bounds each statement (TimeoutDefault when zero, at most
	// Every).
	Timeout time.Duration
	// PruneAfter is how old a heartbeat must be for its row to be pruned
	// (PruneAfterDefault when zero).
	PruneAfter time.Duration
	// Logger receives the failed writes (slog.Default() when nil).
	Logger *slog.Logger
}

// Relay is what a Heartbeat reads of its relay; *relay.Relay is one.
type Relay interface {
	// Owner names the relay: the owner name of its leases, the row's id.
	Owner() string
	// Stats are the relay's state, read at every beat.
	Stats() relay.Stats
}

// Heartbeat keeps one relay's row current. It is the relay's Observer for
// the changes of its sink's state; Run writes the row.
type Heartbeat struct {
	cfg  Config
	host string
	pid  int
	// id is the relay's name, set by Run.
	id string
	// wake asks Run to write the row at once (the sink's state changed).
	wake chan struct{}
	// wrote is set, in Run, once a write of the row succeeded: until
	// then failing to delete it at the stop is not worth a warning.
	wrote bool

	mu         sync.Mutex
	failing    bool
	lastLogged time.Time
	// sinkError is the error that began the last outage seen.
	sinkError string
}

var _ relay.Observer = (*Heartbeat)(nil)

// New validates cfg, fills its defaults and returns a Heartbeat.
func New(cfg Config) (*Heartbeat, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("presence: Config.Store is required")
	case cfg.Every < 0 || cfg.Timeout < 0 || cfg.PruneAfter < 0:
		return nil, errors.New("presence: Config.Every, Timeout and PruneAfter must not be negative")
	}
	if cfg.Every == 0 {
		cfg.Every = EveryDefault
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = TimeoutDefault
	}
	cfg.Timeout = min(cfg.Timeout, cfg.Every)
	if cfg.PruneAfter == 0 {
		cfg.PruneAfter = PruneAfterDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	host, _ := os.Hostname()
	return &Heartbeat{cfg: cfg, host: host, pid: os.Getpid(), wake: make(chan struct{}, 1)}, nil
}

// Run writes r's row at once, renews it every Config.Every (and whenever
// the sink's state changes) with r's Stats, prunes the rows of relays gone
// for Config.PruneAfter, and deletes r's row when ctx is done, then
// returns. Start it before the relay's Run and stop it after Run returned.
// Run it once.
func (h *Heartbeat) Run(ctx context.Context, r Relay) {
	h.id = r.Owner()
	stats := r.Stats
	h.beat(ctx, stats())
	h.prune(ctx)
	// The relay starts listening shortly after it starts: say so soon.
	tick := time.NewTimer(min(time.Second, h.cfg.Every))
	defer tick.Stop()
	lastPrune := time.Now()
	for {
		select {
		case <-ctx.Done():
			h.leave(context.WithoutCancel(ctx))
			return
		case <-tick.C:
			tick.Reset(h.cfg.Every)
		case <-h.wake:
		}
		h.beat(ctx, stats())
		if time.Since(lastPrune) >= pruneEvery {
			h.prune(ctx)
			lastPrune = time.Now()
		}
	}
}

// row is the row that stats, the relay's state, make; it keeps the error
// of the last outage after it ended.
func (h *Heartbeat) row(stats relay.Stats) store.RelayPresence {
	h.mu.Lock()
	if stats.SinkError != "" {
		h.sinkError = h.redact(stats.SinkError)
	}
	sinkError := h.sinkError
	h.mu.Unlock()
	p := store.RelayPresence{ID: h.id, Host: h.host, PID: h.pid, Mode: h.cfg.Mode, Sink: h.cfg.Sink,
		Version: h.cfg.Version, HeartbeatEvery: h.cfg.Every, SinkError: sinkError}
	if stats.SinkDown {
		p.SinkDownSince = stats.SinkDownSince
		if p.SinkDownSince.IsZero() {
			p.SinkDownSince = time.Now()
		}
	}
	if p.Mode == "" {
		p.Mode = ModePolling
		if stats.Listening {
			p.Mode = ModeListening
		}
	}
	return p
}

// redact replaces every secret in text.
func (h *Heartbeat) redact(text string) string {
	for _, s := range h.cfg.Secrets {
		if s != "" {
			text = strings.ReplaceAll(text, s, "…")
		}
	}
	return text
}

func (h *Heartbeat) beat(ctx context.Context, stats relay.Stats) {
	callCtx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	err := h.cfg.Store.PresenceBeat(callCtx, h.row(stats))
	if err == nil {
		h.wrote = true
	}
	if ctx.Err() != nil {
		return // the relay stops (or could not start): leave says the rest
	}
	h.result("write the relay's presence", err)
}

func (h *Heartbeat) prune(ctx context.Context) {
	callCtx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	n, err := h.cfg.Store.PresencePrune(callCtx, h.cfg.PruneAfter)
	if ctx.Err() != nil {
		return // the relay stops (or could not start)
	}
	h.result("prune the presence of relays gone", err)
	if n > 0 {
		h.cfg.Logger.Info("pruned the presence of relays gone", "relays", n, "silent_for", h.cfg.PruneAfter)
	}
}

func (h *Heartbeat) leave(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	err := h.cfg.Store.PresenceLeave(ctx, h.id)
	if err != nil && !h.wrote {
		// No write of the row succeeded (one may have committed all
		// the same, hence the delete): the relay stopped before its
		// first write, or could not start, and says why itself.
		return
	}
	h.result("delete the relay's presence", err)
}

// result logs a failed write, at most once per failureLogEvery while they
// keep failing, and the first success after failures.
func (h *Heartbeat) result(what string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		if h.failing {
			h.failing = false
			h.cfg.Logger.Info("relay presence written again")
		}
		return
	}
	now := time.Now()
	if h.failing && now.Sub(h.lastLogged) < failureLogEvery {
		return
	}
	h.failing, h.lastLogged = true, now
	h.cfg.Logger.Warn("cannot "+what+" (postbox status may show this relay stale; deliveries go on)", "error", err)
}

// SinkState writes the row at once, saying the sink's new state.
func (h *Heartbeat) SinkState(bool) {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Claimed does nothing: the row does not count claims.
func (h *Heartbeat) Claimed(int, time.Duration, error) {}

// Attempted does nothing: the row does not count attempts.
func (h *Heartbeat) Attempted(relay.Attempt) {}

// LeasesRenewed does nothing: the row does not count leases.
func (h *Heartbeat) LeasesRenewed(int, int, error) {}

// Reclaimed does nothing: the row does not count reclaims.
func (h *Heartbeat) Reclaimed(int) {}

// SinkProbed does nothing: the row does not count probes.
func (h *Heartbeat) SinkProbed() {}
