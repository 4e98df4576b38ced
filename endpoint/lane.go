package endpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// lane is one enabled endpoint's relay, draining the endpoint's deliveries
// (store.Endpoints.EndpointLane) through its sink chain.
type lane struct {
	e store.Endpoint
	// key is what the lane was built from (settingsKey): when it changes,
	// the lane is built again.
	key   string
	relay *relay.Relay
	// wake wakes the relay's claim loop (wakeSource.Listen).
	wake chan struct{}
	// cancel stops the relay; stopping is set (under Supervisor.mu) once
	// it was called.
	cancel   context.CancelFunc
	stopping bool
	// own is the endpoint's own sink (OpenSink), closed once the lane
	// ended (close).
	own sink.Sink
	// pace and slots are what the fan-out's offers need (see direct.go):
	// how long the endpoint's attempts take, and one token per delivery
	// the endpoint takes at once (its concurrency), held by each of its
	// deliveries, offered or claimed (slotted).
	pace  directPace
	slots chan struct{}
}

// close closes the lane's own sink once no delivery is in flight through
// it (an offer of the fan-out may outlive the lane's relay by one attempt),
// or once wait ended: it takes every slot of the endpoint, and keeps them
// (the lane is over; the fan-out offers it nothing more).
func (l *lane) close(wait time.Duration) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
take:
	for range cap(l.slots) {
		select {
		case l.slots <- struct{}{}:
		case <-timer.C:
			break take
		}
	}
	if c, ok := l.own.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// poke wakes the lane's relay, if it waits.
func (l *lane) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// settingsKey is what a lane is built from at now: the endpoint's URL,
// secrets, clear or sealed (a rotation's grace period that ended changes
// them), envelope, signature profile, rate, concurrency, shadow and
// allow-private settings. Its filter is the fan-out's.
func settingsKey(e store.Endpoint, now time.Time) string {
	sealed := sha256.Sum256(e.Sealed.Data)
	grace := now.Before(e.PreviousSecretUntil)
	return fmt.Sprint(e.URL, "|", strings.Join(e.Secrets(now), " "), "|", hex.EncodeToString(sealed[:8]), "|", grace,
		"|", e.Envelope, "|", e.Signature, "|", e.RatePerSecond, "|", e.Concurrency, "|", e.Shadow, "|", e.AllowPrivate)
}

// wakeSource is an endpoint's lane as its relay sees it: the store's, but
// for Listen, which is the supervisor's wake-ups (the fan-out's, and its
// due-poll's), and Settle, which keeps delivered deliveries only with
// SupervisorConfig.KeepDelivered (the lane's relay would keep them whenever it
// purges, and it purges for the attempts log).
type wakeSource struct {
	store.Source
	wake          <-chan struct{}
	keepDelivered bool
}

func (w wakeSource) Settle(ctx context.Context, p store.SettleParams) error {
	p.KeepDone = w.keepDelivered
	return w.Source.Settle(ctx, p)
}

// wakeChannel is how a lane's relay names its wake-ups (Stats.Channel).
const wakeChannel = "endpoint wake-ups"

func (w wakeSource) Listen(ctx context.Context, ready func(store.Listening), notify func()) error {
	ready(store.Listening{Channel: wakeChannel})
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
			notify()
		}
	}
}

// laneLogger is the logger of e's lane and sink: the relay's, with the
// endpoint; a shadow endpoint's logs at info level at most.
func (s *Supervisor) laneLogger(e store.Endpoint) *slog.Logger {
	log := s.cfg.Relay.Logger.With("endpoint", e.ID, "endpoint_name", e.Name)
	if e.Shadow {
		// A shadow endpoint never alerts: its lane logs at info level at
		// most (a delivery that used its attempts is dropped).
		log = slog.New(quietHandler{log.Handler()}).With("shadow", true)
	}
	return log
}

// sinkConfig is what OpenSink builds the endpoints' own sinks from, log
// receiving their lines.
func (s *Supervisor) sinkConfig(log *slog.Logger) SinkConfig {
	return SinkConfig{Webhook: s.cfg.Webhook, Client: s.cfg.Client, Kinds: s.cfg.Kinds, Logger: log, Keyring: s.cfg.Keyring}
}

// newLane builds the lane of e at now around own, the endpoint's sink
// (OpenSink), which the lane closes once it ended: its sink chain and its
// relay.
func (s *Supervisor) newLane(e store.Endpoint, now time.Time, own sink.Sink, log *slog.Logger) (*lane, error) {
	src := s.cfg.Store.EndpointLane(e)
	if src == nil {
		return nil, errors.New("the store returned no lane for the endpoint (store.Endpoints.EndpointLane)")
	}
	l := &lane{e: e, key: settingsKey(e, now), wake: make(chan struct{}, 1), own: own,
		slots: make(chan struct{}, max(e.Concurrency, 1))}
	h := &health{s: s, e: e, log: log, stop: func() { s.stopLane(l) }, failingSince: e.FailingSince}
	var chain sink.Sink = &attemptLog{next: own, endpoint: e.ID, log: s.attempts, health: h, pace: &l.pace}
	if e.RatePerSecond > 0 {
		chain = &rateLimited{next: chain, bucket: newTokenBucket(e.RatePerSecond)}
	}
	b := &breaker{threshold: s.cfg.BreakerFailures, pauseMin: s.cfg.BreakerPauseMin, pauseMax: s.cfg.BreakerPauseMax}
	rec := &breakerRecord{store: s.cfg.Store, id: e.ID, b: b, log: log}
	chain = &breakerSink{
		next: chain,
		b:    b,
		opened: func(pause time.Duration, cause error) {
			s.breakerOpened.Add(1)
			log.Warn(fmt.Sprintf("endpoint breaker open after %d failed attempts in a row: deliveries paused, then probed with one event at a time; no attempt counts meanwhile",
				s.cfg.BreakerFailures), "pause", pause, "last_error", cause)
		},
		closed:  func() { log.Info("endpoint breaker closed: the probe was delivered") },
		changed: rec.write,
	}
	chain = &slotted{next: chain, slots: l.slots}
	rc := s.cfg.Relay
	rc.Store = wakeSource{Source: src, wake: l.wake, keepDelivered: s.cfg.KeepDelivered}
	rc.Sink = chain
	rc.Owner = s.cfg.Relay.Owner + " endpoint " + e.ID.String()
	rc.Concurrency = e.Concurrency
	rc.Observer = nil
	if s.cfg.Observer != nil {
		rc.Observer = s.cfg.Observer(e)
	}
	rc.Retention = s.cfg.Retention
	rc.DedupWindow = -1
	rc.PollInterval = lanePollInterval
	rc.Stream = nil
	rc.DisableListen = false // the wake-ups are in-process: no pooler in the way
	rc.Logger = log
	r, err := relay.New(rc)
	if err != nil {
		return nil, err
	}
	l.relay = r
	if !e.BreakerOpenUntil.IsZero() {
		// A breaker the store says open is a previous lane's, left by a
		// relay that stopped or a lane that restarted: this lane's starts
		// closed. Written aside, as s.mu is held (the fan-out's offers
		// wait for it); a change of this lane's breaker meanwhile is
		// written after, as its state then (breakerRecord.mu).
		go rec.write()
	}
	return l, nil
}
