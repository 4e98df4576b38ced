package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox/store"
)

// healthCallTimeout bounds the store calls that record an endpoint's
// health.
const healthCallTimeout = 5 * time.Second

// health follows whether one endpoint's attempts fail: it records when a
// run of failures begins (store.Endpoints.EndpointFailing) and ends
// (EndpointRecovered), and disables the endpoint once its attempts all
// failed for SupervisorConfig.DisableAfter, stopping its lane. With
// SupervisorConfig.OperatorEvents it reports the transitions: failing for
// OperatorEventsConfig.FailingAfter, recovered after that, disabled (never
// those of a shadow endpoint, which does not alert).
type health struct {
	s    *Supervisor
	e    store.Endpoint
	log  *slog.Logger
	stop func()

	mu           sync.Mutex
	failingSince time.Time
	// reported is the failingSince whose failing event was reported.
	reported time.Time
	// disabling is set by the attempt that disables the endpoint.
	disabling atomic.Bool
}

// record notes the outcome of an attempt that ended at now (err nil: it
// succeeded).
func (h *health) record(err error, now time.Time) {
	h.mu.Lock()
	since := h.failingSince
	if err == nil {
		h.failingSince = time.Time{}
	}
	h.mu.Unlock()
	if err == nil {
		if since.IsZero() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), healthCallTimeout)
		defer cancel()
		if err := h.s.cfg.Store.EndpointRecovered(ctx, h.e.ID); err != nil && !errors.Is(err, store.ErrEndpointNotFound) {
			h.log.Warn("recording the endpoint's recovery failed", "error", err)
		}
		h.log.Info("endpoint answers again", "failing_for", now.Sub(since).Round(time.Millisecond))
		// Recovered is news only after a failing event: a run of failures
		// that outlasted FailingAfter without a failed attempt past it (a
		// retry's backoff) was never reported.
		if o := h.events(); o != nil && h.reportedRun(since) {
			o.queue(transition{typ: EventEndpointRecovered, e: h.e, since: since, at: now})
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), healthCallTimeout)
	defer cancel()
	if since.IsZero() {
		var err error
		if since, err = h.s.cfg.Store.EndpointFailing(ctx, h.e.ID, now); err != nil {
			if !errors.Is(err, store.ErrEndpointNotFound) {
				h.log.Warn("recording the endpoint's failure failed", "error", err)
			}
			return
		}
		h.setFailingSince(since)
	}
	if o := h.events(); o != nil && now.Sub(since) >= o.cfg.FailingAfter && h.report(since) {
		o.queue(transition{typ: EventEndpointFailing, e: h.e, since: since, at: now, lastErr: err.Error()})
	}
	if now.Sub(since) < h.s.cfg.DisableAfter || !h.disabling.CompareAndSwap(false, true) {
		return
	}
	if err := h.s.cfg.Store.EndpointSetState(ctx, h.e.ID, store.EndpointAutoDisabled); err != nil {
		h.log.Warn("disabling the failing endpoint failed; the next failure tries again", "error", err)
		h.disabling.Store(false)
		return
	}
	h.s.autoDisabled.Add(1)
	h.log.Warn(fmt.Sprintf("endpoint disabled: every attempt failed for %v; its deliveries wait: postbox endpoints enable %s delivers them",
		now.Sub(since).Round(time.Second), h.e.ID), "failing_since", since, "last_error", err)
	if o := h.events(); o != nil {
		o.queue(transition{typ: EventEndpointDisabled, e: h.e, since: since, at: now, lastErr: err.Error()})
	}
	h.stop()
}

// events is where h reports transitions: nil without operator events,
// and for a shadow endpoint.
func (h *health) events() *operatorEvents {
	if h.e.Shadow {
		return nil
	}
	return h.s.events
}

// report reports whether the failing event of the run of failures that
// began at since is still to be written, and marks it written.
func (h *health) report(since time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reported.Equal(since) {
		return false
	}
	h.reported = since
	return true
}

// reportedRun reports whether the failing event of the run of failures
// that began at since was written.
func (h *health) reportedRun(since time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reported.Equal(since)
}

func (h *health) setFailingSince(t time.Time) {
	h.mu.Lock()
	h.failingSince = t
	h.mu.Unlock()
}
