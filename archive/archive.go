// Package archive keeps delivered events in object storage before
// retention removes them from the outbox, and reads them back for replay.
//
// CONTRACT STUB (issue 29): the archive helper replaces the bodies.
package archive

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// Archive is a bucket of archived events: compressed NDJSON objects, each
// with its manifest entry, so that a window is found without listing
// every object.
type Archive struct{}

// Open opens the archive at a bucket URL: file:///path, s3://bucket?...,
// mem:// (tests), with an optional prefix (?prefix=outbox/).
func Open(ctx context.Context, url string) (*Archive, error) {
	return nil, errors.New("archive: not built yet")
}

// Keep writes events to the archive as one object: the relay's
// Config.Archive and store.ExpireParams.Keep. It returns nil only once the
// object and its manifest entry are complete; writing the same events
// again (a crash before the rows were removed) writes the same object.
func (a *Archive) Keep(ctx context.Context, events []store.HistoryEvent) error {
	return errors.New("archive: not built yet")
}

// ReadParams selects archived events.
type ReadParams struct {
	Filter store.HistoryFilter
	// After is the id after which to read; zero: from the first.
	After uuid.UUID
	// BatchSize is the most events handed to fn at once.
	BatchSize int
}

// Read hands fn the archived events p selects, in id order, each id once
// (an event archived twice is handed once), in batches; an error of fn
// stops it and is returned.
func (a *Archive) Read(ctx context.Context, p ReadParams, fn func([]store.HistoryEvent) error) error {
	return errors.New("archive: not built yet")
}

// String names the archive for logs, never credentials.
func (a *Archive) String() string { return "archive" }

// Close closes the bucket.
func (a *Archive) Close() error { return nil }
