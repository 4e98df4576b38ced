package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/replay"
	"github.com/postbox-go/postbox/store"
)

// timeFlag is a flag holding an RFC 3339 time.
type timeFlag struct{ t time.Time }

func (f *timeFlag) String() string {
	if f == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339Nano)
}

func (f *timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("%q: want an RFC 3339 time such as 2026-12-02T10:00:00Z", s)
	}
	f.t = t
	return nil
}

// replayFlags are the flags of postbox replay.
type replayFlags struct {
	db                 dbFlags
	since, until       timeFlag
	sinceAgo           ageFlag
	types              stringList
	aggType, aggID     string
	toEndpoint         string
	archiveURL, from   string
	after              string
	batch              int
	name               string
	dryRun, yes        bool
	table, fromArchive bool
	afterID            uuid.UUID
	filter             store.HistoryFilter
}

func (f *replayFlags) register(fs *flag.FlagSet) {
	f.db.register(fs)
	fs.Var(&f.since, "since", "replay the events written at or after this time (RFC 3339: 2026-12-02T10:00:00Z)")
	fs.Var(&f.sinceAgo, "since-ago", "replay the events written within this duration (90m, 12h, 7d): --since now minus it")
	fs.Var(&f.until, "until", "replay the events written before this time (RFC 3339); default and at most: when the replay begins")
	fs.Var(&f.types, "type", "replay the events whose type this glob matches (order.*, payment.succeeded); repeat it for several")
	fs.StringVar(&f.aggType, "aggregate-type", "", "replay the events of this aggregate type only")
	fs.StringVar(&f.aggID, "aggregate-id", "", "replay the events of this aggregate id only")
	fs.StringVar(&f.toEndpoint, "to-endpoint", "", "send them to this webhook endpoint only (its id or name), as its deliveries, those its types and filter want (a backfill), instead of the outbox's queue")
	fs.StringVar(&f.archiveURL, "archive", "", "read the archive at this bucket URL too (file:///dir, s3://bucket?region=...): the delivered events retention removed from the table")
	fs.StringVar(&f.from, "from", "", "where to read: table, archive or both (default: both with --archive, table without)")
	fs.StringVar(&f.after, "after", "", "replay only the events after this id: what an interrupted replay prints, to resume it")
	fs.IntVar(&f.batch, "batch", replay.BatchSizeDefault, fmt.Sprintf("most events read and requeued at once, each batch in one transaction (at most %d)", store.HistoryBatchMax))
	fs.StringVar(&f.name, "name", "", "the replay's name, the value of the "+postbox.HeaderReplay+" header consumers see (default: replay-<UTC time>)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "count what would be replayed and replay nothing")
	fs.BoolVar(&f.yes, "yes", false, "replay (without it, and without --dry-run, the plan and its count are printed and nothing is replayed)")
	// What a replay selects, where it reads and sends them, and whether it
	// does, are read from the command line only: a variable left set
	// (another command's --type, --since, --batch; the relay's
	// $POSTBOX_ARCHIVE, which would make the default --from both) must not
	// change what consumers get again.
	setCommandLineOnly(fs, true, "since", "since-ago", "until", "type", "aggregate-type", "aggregate-id", "to-endpoint",
		"archive", "from", "after", "batch", "name", "dry-run", "yes")
}

// check checks the flags before anything is opened, and sets the filter,
// the cursor and where to read from.
func (f *replayFlags) check(fs *flag.FlagSet) error {
	if err := refuseEmpty(fs, "type", "aggregate-type", "aggregate-id", "to-endpoint", "archive", "from", "after", "name"); err != nil {
		return err
	}
	switch {
	case f.dryRun && f.yes:
		return fmt.Errorf("%w: give --dry-run or --yes, not both", errUsage)
	case !f.since.t.IsZero() && f.sinceAgo.set:
		return fmt.Errorf("%w: give --since or --since-ago, not both", errUsage)
	case f.batch < 1 || f.batch > store.HistoryBatchMax:
		return fmt.Errorf("%w: --batch %d: want 1 to %d", errUsage, f.batch, store.HistoryBatchMax)
	}
	if f.name != "" {
		if err := replay.CheckName(f.name); err != nil {
			return fmt.Errorf("%w: --name: %v", errUsage, err)
		}
	}
	if f.after != "" {
		id, err := uuid.Parse(f.after)
		if err != nil {
			return fmt.Errorf("%w: --after %q is not an event id (a UUID)", errUsage, printable.String(f.after))
		}
		f.afterID = id
	}
	switch f.from {
	case "":
		f.table, f.fromArchive = true, f.archiveURL != ""
	case "table":
		f.table = true
	case "archive":
		f.fromArchive = true
	case "both":
		f.table, f.fromArchive = true, true
	default:
		return fmt.Errorf("%w: --from %q: want table, archive or both", errUsage, printable.String(f.from))
	}
	if f.fromArchive && f.archiveURL == "" {
		return fmt.Errorf("%w: --from %s reads the archive: give its --archive URL", errUsage, f.from)
	}
	f.filter = store.HistoryFilter{Since: f.since.t, Until: f.until.t, EventTypes: f.types, AggregateType: f.aggType, AggregateID: f.aggID}
	if f.sinceAgo.set {
		f.filter.Since = f.sinceAgo.ago()
	}
	if err := f.filter.Check(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

func setupReplay(fs *flag.FlagSet) func(context.Context) error {
	var f replayFlags
	f.register(fs)
	return func(ctx context.Context) error {
		if err := f.check(fs); err != nil {
			return err
		}
		// Only --yes writes: a plan does not create a SQLite file.
		s, err := f.db.open(ctx, "replay", !f.yes)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Outbox.CheckSchema(ctx, store.SchemaParams{}); err != nil {
			return err
		}
		cfg := replay.Config{Outbox: s.Outbox, Endpoints: s.Endpoints}
		p := replay.Params{Filter: f.filter, After: f.afterID, Table: f.table, Archive: f.fromArchive, BatchSize: f.batch, Name: f.name}
		var e *store.Endpoint
		if f.toEndpoint != "" {
			found, err := findEndpoint(ctx, s.Endpoints, f.toEndpoint)
			if err != nil {
				return fmt.Errorf("--to-endpoint: %w", err)
			}
			e, p.Endpoint = &found, found.ID
		}
		if f.fromArchive {
			a, err := archive.Open(ctx, f.archiveURL)
			if err != nil {
				return fmt.Errorf("--archive: %w", dburl.Scrub(err, f.archiveURL))
			}
			defer a.Close()
			cfg.Archive = a
		}
		// The window ends when the replay begins, unless --until ends it
		// before: the plan, the count and the run say the same.
		begun := time.Now()
		untilBegun := p.Filter.Until.IsZero() || p.Filter.Until.After(begun)
		if untilBegun {
			p.Filter.Until = begun
		}
		if !p.Filter.Since.Before(p.Filter.Until) {
			return fmt.Errorf("%w: --since %s is not before the replay began: nothing was delivered in that window yet", errUsage, p.Filter.Since.UTC().Format(time.RFC3339))
		}
		var resume string
		if untilBegun {
			resume += " --until " + p.Filter.Until.UTC().Format(time.RFC3339Nano)
		}
		if p.Name == "" {
			p.Name = replay.DefaultName(begun)
			resume += " --name " + p.Name
		}
		printReplayPlan(os.Stdout, p, cfg.Archive, e, untilBegun)
		if !f.yes {
			return countReplay(ctx, cfg, p, f.dryRun)
		}
		return runReplay(ctx, cfg, p, resume)
	}
}

// printReplayPlan says what p selects, where from and where to.
func printReplayPlan(w io.Writer, p replay.Params, a *archive.Archive, e *store.Endpoint, untilBegun bool) {
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	fmt.Fprintf(w, "replay %s\n", printable.String(p.Name))
	window := "written "
	if !p.Filter.Since.IsZero() {
		window += "from " + stamp(p.Filter.Since) + " "
	}
	window += "until " + stamp(p.Filter.Until)
	if untilBegun {
		window += " (when the replay began)"
	}
	fmt.Fprintf(w, "  events     delivered events %s\n", window)
	if len(p.Filter.EventTypes) > 0 {
		fmt.Fprintf(w, "  types      %s\n", printable.String(strings.Join(p.Filter.EventTypes, ", ")))
	}
	if p.Filter.AggregateType != "" || p.Filter.AggregateID != "" {
		agg := func(s string) string {
			if s == "" {
				return "any"
			}
			return printable.String(s)
		}
		fmt.Fprintf(w, "  aggregate  type %s, id %s\n", agg(p.Filter.AggregateType), agg(p.Filter.AggregateID))
	}
	if p.After != uuid.Nil {
		fmt.Fprintf(w, "  after      %s (resuming)\n", p.After)
	}
	from := "the outbox's table (the delivered events that relays' --retention keeps)"
	switch {
	case p.Archive && !p.Table:
		from = "archive " + a.String()
	case p.Archive:
		from += " and archive " + a.String() + " (an event in both is sent once)"
	}
	fmt.Fprintf(w, "  read from  %s\n", from)
	if e != nil {
		fmt.Fprintf(w, "  send to    endpoint %s (%s) only, as its deliveries: the events its types and filter want\n", printable.String(e.Name), e.ID)
		if e.State != store.EndpointEnabled {
			fmt.Fprintf(w, "             it is %s: its deliveries wait until it is enabled\n", e.State)
		}
	} else {
		fmt.Fprintln(w, "  send to    the outbox's queue: running relays deliver them again (in endpoints mode, to every endpoint that wants them)")
	}
	fmt.Fprintf(w, "  consumers  see each event with its first delivery's id, and the header %s: %s\n", postbox.HeaderReplay, printable.String(p.Name))
}

// countReplay is replay without --yes: it counts what the replay would
// send (a dry run) and says how to send them.
func countReplay(ctx context.Context, cfg replay.Config, p replay.Params, dryRun bool) error {
	bar := newProgress(os.Stdout, "read")
	p.DryRun = true
	if bar.terminal {
		p.Progress = func(pr replay.Progress) { bar.update(pr.Read) }
	}
	pr, err := replay.Run(ctx, cfg, p)
	bar.end()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("interrupted: counted %d events to replay before it; nothing replayed", pr.Matched)
		}
		return err
	}
	fmt.Printf("would replay %d events: %s\n", pr.Matched, replaySummary(pr, p))
	if dryRun {
		fmt.Println("--dry-run: nothing replayed")
	} else {
		fmt.Println("nothing replayed: give --yes to replay them")
	}
	return nil
}

// replaySummary says what a replay read, where from, what it chose and,
// unless it was a dry run, what the store did with them.
func replaySummary(pr replay.Progress, p replay.Params) string {
	s := fmt.Sprintf("read %d", pr.Read)
	if p.Archive {
		s += fmt.Sprintf(" (%d only in the archive, %d in the table and the archive: sent once)", pr.Archived, pr.Both)
	}
	s += fmt.Sprintf(", matched %d", pr.Matched)
	if p.Endpoint != uuid.Nil {
		s += " (those the endpoint's types and filter want)"
		if pr.FilterErrors > 0 {
			s += fmt.Sprintf(", %d its filter failed on (not sent)", pr.FilterErrors)
		}
	}
	if !p.DryRun {
		s += fmt.Sprintf(", requeued %d, inserted %d, skipped %d (still pending, leased or failed: left alone)", pr.Requeued, pr.Inserted, pr.Skipped)
	}
	if pr.Last != uuid.Nil {
		s += "; last id " + pr.Last.String()
	}
	return s
}

// runReplay is replay --yes: the replay, its progress on a terminal, and
// what it did, or how to resume it. resume are the flags that make the
// same replay beside --after: the window's end and the name, when the
// command chose them.
func runReplay(ctx context.Context, cfg replay.Config, p replay.Params, resume string) error {
	bar := newProgress(os.Stdout, "read")
	if bar.terminal {
		p.Progress = func(pr replay.Progress) { bar.update(pr.Read) }
	}
	pr, err := replay.Run(ctx, cfg, p)
	bar.end()
	done := fmt.Sprintf("replayed %d events", pr.Requeued+pr.Inserted)
	if err != nil {
		if pr.Last != uuid.Nil {
			resume = " --after " + pr.Last.String() + resume
		}
		again := "run the same command again"
		if resume != "" {
			again += " with" + resume
		}
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("interrupted: %s (%s), each batch whole; to replay the rest, %s", done, replaySummary(pr, p), again)
		}
		return fmt.Errorf("%s (%s), then: %w; to replay the rest, %s", done, replaySummary(pr, p), err, again)
	}
	fmt.Printf("%s: %s\n", done, replaySummary(pr, p))
	return nil
}
