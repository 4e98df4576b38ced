package replay

import (
	"fmt"
	"log/slog"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/filter"
	"github.com/postbox-go/postbox/store"
)

// endpointFilter chooses the events one endpoint wants, as the fan-out
// does: by type and subject (endpoint.Wants: its type globs, and no
// operator event about the endpoint itself), then its content filter,
// whose evaluation error means no.
type endpointFilter struct {
	e      store.Endpoint
	filter *filter.Filter
}

// newEndpointFilter compiles e's filter; one that does not compile (written
// by other means than postbox endpoints) refuses the replay, as the
// fan-out sends such an endpoint nothing.
func newEndpointFilter(e store.Endpoint) (*endpointFilter, error) {
	f := &endpointFilter{e: e}
	if e.Filter != "" {
		var err error
		if f.filter, err = filter.Compile(e.Filter); err != nil {
			return nil, fmt.Errorf("replay: endpoint %s: its filter does not compile, so it gets no event (postbox endpoints update --filter mends it): %w", e.ID, err)
		}
	}
	return f, nil
}

// keep returns the events of events the endpoint wants, in their order,
// and how many of them its filter failed on; logFirst logs the first such
// failure (the run logs one, and counts them all).
func (f *endpointFilter) keep(events []store.HistoryEvent, log *slog.Logger, logFirst bool) ([]store.HistoryEvent, int) {
	out := make([]store.HistoryEvent, 0, len(events))
	failed := 0
	for _, ev := range events {
		if !endpoint.Wants(f.e.ID, f.e.Types, ev.Event) {
			continue
		}
		if f.filter != nil {
			ok, err := f.filter.Match(filter.NewInput(ev.Event))
			if err != nil {
				if failed == 0 && logFirst {
					log.Warn("endpoint filter failed on an event: the event is not replayed to the endpoint (the replay counts such errors; only the first is logged)",
						"endpoint", f.e.ID, "endpoint_name", f.e.Name, "event_id", ev.ID, "event_type", ev.EventType, "error", err)
				}
				failed++
				continue
			}
			if !ok {
				continue
			}
		}
		out = append(out, ev)
	}
	return out, failed
}
