package sqlstore

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// NewEndpoint is e as EndpointCreate writes it: with an id (a new UUIDv7)
// and a state (enabled) when they are not given.
func NewEndpoint(e store.Endpoint) store.Endpoint {
	if e.ID == uuid.Nil {
		e.ID = uuid.Must(uuid.NewV7())
	}
	if e.State == "" {
		e.State = store.EndpointEnabled
	}
	return e
}

// AttemptText is an attempt's response and error as stored: cleaned, and
// cut to store.AttemptResponseMax and ErrorTextMax bytes.
func AttemptText(a store.Attempt) (response, errText string) {
	return store.ErrorText(a.Response, store.AttemptResponseMax), store.ErrorText(a.Error, ErrorTextMax)
}

// ErrorTextMax is the longest error text of a delivery or an attempt.
const ErrorTextMax = 2000

// LaneName names an endpoint's lane in logs and errors: its name and id
// (never its URL, which may hold credentials, nor its secrets).
func LaneName(e store.Endpoint) string {
	return fmt.Sprintf("endpoint %q (%s)", e.Name, e.ID)
}

// LaneCannotListen is the error of a lane's Listen: package endpoint wakes
// its lanes itself. storeName prefixes it.
func LaneCannotListen(storeName string, e store.Endpoint) error {
	return fmt.Errorf("%s: %s: lanes are woken by package endpoint: %w", storeName, LaneName(e), store.ErrCannotListen)
}

// HeldInOrder returns those of ids that are in held, in the order of ids:
// what a lane's ExtendLease returns from the ids its statement renewed.
func HeldInOrder(ids, held []uuid.UUID) []uuid.UUID {
	in := make(map[uuid.UUID]bool, len(held))
	for _, id := range held {
		in[id] = true
	}
	out := make([]uuid.UUID, 0, len(held))
	for _, id := range ids {
		if in[id] {
			out = append(out, id)
		}
	}
	return out
}

// LaneWindow is the number of due deliveries, per delivery asked for,
// that an ordered claim of a lane checks for heads before it walks the
// endpoint's aggregates (as the PostgreSQL outbox's ordered claim does).
const LaneWindow = 4
