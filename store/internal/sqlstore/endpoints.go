package sqlstore

import (
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
