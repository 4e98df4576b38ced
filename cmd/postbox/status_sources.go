package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/fleet"
	"github.com/postbox-go/postbox/store"
)

// sourceStatusJSON is one source in "postbox status --sources --json".
type sourceStatusJSON struct {
	Name   string `json:"name"`
	DB     string `json:"db"` // without its password
	Schema string `json:"schema"`
	// Error says why the source could not be read (unreachable, not
	// migrated); the counts are then zero.
	Error                   string  `json:"error,omitempty"`
	Pending                 int64   `json:"pending"`
	Processing              int64   `json:"processing"`
	Failed                  int64   `json:"failed"`
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
	// Relays counts the live relays in the source's presence table.
	Relays int `json:"relays"`
	// SinkDown: a live relay of the source finds its sink down.
	SinkDown bool `json:"sink_down"`
}

// sourceStatusTimeout bounds reading one source.
const sourceStatusTimeout = 10 * time.Second

// sourceStatusReaders is how many sources are read at once.
const sourceStatusReaders = 8

// sourcesStatus reads every source of list, sourceStatusReaders at a
// time, each database's schemas on one pool.
func sourcesStatus(ctx context.Context, list []fleet.Source) []sourceStatusJSON {
	pools := dburl.NewPools(dburl.Options{ApplicationName: "postbox status", MustExist: true}, sourceStatusReaders)
	out := make([]sourceStatusJSON, len(list))
	work := make(chan int)
	var readers sync.WaitGroup
	for range min(sourceStatusReaders, len(list)) {
		readers.Go(func() {
			for i := range work {
				out[i] = sourceStatus(ctx, pools, list[i])
			}
		})
	}
	for i := range list {
		work <- i
	}
	close(work)
	readers.Wait()
	return out
}

// sourceStatus reads one source.
func sourceStatus(ctx context.Context, pools *dburl.Pools, src fleet.Source) sourceStatusJSON {
	st := sourceStatusJSON{Name: src.Name, DB: dburl.Redact(src.DB), Schema: src.Schema}
	ctx, cancel := context.WithTimeout(ctx, sourceStatusTimeout)
	defer cancel()
	db, err := pools.Open(ctx, src.DB, src.Schema)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	defer db.Close()
	fail := func(err error) sourceStatusJSON {
		st.Error = dburl.Scrub(err, src.DB).Error()
		return st
	}
	if err := db.Outbox.CheckSchema(ctx, store.SchemaParams{}); err != nil {
		return fail(err)
	}
	stats, err := db.Outbox.Stats(ctx)
	if err != nil {
		return fail(err)
	}
	st.Pending, st.Processing, st.Failed = stats.Pending, stats.Processing, stats.Failed
	st.OldestPendingAgeSeconds = stats.OldestPendingAge.Seconds()
	rows, err := db.Presence.RelayPresences(ctx)
	if err != nil {
		return fail(err)
	}
	relays, down := relaysOf(rows)
	for _, r := range relays {
		if !r.Stale {
			st.Relays++
		}
	}
	st.SinkDown = down
	return st
}

// printSourcesStatus prints the table of status --sources, or its JSON;
// with check, a source that could not be read or whose sink is down is
// errSinkDown.
func printSourcesStatus(w io.Writer, sts []sourceStatusJSON, asJSON, check bool) error {
	var err error
	if asJSON {
		err = writeJSON(w, sts)
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SOURCE\tDATABASE\tSCHEMA\tPENDING\tPROCESSING\tFAILED\tOLDEST PENDING\tRELAYS\tSTATE")
		for _, s := range sts {
			state := "ok"
			switch {
			case s.Error != "":
				state = "cannot read: " + oneLine(s.Error, 120)
			case s.SinkDown:
				state = "SINK DOWN"
			case s.Relays == 0:
				state = "no live relay"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\n", oneLine(s.Name, 64), oneLine(s.DB, 80), s.Schema,
				s.Pending, s.Processing, s.Failed, seconds(s.OldestPendingAgeSeconds).Round(time.Millisecond), s.Relays, state)
		}
		err = tw.Flush()
	}
	if err != nil || !check {
		return err
	}
	for _, s := range sts {
		if s.Error != "" || s.SinkDown {
			return errSourcesDown
		}
	}
	return nil
}

// errSourcesDown is status --sources --check's error: exit code
// exitSinkDown.
var errSourcesDown = fmt.Errorf("%w, or a source cannot be read (see the table above)", errSinkDown)

// statusSources is postbox status --sources or --sources-query.
func statusSources(ctx context.Context, s *sourcesFlags, db *dbFlags, asJSON, check bool) error {
	// Status reads the outboxes only: a source's sink does not matter, and
	// one that names none is not refused.
	d := fleet.Defaults{Schema: db.schema, Sink: "none"}
	list, closeList, err := s.lister(ctx, db, d)
	if err != nil {
		return err
	}
	defer closeList()
	sources, err := list(ctx)
	if err != nil {
		return err
	}
	return printSourcesStatus(os.Stdout, sourcesStatus(ctx, sources), asJSON, check)
}
