// Package presence keeps a relay's row in the presence table of its store
// (store.Presence) current, so that tools reading only the database
// (postbox status) can say which relays are alive and whether they find
// their sink down.
//
// A Heartbeat writes the row when it starts, renews it every Config.Every
// with the relay's state (read from Relay.Stats: the outage of the sink
// under way, its error, whether the relay listens or polls), and deletes
// it when it stops (Leave deletes it earlier, for a process that must exit
// at once); a relay that crashed leaves a row that grows stale
// (store.RelayPresence.Stale), which the heartbeats of the relays running
// prune once it is Config.PruneAfter old (5 minutes), checking every
// Config.PruneEvery (30 seconds): PrunedIn says when a stale row goes. As
// the relay's Observer (compose it with others through relay.Observers),
// it also writes the row at once when the sink goes down or comes back,
// rather than at the next beat.
//
// Every write has its own timeout; a write that fails is logged (at most
// once a minute while they keep failing) and never stops the relay.
package presence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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
	// PruneAfterDefault is Config.PruneAfter when zero: long enough past
	// a row's going stale (store.PresenceStaleBeats heartbeats) that a
	// relay cut off from the database for a while keeps its row.
	PruneAfterDefault = 5 * time.Minute
	// PruneEveryDefault is Config.PruneEvery when zero.
	PruneEveryDefault = 30 * time.Second
	// EveryMax is the longest Config.Every with the default PruneAfter: a
	// live row goes stale after store.PresenceStaleBeats heartbeats and
	// must not be prunable before twice that.
	EveryMax = PruneAfterDefault / (2 * store.PresenceStaleBeats)
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

// Config configures a Heartbeat.
type Config struct {
	// Store holds the presence table: a store's driver, such as
	// (*postgres.Store).Driver(). Required.
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
	// PruneEvery is how often the rows are pruned, at the start and then
	// at the first beat past each PruneEvery (PruneEveryDefault when
	// zero).
	PruneEvery time.Duration
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
	// wrote is set once a write of the row succeeded: until then failing
	// to delete it at the stop is not worth a warning.
	wrote atomic.Bool
	// writing is held by each write of the row (a buffered channel of
	// one, so that taking it can give up): Leave waits for the write
	// under way, so that no beat lands after its delete.
	writing chan struct{}
	// left is set by Leave: no beat writes the row after it.
	left atomic.Bool

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
	case cfg.Every < 0 || cfg.Timeout < 0 || cfg.PruneAfter < 0 || cfg.PruneEvery < 0:
		return nil, errors.New("presence: Config.Every, Timeout, PruneAfter and PruneEvery must not be negative")
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
	if cfg.PruneEvery == 0 {
		cfg.PruneEvery = PruneEveryDefault
	}
	// A live row must never look old enough to prune: it goes stale after
	// store.PresenceStaleBeats heartbeats, and is pruned at twice that at
	// the earliest.
	if limit := cfg.PruneAfter / (2 * store.PresenceStaleBeats); cfg.Every > limit {
		return nil, fmt.Errorf("presence: Config.Every %v is over %v: the other relays prune a row once it is %v old", cfg.Every, limit, cfg.PruneAfter)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	host, _ := os.Hostname()
	return &Heartbeat{cfg: cfg, host: host, pid: os.Getpid(), wake: make(chan struct{}, 1), writing: make(chan struct{}, 1)}, nil
}

// PrunedIn says how long a stale row p may stay: the running relays with
// the default Config prune it once its heartbeat is PruneAfterDefault
// old, at their next prune (at most PruneEveryDefault later). Zero: at
// the next prune of a running relay.
func PrunedIn(p store.RelayPresence) time.Duration {
	return max(PruneAfterDefault+PruneEveryDefault-p.HeartbeatAge, 0)
}

// Run writes r's row at once, renews it every Config.Every (and whenever
// the sink's state changes) with r's Stats, prunes the rows of relays gone
// for Config.PruneAfter, and deletes r's row when ctx is done, then
// returns. Start it before the relay's Run and stop it after Run returned.
// Run it once.
func (h *Heartbeat) Run(ctx context.Context, r Relay) {
	h.mu.Lock()
	h.id = r.Owner()
	h.mu.Unlock()
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
			h.Leave(context.WithoutCancel(ctx))
			return
		case <-tick.C:
			tick.Reset(h.cfg.Every)
		case <-h.wake:
		}
		h.beat(ctx, stats())
		if time.Since(lastPrune) >= h.cfg.PruneEvery {
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
	p := store.RelayPresence{ID: h.relayID(), Host: h.host, PID: h.pid, Mode: h.cfg.Mode, Sink: h.cfg.Sink,
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

// relayID is the relay's name, once Run has started.
func (h *Heartbeat) relayID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.id
}

func (h *Heartbeat) beat(ctx context.Context, stats relay.Stats) {
	callCtx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	select {
	case h.writing <- struct{}{}:
	case <-callCtx.Done():
		return
	}
	var err error
	if !h.left.Load() {
		err = h.cfg.Store.PresenceBeat(callCtx, h.row(stats))
	}
	<-h.writing
	if err == nil {
		h.wrote.Store(true)
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

// Leave deletes the relay's row, within Config.Timeout or ctx, whichever
// ends first, once the write under way (if any) is done; the row is not
// written again. Run calls it when it stops; a process that must exit
// before Run returns (a second signal) calls it first.
func (h *Heartbeat) Leave(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	h.left.Store(true)
	wait := time.NewTimer(h.cfg.Timeout / 2)
	defer wait.Stop()
	select {
	case h.writing <- struct{}{}:
		defer func() { <-h.writing }()
	case <-wait.C:
		// The write under way did not end in half the time: delete
		// all the same (it may land after; the row is pruned then).
	case <-ctx.Done():
	}
	id := h.relayID()
	if id == "" {
		return // Run has not started: no row was written
	}
	err := h.cfg.Store.PresenceLeave(ctx, id)
	if err != nil && !h.wrote.Load() {
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
