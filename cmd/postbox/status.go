package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/relay/presence"
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
	// SinkDown: a live relay (its row not stale) finds its sink down.
	SinkDown bool `json:"sink_down"`
	// Relays are the relays' rows in the presence table, the one started
	// first first.
	Relays []relayJSON `json:"relays"`
	// EndpointDeliveries sums up the deliveries of Endpoints, when there
	// are endpoints (endpoints mode): the outbox's counts above are those
	// of the events the fan-out has yet to write deliveries for.
	EndpointDeliveries *deliveriesJSON `json:"endpoint_deliveries,omitempty"`
	// Endpoints are the webhook endpoints' deliveries, the oldest endpoint
	// first.
	Endpoints []endpointStatusJSON `json:"endpoints,omitempty"`
}

// deliveriesJSON counts endpoint deliveries by status.
type deliveriesJSON struct {
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Failed     int64 `json:"failed"`
	Dropped    int64 `json:"dropped"`
	// OldestPendingAgeSeconds is the age of the oldest pending delivery
	// (due or waiting for a retry); 0 when there is none.
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
}

// endpointStatusJSON is one endpoint in status.
type endpointStatusJSON struct {
	ID     uuid.UUID `json:"id"`
	Name   string    `json:"name"`
	State  string    `json:"state"`
	Shadow bool      `json:"shadow"`
	deliveriesJSON
	// FailingSince is when the endpoint's current run of failed attempts
	// began (its relay's breaker pauses it, and disables it after
	// --disable-after); absent while its last attempt succeeded.
	FailingSince *time.Time `json:"failing_since,omitempty"`
	// BreakerOpenUntil is when the circuit breaker of the endpoint's lane
	// lets its next probe through, as the relay running the lane last
	// recorded it (past: probes are due, until one is delivered); absent
	// while the breaker is closed. A relay that stopped leaves it as it
	// was.
	BreakerOpenUntil *time.Time `json:"breaker_open_until,omitempty"`
}

// endpointsStatus reads the deliveries of every endpoint of s: nil when
// there is no endpoint.
func endpointsStatus(ctx context.Context, s store.Endpoints) (*deliveriesJSON, []endpointStatusJSON, error) {
	all, err := s.EndpointList(ctx)
	if err != nil || len(all) == 0 {
		return nil, nil, err
	}
	total := &deliveriesJSON{}
	out := make([]endpointStatusJSON, 0, len(all))
	for _, e := range all {
		c, err := s.DeliveryCounts(ctx, e.ID)
		if err != nil {
			return nil, nil, err
		}
		j := endpointStatusJSON{ID: e.ID, Name: e.Name, State: e.State, Shadow: e.Shadow, deliveriesJSON: deliveriesJSON{
			Pending: c.Pending, Processing: c.Processing, Failed: c.Failed, Dropped: c.Dropped,
			OldestPendingAgeSeconds: c.OldestPendingAge.Seconds()}}
		if !e.FailingSince.IsZero() {
			since := e.FailingSince
			j.FailingSince = &since
		}
		if !e.BreakerOpenUntil.IsZero() {
			until := e.BreakerOpenUntil
			j.BreakerOpenUntil = &until
		}
		total.Pending += c.Pending
		total.Processing += c.Processing
		total.Failed += c.Failed
		total.Dropped += c.Dropped
		total.OldestPendingAgeSeconds = max(total.OldestPendingAgeSeconds, j.OldestPendingAgeSeconds)
		out = append(out, j)
	}
	return total, out, nil
}

// relayJSON is one relay's row in the presence table.
type relayJSON struct {
	ID      string `json:"id"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Mode    string `json:"mode"`
	Sink    string `json:"sink"`
	Version string `json:"version"`
	// StartedAt and HeartbeatAt are the database's times.
	StartedAt           time.Time `json:"started_at"`
	HeartbeatAt         time.Time `json:"heartbeat_at"`
	HeartbeatAgeSeconds float64   `json:"heartbeat_age_seconds"`
	// Stale: the relay missed store.PresenceStaleBeats heartbeats (it
	// crashed, hangs or cannot reach the database): what its row says may
	// no longer hold.
	Stale bool `json:"stale"`
	// PrunedInSeconds, on a stale row, is how long until the running
	// relays delete it (presence.PrunedIn); 0: at their next prune.
	PrunedInSeconds *float64 `json:"pruned_in_seconds,omitempty"`
	// SinkDown: the relay found its sink unreachable, since SinkDownSince,
	// for SinkError.
	SinkDown      bool       `json:"sink_down"`
	SinkDownSince *time.Time `json:"sink_down_since,omitempty"`
	// SinkError is the error that began the relay's last outage of the
	// sink, kept after it ended.
	SinkError string `json:"sink_error,omitempty"`
}

// errSinkDown is status --check's error when a live relay finds its sink
// down: exit code exitSinkDown.
var errSinkDown = errors.New("the sink is down: a live relay finds it unreachable (see the relays above)")

// exitSinkDown is the exit code of status --check when the sink is down.
const exitSinkDown = 3

// relaysOf turns the presence table's rows into status' relays, and
// reports whether a live one finds its sink down.
func relaysOf(rows []store.RelayPresence) (relays []relayJSON, sinkDown bool) {
	relays = []relayJSON{}
	for _, p := range rows {
		r := relayJSON{ID: p.ID, Host: p.Host, PID: p.PID, Mode: p.Mode, Sink: p.Sink, Version: p.Version,
			StartedAt: p.StartedAt, HeartbeatAt: p.HeartbeatAt, HeartbeatAgeSeconds: p.HeartbeatAge.Seconds(),
			Stale: p.Stale(), SinkDown: p.SinkDown(), SinkError: p.SinkError}
		if r.SinkDown {
			since := p.SinkDownSince
			r.SinkDownSince = &since
		}
		if r.Stale {
			in := presence.PrunedIn(p).Seconds()
			r.PrunedInSeconds = &in
		}
		sinkDown = sinkDown || r.SinkDown && !r.Stale
		relays = append(relays, r)
	}
	return relays, sinkDown
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
	walSlot := fs.String("wal-slot", "", "the replication slot of relay --wal whose retained WAL is shown (default postbox_<database>_<schema>)")
	fs.Var(&watch, "watch", fmt.Sprintf("print again every interval (--watch, %v, or --watch 5s) until Ctrl-C", watchDefault))
	check := fs.Bool("check", false, fmt.Sprintf("exit with code %d (after printing) when a live relay finds the sink down (with --sources: or a source cannot be read); without it, status exits 0 whatever the state", exitSinkDown))
	var sources sourcesFlags
	sources.registerList(fs, "show many outboxes, one line each", "")
	return func(ctx context.Context) error {
		if sources.on() {
			if err := sources.checkList(&db); err != nil {
				return err
			}
			if watch.on || fs.NArg() > 0 {
				return fmt.Errorf("%w: --watch is not available with --sources yet", errUsage)
			}
			return statusSources(ctx, &sources, &db, *asJSON, *check)
		}
		if fs.NArg() > 1 || fs.NArg() == 1 && !watch.on {
			return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
		}
		if fs.NArg() == 1 {
			if err := watch.Set(fs.Arg(0)); err != nil {
				return fmt.Errorf("%w: --watch %v", errUsage, err)
			}
		}
		if *check && watch.on {
			return fmt.Errorf("%w: --check exits on the state it prints once: not with --watch", errUsage)
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
		if _, ok := s.Postgres(); ok {
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
			rows, err := s.Presence.RelayPresences(ctx)
			if err != nil {
				return statusJSON{}, err
			}
			out.Relays, out.SinkDown = relaysOf(rows)
			if out.EndpointDeliveries, out.Endpoints, err = endpointsStatus(ctx, s.Endpoints); err != nil {
				return statusJSON{}, err
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
			if err := printStatus(os.Stdout, st, *asJSON); err != nil {
				return err
			}
			if *check && st.SinkDown {
				return errSinkDown
			}
			return nil
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
		return writeJSON(w, st)
	}
	for _, r := range st.Relays {
		if r.SinkDown && !r.Stale {
			fmt.Fprintf(w, "SINK DOWN: relay %s finds %s unreachable since %s (%s ago): %s\n", printable.String(r.ID), printable.String(r.Sink),
				r.SinkDownSince.UTC().Format(time.RFC3339), since(*r.SinkDownSince), oneLine(r.SinkError, 200))
		}
	}
	if st.SinkDown {
		fmt.Fprintln(w)
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
	if d := st.EndpointDeliveries; d != nil {
		fmt.Fprintf(w, "endpoint deliveries  %d pending, %d processing, %d failed, oldest pending %s (%d endpoints, below)\n",
			d.Pending, d.Processing, d.Failed, seconds(d.OldestPendingAgeSeconds).Round(time.Millisecond), len(st.Endpoints))
	}
	printRelays(w, st.Relays, st.EndpointDeliveries != nil)
	printEndpointsStatus(w, st.Endpoints)
	if len(st.Types) == 0 && st.OtherTypes == nil {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "event type\tpending\tprocessing\tfailed\t")
	for _, t := range st.Types {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t\n", oneLine(t.EventType, 100), t.Pending, t.Processing, t.Failed)
	}
	if o := st.OtherTypes; o != nil {
		fmt.Fprintf(tw, "other (%d types)\t%d\t%d\t%d\t\n", o.Types, o.Pending, o.Processing, o.Failed)
	}
	return tw.Flush()
}

// seconds is a JSON number of seconds as a duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// printEndpointsStatus prints the endpoints section of status' text.
func printEndpointsStatus(w io.Writer, endpoints []endpointStatusJSON) {
	if len(endpoints) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "endpoint\tstate\tpending\tprocessing\tfailed\toldest pending\tfailing\tbreaker")
	for _, e := range endpoints {
		name := e.Name
		if name == "" {
			name = e.ID.String()
		}
		state := e.State
		if e.Shadow {
			state += ",shadow"
		}
		failing := "-"
		if e.FailingSince != nil {
			failing = "since " + e.FailingSince.UTC().Format(time.RFC3339) + " (" + since(*e.FailingSince) + ")"
		}
		oldest := "-"
		if e.Pending > 0 {
			oldest = roundAge(seconds(e.OldestPendingAgeSeconds))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", oneLine(name, 60), printable.String(state), e.Pending, e.Processing, e.Failed,
			oldest, failing, breakerText(e, time.Now()))
	}
	_ = tw.Flush()
}

// breakerText is an endpoint's breaker in status' text at now: "-" when
// the endpoint is not enabled (no lane runs for it: what a stopped lane
// recorded says nothing), closed, open while its pause runs, or probing
// once the pause ended: the breaker lets a probe through and stays open
// until one is delivered.
func breakerText(e endpointStatusJSON, now time.Time) string {
	switch until := e.BreakerOpenUntil; {
	case e.State != store.EndpointEnabled:
		return "-"
	case until == nil:
		return "closed"
	case until.After(now):
		return "open until " + until.UTC().Format(time.RFC3339) + " (next probe in " + roundAge(until.Sub(now)) + ")"
	default:
		return "open, probing since " + until.UTC().Format(time.RFC3339) + " (" + roundAge(now.Sub(*until)) + ")"
	}
}

// printRelays prints the relays section of status' text; endpoints says
// whether there are endpoint deliveries, which an endpoints-mode relay's
// state points to.
func printRelays(w io.Writer, relays []relayJSON, endpoints bool) {
	if len(relays) == 0 {
		fmt.Fprintln(w, "relays      none running (no relay has written its presence)")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "relay\tmode\tsink\theartbeat\tstate")
	for _, r := range relays {
		age := time.Duration(r.HeartbeatAgeSeconds * float64(time.Second))
		state := "sink up"
		if r.Mode == presence.ModeEndpoints {
			state = "fan-out up"
			if endpoints {
				state += "; each endpoint's deliveries below"
			}
		}
		switch {
		case r.Stale:
			state = "STALE: no heartbeat for " + roundAge(age) + " (crashed, hung, or cut off from the database); " + prunedIn(r)
		case r.SinkDown:
			state = fmt.Sprintf("sink down since %s (%s)", r.SinkDownSince.UTC().Format(time.RFC3339), oneLine(r.SinkError, 200))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\t%s\n", printable.String(r.ID), printable.String(r.Mode), printable.String(r.Sink), roundAge(age), state)
	}
	_ = tw.Flush()
}

// prunedIn says when the running relays delete a stale row.
func prunedIn(r relayJSON) string {
	if r.PrunedInSeconds == nil || *r.PrunedInSeconds == 0 {
		return "removed at the next prune of a running relay"
	}
	return "removed within " + roundAge(time.Duration(*r.PrunedInSeconds*float64(time.Second))) + " by a running relay"
}

// since is how long ago t was, rounded for people.
func since(t time.Time) string { return roundAge(time.Since(t)) }

// roundAge rounds d for people: tenths of seconds under a minute, seconds
// above.
func roundAge(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
