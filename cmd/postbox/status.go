package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// statusJSON is the output of "postbox status --json".
type statusJSON struct {
	Pending                 int64   `json:"pending"`
	Processing              int64   `json:"processing"`
	Done                    int64   `json:"done"`
	Failed                  int64   `json:"failed"`
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
	// Types are the unfinished events of the --types most numerous event
	// types; OtherTypes sums up the rest.
	Types      []store.TypeStats `json:"types"`
	OtherTypes *otherTypesJSON   `json:"other_types,omitempty"`
	// WALSlot is the replication slot of WAL mode (relay --wal), when it
	// exists.
	WALSlot *walSlotJSON `json:"wal_slot,omitempty"`
}

// walSlotJSON is the state of WAL mode's replication slot.
type walSlotJSON struct {
	Name string `json:"name"`
	// Active: a relay streams it.
	Active bool `json:"active"`
	// RetainedBytes is the WAL it keeps the server from recycling; it
	// grows while no relay streams the slot.
	RetainedBytes int64 `json:"retained_bytes"`
}

// otherTypesJSON sums up the event types left out of statusJSON.Types.
type otherTypesJSON struct {
	Types      int   `json:"types"`
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Failed     int64 `json:"failed"`
}

// watchDefault is the interval of --watch without one.
const watchDefault = 2 * time.Second

// watchFlag is --watch: a boolean flag ("--watch") that may carry an
// interval ("--watch=5s", or "--watch 5s" read from the arguments).
type watchFlag struct {
	on    bool
	every time.Duration
}

func (w *watchFlag) IsBoolFlag() bool { return true }

func (w *watchFlag) String() string {
	if w == nil || !w.on {
		return ""
	}
	return w.every.String()
}

func (w *watchFlag) Set(s string) error {
	if on, err := strconv.ParseBool(s); err == nil {
		w.on, w.every = on, watchDefault
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("%q: want an interval such as 5s", s)
	}
	w.on, w.every = true, d
	return nil
}

func setupStatus(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	asJSON := fs.Bool("json", false, "print JSON (with --watch: one object per line)")
	top := fs.Int("types", 10, "event types shown, the most numerous first; the rest are summed up as \"other\"")
	var watch watchFlag
	walSlot := fs.String("wal-slot", "", "the replication slot of relay --wal whose retained WAL is shown (default postbox_ and the schema)")
	fs.Var(&watch, "watch", fmt.Sprintf("print again every interval (--watch, %v, or --watch 5s) until Ctrl-C", watchDefault))
	return func(ctx context.Context) error {
		if fs.NArg() > 1 || fs.NArg() == 1 && !watch.on {
			return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
		}
		if fs.NArg() == 1 {
			if err := watch.Set(fs.Arg(0)); err != nil {
				return fmt.Errorf("%w: --watch %v", errUsage, err)
			}
		}
		if *top < 0 {
			return fmt.Errorf("%w: --types %d is negative", errUsage, *top)
		}
		s, err := db.open(ctx, "status", true)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Outbox.CheckSchema(ctx, store.SchemaParams{}); err != nil {
			return err
		}
		var wal *postgres.WAL
		if s.Postgres != nil {
			if wal, err = openWAL(s, *walSlot); err != nil {
				return err
			}
		}
		show := func(ctx context.Context) (statusJSON, error) {
			st, err := s.Outbox.Stats(ctx)
			if err != nil {
				return statusJSON{}, err
			}
			types, err := s.Outbox.StatsByType(ctx)
			if err != nil {
				return statusJSON{}, err
			}
			out := statusJSON{
				Pending: st.Pending, Processing: st.Processing, Done: st.Done, Failed: st.Failed,
				OldestPendingAgeSeconds: st.OldestPendingAge.Seconds(), Types: []store.TypeStats{},
			}
			for i, t := range types {
				if i < *top {
					out.Types = append(out.Types, t)
					continue
				}
				if out.OtherTypes == nil {
					out.OtherTypes = &otherTypesJSON{}
				}
				o := out.OtherTypes
				o.Types++
				o.Pending += t.Pending
				o.Processing += t.Processing
				o.Failed += t.Failed
			}
			if wal != nil {
				slot, err := wal.State(ctx)
				if err != nil {
					return statusJSON{}, err
				}
				if slot.Exists {
					out.WALSlot = &walSlotJSON{Name: wal.Slot(), Active: slot.Active, RetainedBytes: slot.RetainedBytes}
				}
			}
			return out, nil
		}
		if !watch.on {
			st, err := show(ctx)
			if err != nil {
				return err
			}
			return printStatus(os.Stdout, st, *asJSON)
		}
		return watchStatus(ctx, os.Stdout, watch.every, *asJSON, show)
	}
}

// watchStatus prints the status every interval until ctx is done (Ctrl-C,
// which ends it without an error): redrawn on a terminal, one block after
// another otherwise.
func watchStatus(ctx context.Context, f *os.File, every time.Duration, asJSON bool, show func(context.Context) (statusJSON, error)) error {
	terminal := isTerminal(f) && !asJSON
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		st, err := show(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case asJSON:
		case terminal:
			fmt.Fprint(f, "\033[H\033[2J")
			fmt.Fprintf(f, "every %v, Ctrl-C to stop  %s\n\n", every, time.Now().Format("15:04:05"))
		default:
			fmt.Fprintf(f, "-- %s\n", time.Now().UTC().Format(time.RFC3339))
		}
		if err := printStatus(f, st, asJSON); err != nil {
			return err
		}
		if !asJSON && !terminal {
			fmt.Fprintln(f)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func printStatus(w io.Writer, st statusJSON, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(st)
	}
	fmt.Fprintf(w, "pending     %d\nprocessing  %d\ndone        %d\nfailed      %d\noldest pending  %s\n",
		st.Pending, st.Processing, st.Done, st.Failed,
		time.Duration(st.OldestPendingAgeSeconds*float64(time.Second)).Round(time.Millisecond))
	if sl := st.WALSlot; sl != nil {
		streamed := "streamed by a relay"
		if !sl.Active {
			streamed = "NOT streamed: no relay runs with --wal; the server keeps its WAL until one does or the slot is dropped (postbox relay --wal-drop-slot)"
		}
		fmt.Fprintf(w, "wal slot    %s: %d bytes of WAL retained, %s\n", sl.Name, sl.RetainedBytes, streamed)
	}
	if len(st.Types) == 0 && st.OtherTypes == nil {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "event type\tpending\tprocessing\tfailed\t")
	for _, t := range st.Types {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t\n", t.EventType, t.Pending, t.Processing, t.Failed)
	}
	if o := st.OtherTypes; o != nil {
		fmt.Fprintf(tw, "other (%d types)\t%d\t%d\t%d\t\n", o.Types, o.Pending, o.Processing, o.Failed)
	}
	return tw.Flush()
}
