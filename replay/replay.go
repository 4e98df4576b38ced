// Package replay delivers again events that were already delivered:
// chosen by time window, type and aggregate from the delivered events an
// outbox keeps (store.History) and from its archive (package archive),
// sent back to the outbox's queue, or to one webhook endpoint's
// deliveries (a backfill), as replays: the event id kept, the header
// postbox.HeaderReplay added. What `postbox replay` and the console's
// replay action run.
//
// CONTRACT STUB (issue 29): the replay helper replaces the bodies.
package replay

import (
	"context"
	"errors"
	"log/slog"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/store"
)

// Config is what a replay reads from and writes to.
type Config struct {
	// Outbox is the outbox whose history is replayed, and where replays
	// to the outbox go (store.History.Requeue). Required.
	Outbox store.History
	// Endpoints is needed only to replay to one endpoint (Params.Endpoint).
	Endpoints store.Endpoints
	// Archive, when set, is read too: events no longer in the table.
	Archive *archive.Archive
	// Logger; nil: discarded.
	Logger *slog.Logger
}

// Params chooses what a replay sends, and where.
type Params struct {
	Filter store.HistoryFilter
	// After resumes a replay: only events after this id (the Last of an
	// interrupted run's Progress).
	After uuid.UUID
	// Endpoint, when not zero, sends the events to this endpoint only, as
	// its deliveries (those its types and filter want), instead of the
	// outbox's queue (which fans them out again to every endpoint that
	// wants them, in endpoints mode).
	Endpoint uuid.UUID
	// Table and Archive choose where to read from; both false: both.
	Table, Archive bool
	// BatchSize is the most events read and requeued at once; zero:
	// BatchSizeDefault.
	BatchSize int
	// Name is the value of the replay header; empty: one is made from the
	// time ("replay-20261202T101500Z").
	Name string
	// DryRun counts what would be sent and sends nothing.
	DryRun bool
	// Progress, when set, is called after every batch.
	Progress func(Progress)
}

// BatchSizeDefault is Params.BatchSize when zero.
const BatchSizeDefault = 1000

// Progress is what a replay has done so far.
type Progress struct {
	// Read: events read (table and archive), Matched: those the endpoint
	// wants (all of them for the outbox).
	Read, Matched int
	store.RequeueResult
	// Last is the id of the last event handled: Params.After resumes
	// after it.
	Last uuid.UUID
	// Name is the replay header's value.
	Name string
}

// Run replays what p chooses, batch by batch, each batch whole; ctx
// cancelled stops it after the batch in flight and returns the Progress
// so far with ctx's error (resume with Params.After = Progress.Last).
func Run(ctx context.Context, cfg Config, p Params) (Progress, error) {
	return Progress{}, errors.New("replay: not built yet")
}
