package inbox

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
)

// Words of the {"status": "..."} answer bodies.
const (
	statusProcessed        = "processed"
	statusDuplicate        = "duplicate"
	statusBadRequest       = "bad_request"
	statusUnauthorized     = "unauthorized"
	statusForbidden        = "forbidden"
	statusMethodNotAllowed = "method_not_allowed"
	statusConflict         = "sequence_conflict"
	statusTooLarge         = "too_large"
	statusError            = "error"
	statusOutOfOrder       = "out_of_order"
	statusInProgress       = "in_progress"
)

// answer writes the response to a processed request, and logs what went
// wrong.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, ev *Event, outcome Outcome, err error) {
	log := func(level slog.Level, msg string) {
		h.cfg.Logger.LogAttrs(r.Context(), level, msg,
			slog.String("event_id", ev.ID.String()),
			slog.String("event_type", ev.EventType),
			slog.String("remote_addr", r.RemoteAddr),
			slog.Any("error", err))
	}
	switch {
	case err == nil && outcome == Duplicate, errors.Is(err, ErrDuplicate):
		respond(w, http.StatusOK, statusDuplicate)
	case err == nil:
		respond(w, http.StatusOK, statusProcessed)
	case errors.Is(err, ErrOutOfOrder):
		log(slog.LevelInfo, "inbox: event out of order, sender asked to retry")
		h.retryLater(w, statusOutOfOrder)
	case errors.Is(err, ErrInProgress):
		log(slog.LevelInfo, "inbox: event in progress, sender asked to retry")
		h.retryLater(w, statusInProgress)
	case errors.Is(err, ErrSequenceApplied):
		log(slog.LevelWarn, "inbox: event refused")
		respond(w, http.StatusConflict, statusConflict)
	case errors.Is(err, ErrInvalidEvent):
		log(slog.LevelWarn, "inbox: event refused")
		respond(w, http.StatusBadRequest, statusBadRequest)
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		log(slog.LevelInfo, "inbox: request canceled while processing")
		h.retryLater(w, statusError)
	default:
		log(slog.LevelError, "inbox: processing failed")
		respond(w, http.StatusInternalServerError, statusError)
	}
}

// refuse answers a request that was not processed, and logs why.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, code int, status, reason string, err error) {
	attrs := []slog.Attr{
		slog.Int("code", code),
		slog.String("reason", reason),
		slog.String("remote_addr", r.RemoteAddr),
	}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	h.cfg.Logger.LogAttrs(r.Context(), slog.LevelWarn, "inbox: request refused", attrs...)
	respond(w, code, status)
}

// retryLater answers 503 with the configured Retry-After.
func (h *Handler) retryLater(w http.ResponseWriter, status string) {
	w.Header().Set("Retry-After", h.retryAfter)
	respond(w, http.StatusServiceUnavailable, status)
}

// respond writes a {"status": "..."} answer.
func respond(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(`{"status":"` + status + `"}` + "\n"))
}
