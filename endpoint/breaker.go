package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// breakerSink is the sink middleware of an endpoint's circuit breaker.
// Closed, every publish goes through. After threshold failed attempts in a
// row it opens: a publish returns at once an error that sink.Classify
// reports as sink.Unavailable, so the lane's relay takes the endpoint for
// unreachable (it probes it with one event at a time and counts no
// attempt) until the pause ends; then one probe goes through. A probe that
// succeeds closes the breaker; one that fails opens it again for twice the
// pause (up to pauseMax), and is returned as sink.Unavailable too, so that
// the relay keeps probing instead of claiming at full speed.
type breakerSink struct {
	next sink.Sink
	b    *breaker
	// opened and closed are told when the breaker opens (with the pause
	// and the failure that opened it) and closes; changed, after them, at
	// every change: those and each opening again after a failed probe.
	opened  func(pause time.Duration, cause error)
	closed  func()
	changed func()
}

func (s *breakerSink) Publish(ctx context.Context, m *sink.Message) error {
	probe, refusal := s.b.admit(time.Now())
	if refusal != nil {
		return refusal
	}
	err := s.next.Publish(ctx, m)
	if err != nil && ctx.Err() != nil {
		// Cut short (shutdown, lease lost): nothing said of the endpoint.
		if probe {
			s.b.abandon()
		}
		return err
	}
	if kind, _, code := sink.Classify(err); err != nil && (kind == sink.Permanent || kind == sink.Rejected) {
		// About this event, not the endpoint failing: a 4xx or a 410 (the
		// endpoint answered: a run of failures ends, as after a success),
		// or a refusal before any request (the SSRF guard, an event the
		// sink cannot send), which says nothing of the endpoint. Either
		// way the relay gets the error as it is, to fail or reject the
		// event, not an outage to probe.
		if code == 0 {
			if probe {
				s.b.abandon()
			}
			return err
		}
		if change, _ := s.b.record(nil, probe, time.Now()); change == breakerClosed {
			s.closed()
			s.changed()
		}
		return err
	}
	change, pause := s.b.record(err, probe, time.Now())
	switch change {
	case breakerOpened:
		s.opened(pause, err)
	case breakerClosed:
		s.closed()
	}
	if change != breakerKept {
		s.changed()
	}
	if probe && err != nil {
		return &sink.Error{Kind: sink.Unavailable, Err: fmt.Errorf("endpoint breaker open: the probe failed (next one in %v): %w", pause, err)}
	}
	return err
}

func (s *breakerSink) String() string {
	return fmt.Sprintf("%s, breaker after %d failures in a row", s.next.String(), s.b.threshold)
}

func (s *breakerSink) Destination() sink.Destination { return s.next.Destination() }

// breaker is one endpoint's circuit breaker (see breakerSink).
type breaker struct {
	threshold          int
	pauseMin, pauseMax time.Duration

	mu        sync.Mutex
	failures  int
	opens     int
	open      bool
	openUntil time.Time
	probing   bool
	// cause is the text of the failure that last opened the breaker.
	cause string
}

// admit says whether a publish may go at now, and whether it is the probe
// of an open breaker; when it may not, refusal is the sink.Unavailable
// error to return.
func (b *breaker) admit(now time.Time) (probe bool, refusal error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.open:
		return false, nil
	case now.Before(b.openUntil):
		return false, &sink.Error{Kind: sink.Unavailable, Err: fmt.Errorf("endpoint breaker open after %d failed attempts in a row (last: %s); next probe in %v",
			b.failures, b.cause, b.openUntil.Sub(now).Round(time.Millisecond))}
	case b.probing:
		return false, &sink.Error{Kind: sink.Unavailable, Err: fmt.Errorf("endpoint breaker open after %d failed attempts in a row (last: %s); a probe is under way",
			b.failures, b.cause)}
	}
	b.probing = true
	return true, nil
}

// until is when the breaker lets its next probe through; zero when it is
// closed.
func (b *breaker) until() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return time.Time{}
	}
	return b.openUntil
}

// abandon ends a probe that was cut short.
func (b *breaker) abandon() {
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// breakerChange is what an attempt's outcome did to a breaker.
type breakerChange int

const (
	breakerKept breakerChange = iota
	// breakerOpened: it was closed, and opened.
	breakerOpened
	// breakerReopened: its probe failed; it opened again for a longer
	// pause.
	breakerReopened
	// breakerClosed: it was open, and closed.
	breakerClosed
)

// breakerCauseMax bounds the text of the failure that opened a breaker in
// its refusals.
const breakerCauseMax = 256

// record notes an attempt's outcome (err nil: it succeeded; probe: it was
// the probe admit let through) and reports what it changed, and the pause
// when it opened the breaker, again or not.
func (b *breaker) record(err error, probe bool, now time.Time) (breakerChange, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		change := breakerKept
		if b.open {
			change = breakerClosed
		}
		b.failures, b.opens, b.open, b.probing = 0, 0, false, false
		return change, 0
	}
	b.failures++
	if b.open && !probe || !b.open && b.failures < b.threshold {
		return breakerKept, 0
	}
	change := breakerOpened
	if b.open {
		change = breakerReopened
	}
	b.opens++
	pause := b.pauseMin << min(b.opens-1, 30)
	if pause > b.pauseMax || pause <= 0 {
		pause = b.pauseMax
	}
	b.open, b.probing, b.openUntil = true, false, now.Add(pause)
	b.cause = store.ErrorText(err.Error(), breakerCauseMax)
	return change, pause
}

// breakerRecord writes one lane's breaker to the store
// (store.Endpoints.EndpointBreaker) when it changes, for the processes that
// read it there (postbox status): in line, as health records the
// endpoint's failures, bounded by healthCallTimeout; a failure is logged,
// and the next change writes again.
type breakerRecord struct {
	store store.Endpoints
	id    uuid.UUID
	b     *breaker
	log   *slog.Logger
	// mu makes the writes one at a time, each of the breaker's state when
	// it begins: deliveries in flight at once may change the breaker in
	// turn and write in another order, and the last write is still of the
	// last state.
	mu sync.Mutex
}

func (r *breakerRecord) write() {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), healthCallTimeout)
	defer cancel()
	if err := r.store.EndpointBreaker(ctx, r.id, r.b.until()); err != nil && !errors.Is(err, store.ErrEndpointNotFound) {
		r.log.Warn("recording the endpoint's breaker failed; postbox status shows its previous state", "error", err)
	}
}
