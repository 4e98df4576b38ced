package observe

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/postbox-go/postbox/store"
)

// maxReasonLen bounds the reason of a 503 answer.
const maxReasonLen = 300

// Health is what GET /healthz checks.
type Health struct {
	// Ready reports whether the relay delivers: its loops run and its last
	// claim succeeded (relay.Relay.Ready). Nil skips the check.
	Ready func() bool
	// Outbox, when set, must have sampled the outbox within its period:
	// the database answered lately.
	Outbox *OutboxSampler
}

// check returns nil when healthy, else why not.
func (h Health) check() error {
	if h.Ready != nil && !h.Ready() {
		return errors.New("relay: not delivering (not running, stopping, or its last claim failed)")
	}
	if h.Outbox != nil {
		return h.Outbox.Answered()
	}
	return nil
}

// Handler serves, on a mux of its own:
//
//	GET /metrics   the metrics gathered from g, in the Prometheus exposition format
//	GET /healthz   200 {"status":"ok"} while h holds; otherwise
//	               503 {"status":"unavailable","reason":"..."}
//
// Give it a server of its own (a listener apart from the application's).
func Handler(g prometheus.Gatherer, h Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err := h.check(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(healthAnswer{Status: "unavailable", Reason: store.ErrorText(err.Error(), maxReasonLen)})
			return
		}
		_ = json.NewEncoder(w).Encode(healthAnswer{Status: "ok"})
	})
	return mux
}

// healthAnswer is the body of GET /healthz.
type healthAnswer struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}
