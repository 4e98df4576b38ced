// Package replay delivers again events that were already delivered:
// chosen by time window, type and aggregate from the delivered events an
// outbox keeps (store.History) and from its archive (package archive),
// sent back to the outbox's queue, or to one webhook endpoint's
// deliveries (a backfill), as replays: the event id kept, the header
// postbox.HeaderReplay added. What `postbox replay` and the console's
// replay action run.
//
// Run reads the table and the archive in id order (event ids are UUIDv7:
// time-ordered), merges the two (an event archived and still kept in the
// table is handled once) and requeues what it read in batches, each in one
// transaction. A replay is not idempotent by its selection: replayed
// events are delivered again by every run. Its cursor is the id of the
// last event handled (Progress.Last): a run that stopped (ctx cancelled,
// an error) is resumed with Params.After set to it, and replays the rest,
// each event once.
package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

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
	// Filter chooses the events by when they were written, their type
	// and their aggregate (it must pass store.HistoryFilter.Check). Its
	// Until, when zero or later than the time Run begins, is that time:
	// events written while a replay runs are having their first delivery,
	// not replayed (Progress.Until).
	Filter store.HistoryFilter
	// After resumes a replay: only events after this id (the Last of an
	// interrupted run's Progress).
	After uuid.UUID
	// Endpoint, when not zero, sends the events to this endpoint only, as
	// its deliveries (those its types and filter want), instead of the
	// outbox's queue (which fans them out again to every endpoint that
	// wants them, in endpoints mode).
	Endpoint uuid.UUID
	// Table and Archive choose where to read from; both false: both (the
	// table alone when Config.Archive is nil). Archive needs
	// Config.Archive.
	Table, Archive bool
	// BatchSize is the most events read and requeued at once, at most
	// store.HistoryBatchMax; zero: BatchSizeDefault.
	BatchSize int
	// Name is the value of the replay header; empty: one is made from the
	// time ("replay-20261202T101500Z"). See CheckName.
	Name string
	// DryRun counts what would be sent and sends nothing.
	DryRun bool
	// Progress, when set, is called after every batch.
	Progress func(Progress)
}

// BatchSizeDefault is Params.BatchSize when zero.
const BatchSizeDefault = 1000

// NameMax is the longest Params.Name, in bytes.
const NameMax = 100

// Progress is what a replay has done so far.
type Progress struct {
	// Read: events read (table and archive; an event both hold counts
	// once), Matched: those the endpoint wants (all of them for the
	// outbox), which are sent (counted only, on a dry run).
	Read, Matched int
	// Requeued, Inserted and Skipped count what the store did with the
	// events sent (store.RequeueResult); zero on a dry run.
	store.RequeueResult
	// Archived counts the events of Read that only the archive held
	// (their rows are gone from the table: a replay to the outbox writes
	// them again); Both those the table and the archive both held,
	// handled once.
	Archived, Both int
	// FilterErrors counts the events of the endpoint's types whose filter
	// failed to evaluate (a key the payload lacks, the cost limit): not
	// sent, as the fan-out does not send them.
	FilterErrors int
	// Last is the id of the last event handled: Params.After resumes
	// after it. It is Params.After until a batch is handled.
	Last uuid.UUID
	// Name is the replay header's value.
	Name string
	// Until is the end of the window read (see Params.Filter): to resume
	// with the same selection, give it as Filter.Until with After = Last.
	Until time.Time
}

// CheckName reports a replay name that cannot be Params.Name: empty, over
// NameMax bytes, with a character that is not printable ASCII (it travels
// as a header value, HTTP's or a broker's), or with a space at either end.
func CheckName(name string) error {
	if name == "" || len(name) > NameMax {
		return fmt.Errorf("replay: a name has 1 to %d characters", NameMax)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e {
			return errors.New("replay: a name has printable ASCII characters only (it is a header's value)")
		}
	}
	if name[0] == ' ' || name[len(name)-1] == ' ' {
		return errors.New("replay: a name neither begins nor ends with a space")
	}
	return nil
}

// DefaultName is the name of a replay that begins at t and is given none.
func DefaultName(t time.Time) string { return "replay-" + t.UTC().Format("20060102T150405Z") }

// Run replays what p chooses, batch by batch, each batch whole; ctx
// cancelled stops it after the batch in flight and returns the Progress
// so far with ctx's error (resume with Params.After = Progress.Last and
// Filter.Until = Progress.Until).
func Run(ctx context.Context, cfg Config, p Params) (Progress, error) {
	began := time.Now()
	table, fromArchive, err := check(cfg, &p, began)
	if err != nil {
		return Progress{}, err
	}
	prog := Progress{Name: p.Name, Last: p.After, Until: p.Filter.Until}
	if !p.Filter.Since.IsZero() && !p.Filter.Since.Before(p.Filter.Until) {
		return prog, nil // a window that begins when the run does: nothing was delivered in it yet
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	send := func(ctx context.Context, events []store.HistoryEvent) (store.RequeueResult, error) {
		return cfg.Outbox.Requeue(ctx, events, p.Name)
	}
	var wants *endpointFilter
	if p.Endpoint != uuid.Nil {
		e, err := cfg.Endpoints.EndpointGet(ctx, p.Endpoint)
		if err != nil {
			return prog, fmt.Errorf("replay: endpoint %s: %w", p.Endpoint, err)
		}
		if wants, err = newEndpointFilter(e); err != nil {
			return prog, err
		}
		send = func(ctx context.Context, events []store.HistoryEvent) (store.RequeueResult, error) {
			return cfg.Endpoints.EndpointRequeue(ctx, p.Endpoint, events, p.Name)
		}
	}

	log.Info("replay started", "name", p.Name, "table", table, "archive", fromArchive, "endpoint", p.Endpoint,
		"after", p.After, "since", p.Filter.Since, "until", p.Filter.Until, "dry_run", p.DryRun)
	// The batch in flight runs to its end (one transaction) whatever
	// becomes of ctx: Progress.Last then says exactly where to resume.
	work := context.WithoutCancel(ctx)
	stopped := func(err error) (Progress, error) {
		log.Warn("replay stopped", "name", p.Name, "read", prog.Read, "requeued", prog.Requeued, "inserted", prog.Inserted, "skipped", prog.Skipped, "last", prog.Last, "error", err)
		return prog, fmt.Errorf("replay %s: stopped after %d events (resume after %s): %w", p.Name, prog.Read, prog.Last, err)
	}
	ended := func() (Progress, error) {
		log.Info("replay ended", "name", p.Name, "read", prog.Read, "matched", prog.Matched, "requeued", prog.Requeued,
			"inserted", prog.Inserted, "skipped", prog.Skipped, "last", prog.Last, "dry_run", p.DryRun)
		return prog, nil
	}

	// The table alone to the outbox's queue: the store requeues each page
	// itself (store.History.RequeueKept), no event handed out.
	if table && !fromArchive && wants == nil && !p.DryRun {
		if err := requeueKept(ctx, work, cfg.Outbox, p, &prog); err != nil {
			return stopped(err)
		}
		return ended()
	}

	m := &merge{after: p.After, from: p.After == uuid.Nil}
	if table {
		m.table = &stream{what: "table", src: &tableSource{h: cfg.Outbox,
			p: store.HistoryParams{Filter: p.Filter, After: p.After, Limit: p.BatchSize}}}
	}
	if fromArchive {
		src := startArchive(ctx, cfg.Archive.Read, archive.ReadParams{Filter: p.Filter, After: p.After, BatchSize: p.BatchSize})
		defer src.stop()
		m.archive = &stream{what: "archive", src: src}
	}
	batches := readAhead(ctx, m, p.BatchSize)
	defer batches.stop()

	for {
		if ctx.Err() != nil {
			return stopped(context.Cause(ctx))
		}
		b, err := batches.next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return stopped(err)
		}
		if len(b.events) == 0 {
			return ended()
		}
		chosen := b.events
		if wants != nil {
			var errs int
			chosen, errs = wants.keep(b.events, log, prog.FilterErrors == 0)
			prog.FilterErrors += errs
		}
		if !p.DryRun && len(chosen) > 0 {
			res, err := send(work, chosen)
			if err != nil {
				return stopped(err)
			}
			prog.Requeued += res.Requeued
			prog.Inserted += res.Inserted
			prog.Skipped += res.Skipped
		}
		prog.Read += len(b.events)
		prog.Matched += len(chosen)
		prog.Archived += b.archived
		prog.Both += b.both
		prog.Last = b.events[len(b.events)-1].ID
		if p.Progress != nil {
			p.Progress(prog)
		}
	}
}

// requeueKept is Run of the table alone to the outbox's queue: page after
// page, the store requeues the kept events p chooses (RequeueKept), each
// page whole (work is not canceled), prog following them. It returns nil
// after the last page (a short one), or ctx's cause when ctx ends first
// (even during the last page, as the merge's loop does after its batch in
// flight), or the store's error.
func requeueKept(ctx, work context.Context, h store.History, p Params, prog *Progress) error {
	hp := store.HistoryParams{Filter: p.Filter, After: p.After, Limit: p.BatchSize}
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		res, err := h.RequeueKept(work, hp, p.Name)
		if err != nil {
			return err
		}
		if res.Read > 0 {
			prog.Read += res.Read
			prog.Matched += res.Read
			prog.Requeued += res.Requeued
			prog.Inserted += res.Inserted
			prog.Skipped += res.Skipped
			prog.Last = res.Last
			hp.After, hp.Resume = res.Last, true
			if p.Progress != nil {
				p.Progress(*prog)
			}
		}
		if res.Read < hp.Limit && ctx.Err() == nil {
			return nil
		}
	}
}

// check validates cfg and p and fills p's defaults, the time the run
// began being began; it returns where to read from.
func check(cfg Config, p *Params, began time.Time) (table, fromArchive bool, err error) {
	switch {
	case cfg.Outbox == nil:
		return false, false, errors.New("replay: Config.Outbox is required")
	case p.Endpoint != uuid.Nil && cfg.Endpoints == nil:
		return false, false, errors.New("replay: Params.Endpoint needs Config.Endpoints")
	case p.Archive && cfg.Archive == nil:
		return false, false, errors.New("replay: Params.Archive needs Config.Archive")
	case p.BatchSize < 0 || p.BatchSize > store.HistoryBatchMax:
		return false, false, fmt.Errorf("replay: Params.BatchSize %d: want 1 to %d (0: %d)", p.BatchSize, store.HistoryBatchMax, BatchSizeDefault)
	}
	if err := p.Filter.Check(); err != nil {
		return false, false, fmt.Errorf("replay: %w", err)
	}
	if p.BatchSize == 0 {
		p.BatchSize = BatchSizeDefault
	}
	if p.Name == "" {
		p.Name = DefaultName(began)
	}
	if err := CheckName(p.Name); err != nil {
		return false, false, err
	}
	if p.Filter.Until.IsZero() || p.Filter.Until.After(began) {
		p.Filter.Until = began
	}
	table, fromArchive = p.Table, p.Archive
	if !table && !fromArchive {
		table, fromArchive = true, cfg.Archive != nil
	}
	return table, fromArchive, nil
}

// before reports whether id a comes before id b: the order of the stores'
// indexes and of the archive (the bytes of the UUIDs).
func before(a, b uuid.UUID) bool { return bytes.Compare(a[:], b[:]) < 0 }
