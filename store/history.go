package store

import (
	"context"
	"errors"
	"path"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
)

// History is an outbox's delivered events as replay and the archive see
// them: the delivered events a store keeps (a relay's Retention keeps them
// marked done), read in id order, and events sent (again) to the queue as
// replays. Every Outbox has these methods.
type History interface {
	// HistoryRead returns up to p.Limit delivered (done) events kept in the
	// outbox that p.Filter lets through, in id order, after p.After (zero
	// without p.Resume: from the first). Pending, failed and leased events
	// are not history.
	HistoryRead(ctx context.Context, p HistoryParams) ([]HistoryEvent, error)
	// Requeue sends events back to the outbox's queue as replays, in one
	// transaction: a kept row with the event's id that is done becomes
	// pending again, due at once, with its attempts from 1; an event whose
	// row is gone (read from an archive) is written again, pending, with
	// its id, type, aggregate, payload and headers and no dedup key (its
	// key did its work; a producer's event holding it again is not
	// refused); a row still pending, leased or failed is left alone
	// (Skipped). Every requeued event carries the header HeaderReplay
	// (postbox.HeaderReplay) with the value replay, so that a consumer can
	// tell a replay from a first delivery; its id stays the event's id, so
	// an inbox absorbs what it already applied.
	Requeue(ctx context.Context, events []HistoryEvent, replay string) (RequeueResult, error)
	// RequeueKept is HistoryRead and Requeue of what it read in one step,
	// for a replay of the kept rows alone: the delivered events HistoryRead
	// would return for p are requeued as Requeue requeues them, without
	// being handed out (a store may do it all on its server: no payload
	// travels). Read is how many it selected (a page shorter than p.Limit
	// is the last), Last the last one's id (the next page's After, with
	// Resume).
	RequeueKept(ctx context.Context, p HistoryParams, replay string) (RequeueKeptResult, error)
}

// RequeueKeptResult is what a RequeueKept did.
type RequeueKeptResult struct {
	RequeueResult
	// Read is how many kept events it selected; Last the id of the last
	// one (in id order), zero when none.
	Read int
	Last uuid.UUID
}

// HistoryBatchMax is the largest HistoryParams.Limit, and the most events
// one Requeue takes.
const HistoryBatchMax = 10_000

// HistoryParams selects delivered events to read.
type HistoryParams struct {
	Filter HistoryFilter
	// After is the id after which to read (ids are UUIDv7: time-ordered);
	// zero reads from the first, unless Resume.
	After uuid.UUID
	// Resume reads after After even when it is the all-zero id (a
	// plain-SQL producer may write that id): set it when paging, with
	// After the last id of the page before, so that a page ending on that
	// id does not return it again.
	Resume bool
	// Limit is the most events returned, from 1 to HistoryBatchMax.
	Limit int
}

// HistoryFilter chooses events by when they were written, their type and
// their aggregate; its zero value lets every event through.
type HistoryFilter struct {
	// Since and Until bound when the events were written (CreatedAt):
	// Since <= CreatedAt < Until; zero leaves that side open.
	Since, Until time.Time
	// EventTypes, when not empty, keeps the events whose type one of them
	// matches: globs with path.Match syntax, as an endpoint's types
	// ("order.*", "payment.succeeded").
	EventTypes []string
	// AggregateType and AggregateID, when not empty, keep the events of
	// that aggregate type, and id.
	AggregateType string
	AggregateID   string
}

// Match reports whether f lets an event of this type, aggregate and time
// through: what a store's query selects, for a reader with no query (an
// archive).
func (f HistoryFilter) Match(eventType, aggregateType, aggregateID string, createdAt time.Time) bool {
	if !f.Since.IsZero() && createdAt.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !createdAt.Before(f.Until) {
		return false
	}
	if f.AggregateType != "" && aggregateType != f.AggregateType {
		return false
	}
	if f.AggregateID != "" && aggregateID != f.AggregateID {
		return false
	}
	if len(f.EventTypes) == 0 {
		return true
	}
	for _, t := range f.EventTypes {
		if ok, _ := path.Match(t, eventType); ok {
			return true
		}
	}
	return false
}

// Check reports a filter no store can run: a type glob path.Match refuses,
// or Until not after Since.
func (f HistoryFilter) Check() error {
	for _, t := range f.EventTypes {
		if _, err := path.Match(t, ""); err != nil {
			return errors.New("store: event type pattern " + t + ": " + err.Error())
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return errors.New("store: the window ends before it begins")
	}
	return nil
}

// HistoryEvent is a delivered event as history keeps it: the event as its
// producer wrote it (DedupKey included), with where and when it was.
type HistoryEvent struct {
	postbox.Event
	// OutboxSeq is the event's place in the outbox when it was delivered.
	OutboxSeq   int64
	CreatedAt   time.Time
	ProcessedAt time.Time
}

// RequeueResult counts what Requeue did with each event it was given.
type RequeueResult struct {
	// Requeued: kept rows sent back to the queue.
	Requeued int
	// Inserted: events whose row was gone, written again.
	Inserted int
	// Skipped: rows still pending, leased or failed, left alone.
	Skipped int
}

// ExpireParams is one step of retention (Source.Expire).
type ExpireParams struct {
	// Before: delivered events processed before it are removed; zero
	// removes none (a partitioned outbox still creates its partitions
	// ahead and drops those left empty).
	Before time.Time
	// Limit is the most events read and deleted in one unit (a batch of a
	// plain table; a partition is read in chunks of Limit).
	Limit int
	// Keep, when set, is handed every unit's delivered events before they
	// are removed (an archive: package archive); a unit is removed only
	// once Keep returned nil for all of it, and an error of Keep stops the
	// step, removing no more events (the dedup keys whose hold ended are
	// removed all the same). Sources that keep no history of their
	// own (an endpoint's lane) refuse a Keep with ErrKeepUnsupported.
	Keep func(ctx context.Context, events []HistoryEvent) error
}

// ErrKeepUnsupported is Expire's answer, from a source whose rows are
// copies of the outbox's events (an endpoint's lane), to an ExpireParams
// with a Keep.
var ErrKeepUnsupported = errors.New("store: this source keeps no history to archive")

// ExpireResult is what one Expire step did.
type ExpireResult struct {
	// Events is how many delivered events (or finished deliveries) it
	// removed, Kept how many of them it handed to Keep first. The events
	// of a large partition dropped without Keep are an estimate (counted
	// in a sample of its pages), so that a drop never reads them all.
	Events int
	Kept   int
	// Keys is how many dedup keys whose hold had ended it removed.
	Keys int
	// Created and Dropped name the partitions it created ahead and
	// dropped (a partitioned outbox).
	Created, Dropped []string
	// More reports that work is left: call Expire again.
	More bool
}
