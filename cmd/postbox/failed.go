package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/store"
)

// failedCommands are the subcommands of "postbox failed".
var failedCommands = map[string]command{
	"list":  {summary: "list failed events, the most recent first (--group-by error: their groups by error)", setup: setupFailedList},
	"show":  {summary: "show one event: payload, headers, attempts, last error, times", setup: setupFailedShow, args: "ID"},
	"retry": {summary: "send failed events back to the queue, as never attempted: running relays deliver them", setup: setupFailedRetry, args: "[ID...]"},
	"purge": {summary: "delete failed events that failed longer ago than --older-than", setup: setupFailedPurge},
}

// batchSizeEnv sets the batch size of retry and purge (default and most:
// store.FailedBatchMax). It is left out of --help on purpose: tests use it
// to see several batches, and operators have no reason to.
const batchSizeEnv = "POSTBOX_FAILED_BATCH_SIZE"

// failedEventJSON is one event in the JSON of "failed list" and "failed
// show".
type failedEventJSON struct {
	ID uuid.UUID `json:"id"`
	// Endpoint and EndpointName name the webhook endpoint of a failed
	// delivery (--endpoint); absent for an outbox event.
	Endpoint      *uuid.UUID        `json:"endpoint,omitempty"`
	EndpointName  string            `json:"endpoint_name,omitempty"`
	Status        string            `json:"status"`
	EventType     string            `json:"event_type"`
	AggregateType string            `json:"aggregate_type"`
	AggregateID   string            `json:"aggregate_id"`
	Attempts      int               `json:"attempts"`
	LastError     string            `json:"last_error"`
	CreatedAt     time.Time         `json:"created_at"`
	FailedAt      *time.Time        `json:"failed_at,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	Payload       json.RawMessage   `json:"payload"`
}

func eventJSON(r store.Record, names endpointNames) failedEventJSON {
	e := failedEventJSON{
		ID: r.ID, Status: r.Status, EventType: r.EventType, AggregateType: r.AggregateType, AggregateID: r.AggregateID,
		Attempts: r.Attempts, LastError: r.LastError, CreatedAt: r.CreatedAt.UTC(), Headers: r.Headers, Payload: r.Payload,
	}
	if r.Status == store.StatusFailed && !r.ProcessedAt.IsZero() {
		at := r.ProcessedAt.UTC()
		e.FailedAt = &at
	}
	if r.Endpoint != uuid.Nil {
		id := r.Endpoint
		e.Endpoint, e.EndpointName = &id, names[id]
	}
	return e
}

// endpointNames are the names of the endpoints by id; an endpoint without
// a name is named by its id.
type endpointNames map[uuid.UUID]string

// name is how a table shows endpoint id.
func (n endpointNames) name(id uuid.UUID) string {
	if name, ok := n[id]; ok && name != "" {
		return name
	}
	return id.String()
}

// endpointFlag is --endpoint of the dead-letter commands: where they look,
// the outbox (not given) or webhook endpoints' failed deliveries.
type endpointFlag struct {
	value string
	set   bool
}

func (f *endpointFlag) String() string { return f.value }

func (f *endpointFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty: give an endpoint's id or name, or all")
	}
	f.value, f.set = v, true
	return nil
}

func (f *endpointFlag) register(fs *flag.FlagSet, verb string) {
	fs.Var(f, "endpoint", "work on the failed deliveries of this webhook endpoint (its id or name), or of every endpoint (all), instead of the outbox's failed events: "+verb+" (endpoints mode)")
}

// resolve returns the FailedFilter.Endpoint of the flag (uuid.Nil when not
// given: the outbox) and the names of the endpoints of s.
func (f *endpointFlag) resolve(ctx context.Context, s *dburl.DB) (uuid.UUID, endpointNames, error) {
	names := endpointNames{}
	if !f.set {
		return uuid.Nil, names, nil
	}
	es := s.Endpoints
	all, err := es.EndpointList(ctx)
	if err != nil {
		return uuid.Nil, nil, err
	}
	for _, e := range all {
		names[e.ID] = e.Name
	}
	if f.value == "all" {
		return store.AnyEndpoint, names, nil
	}
	e, err := findEndpoint(ctx, es, f.value)
	if err != nil {
		return uuid.Nil, nil, fmt.Errorf("--endpoint: %w", err)
	}
	return e.ID, names, nil
}

// what names the failed rows the commands act on: events, or deliveries.
func (f *endpointFlag) what() string {
	if f.set {
		return "failed deliveries"
	}
	return "failed events"
}

// ageFlag is a duration flag that also takes days ("7d").
type ageFlag struct {
	d   time.Duration
	set bool
}

func (a *ageFlag) String() string {
	if a == nil || !a.set {
		return ""
	}
	return a.d.String()
}

func (a *ageFlag) Set(s string) error {
	if s == "" {
		return errors.New("empty: want a duration such as 90m, 12h or 7d")
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseFloat(n, 64)
		if err != nil || days < 0 {
			return fmt.Errorf("%q: want a duration such as 90m, 12h or 7d", s)
		}
		a.d, a.set = time.Duration(days*float64(24*time.Hour)), true
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("%q: want a duration such as 90m, 12h or 7d", s)
	}
	a.d, a.set = d, true
	return nil
}

// ago is when, d ago; zero when the flag is not set.
func (a *ageFlag) ago() time.Time {
	if !a.set {
		return time.Time{}
	}
	return time.Now().Add(-a.d)
}

func setupFailedList(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	var since, olderThan ageFlag
	eventType := fs.String("type", "", "only events of this type")
	fs.Var(&since, "since", "only events that failed within this duration (90m, 12h, 7d)")
	fs.Var(&olderThan, "older-than", "only events that failed longer ago than this duration")
	limit := fs.Int("limit", store.FailedListLimitDefault, fmt.Sprintf("most events listed (at most %d)", store.FailedListLimitMax))
	after := fs.String("after", "", "list the page after this cursor (printed under the previous page, or its JSON \"next\")")
	groupBy := fs.String("group-by", "", "\"error\": list the groups of failures by error fingerprint instead, with counts, first and last seen")
	scan := fs.Int("scan", store.FailedGroupsScanDefault, "--group-by error reads at most this many failed events, the most recent first")
	asJSON := fs.Bool("json", false, "print JSON")
	var ep endpointFlag
	ep.register(fs, "list them, each with its endpoint, or group them by error across endpoints")
	return func(ctx context.Context) error {
		if err := positive(fs, "limit", "scan"); err != nil {
			return err
		}
		if *limit > store.FailedListLimitMax || *scan > store.FailedGroupsScanMax {
			return fmt.Errorf("%w: --limit %d, --scan %d: at most %d and %d", errUsage, *limit, *scan, store.FailedListLimitMax, store.FailedGroupsScanMax)
		}
		cursor, err := store.ParseFailedCursor(*after)
		if err != nil {
			return fmt.Errorf("%w: --after: %v", errUsage, err)
		}
		filter := store.FailedFilter{EventType: *eventType, FailedSince: since.ago(), FailedBefore: olderThan.ago()}
		if *groupBy != "" && *groupBy != "error" {
			return fmt.Errorf("%w: --group-by %q: the one grouping is \"error\"", errUsage, *groupBy)
		}
		s, err := db.open(ctx, "failed list", true)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Outbox.CheckSchema(ctx, store.SchemaParams{}); err != nil {
			return err
		}
		var names endpointNames
		if filter.Endpoint, names, err = ep.resolve(ctx, s); err != nil {
			return err
		}
		if *groupBy == "error" {
			groups, err := s.Outbox.FailedGroups(ctx, store.FailedGroupsParams{FailedFilter: filter, Scan: *scan})
			if err != nil {
				return err
			}
			return printGroups(os.Stdout, groups, *asJSON, ep.set)
		}
		page, err := s.Outbox.FailedList(ctx, store.FailedListParams{FailedFilter: filter, After: cursor, Limit: *limit})
		if err != nil {
			return err
		}
		if err := printFailedPage(os.Stdout, page, *asJSON, names, ep.set); err != nil {
			return err
		}
		if !ep.set && !*asJSON {
			return hintEndpointFailures(ctx, os.Stdout, s.Outbox)
		}
		return nil
	}
}

// printFailedPage prints a page of failed events, or of failed deliveries
// (deliveries), each with its endpoint named from names.
func printFailedPage(w io.Writer, page store.FailedPage, asJSON bool, names endpointNames, deliveries bool) error {
	if asJSON {
		out := struct {
			Events []failedEventJSON `json:"events"`
			Next   string            `json:"next,omitempty"`
		}{Events: []failedEventJSON{}, Next: page.Next.String()}
		for _, r := range page.Events {
			out.Events = append(out.Events, eventJSON(r, names))
		}
		return writeJSON(w, out)
	}
	if len(page.Events) == 0 {
		if deliveries {
			fmt.Fprintln(w, "no failed deliveries")
		} else {
			fmt.Fprintln(w, "no failed events")
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if deliveries {
		fmt.Fprintln(tw, "ID\tENDPOINT\tTYPE\tATTEMPTS\tFAILED\tLAST ERROR")
	} else {
		fmt.Fprintln(tw, "ID\tTYPE\tATTEMPTS\tFAILED\tLAST ERROR")
	}
	for _, r := range page.Events {
		if deliveries {
			fmt.Fprintf(tw, "%s\t%s\t", r.ID, oneLine(names.name(r.Endpoint), 40))
		} else {
			fmt.Fprintf(tw, "%s\t", r.ID)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", oneLine(r.EventType, 100), r.Attempts, age(r.ProcessedAt), oneLine(r.LastError, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !page.Next.IsZero() {
		fmt.Fprintf(w, "more: add --after %s for the next page\n", page.Next)
	}
	return nil
}

// hintEndpointFailures says, under a list of the outbox's failed events,
// when endpoints' deliveries failed too: they are listed apart.
func hintEndpointFailures(ctx context.Context, w io.Writer, dl store.DeadLetters) error {
	page, err := dl.FailedList(ctx, store.FailedListParams{FailedFilter: store.FailedFilter{Endpoint: store.AnyEndpoint}, Limit: 1})
	if err != nil || len(page.Events) == 0 {
		return err
	}
	fmt.Fprintln(w, "endpoints' deliveries failed too: postbox failed list --endpoint all lists them")
	return nil
}

func printGroups(w io.Writer, g store.FailedGroups, asJSON, deliveries bool) error {
	if asJSON {
		out := struct {
			Groups   []store.FailureGroup `json:"groups"`
			Scanned  int                  `json:"scanned"`
			Complete bool                 `json:"complete"`
		}{Groups: g.Groups, Scanned: g.Scanned, Complete: g.Complete}
		if out.Groups == nil {
			out.Groups = []store.FailureGroup{}
		}
		return writeJSON(w, out)
	}
	what, flag := "events", ""
	if deliveries {
		what, flag = "deliveries", " --endpoint E"
	}
	if len(g.Groups) == 0 {
		fmt.Fprintln(w, "no failed "+what)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCOUNT\tFIRST SEEN\tLAST SEEN\tERROR")
	for _, gr := range g.Groups {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", gr.ID, gr.Count, age(gr.FirstSeen), age(gr.LastSeen), oneLine(gr.Fingerprint, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !g.Complete {
		fmt.Fprintf(w, "counts are those of the %d most recent failed %s; more failed earlier (--scan reads more)\n", g.Scanned, what)
	}
	fmt.Fprintf(w, "retry or purge a group: postbox failed retry%[1]s --group GROUP, postbox failed purge%[1]s --group GROUP --older-than D\n", flag)
	return nil
}

// age is how long ago t was, rounded for a table: "42s ago", "5m ago",
// "3h ago", "2d ago".
func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// oneLine is s on one line (wholeLine), cut to at most n characters.
func oneLine(s string, n int) string {
	s = wholeLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// wholeLine is s on one line, its runs of white space made one space, made
// printable.
func wholeLine(s string) string { return printable.String(strings.Join(strings.Fields(s), " ")) }

func setupFailedShow(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	asJSON := fs.Bool("json", false, "print JSON: the outbox's event, or with --endpoint an array of the event's failed deliveries (the text shows both)")
	var ep endpointFlag
	ep.register(fs, "show each endpoint's failed delivery of the event")
	return func(ctx context.Context) error {
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: give one event id", errUsage)
		}
		id, err := uuid.Parse(fs.Arg(0))
		if err != nil {
			return fmt.Errorf("%w: %q is not an event id (a UUID)", errUsage, fs.Arg(0))
		}
		s, err := db.open(ctx, "failed show", true)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Outbox.CheckSchema(ctx, store.SchemaParams{}); err != nil {
			return err
		}
		if ep.set {
			return showDeliveries(ctx, s, &ep, id, *asJSON)
		}
		r, err := s.Outbox.Get(ctx, id)
		inOutbox := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if *asJSON {
			if !inOutbox {
				return fmt.Errorf("no event %s in the outbox (delivered and deleted, purged, or never written; --endpoint all shows its failed deliveries to endpoints)", id)
			}
			return writeJSON(os.Stdout, eventJSON(r, nil))
		}
		if inOutbox {
			printRecord(os.Stdout, r, nil)
		}
		// In endpoints mode the outbox's row is done (or gone) once fanned
		// out: the event's failures are its deliveries'.
		ep = endpointFlag{value: "all", set: true}
		endpointID, names, err := ep.resolve(ctx, s)
		if err != nil || len(names) == 0 {
			if !inOutbox && err == nil {
				err = fmt.Errorf("no event %s in the outbox (delivered and deleted, purged, or never written)", id)
			}
			return err
		}
		records, err := failedDeliveries(ctx, s.Outbox, endpointID, id)
		if err != nil {
			return err
		}
		if !inOutbox && len(records) == 0 {
			return fmt.Errorf("no event %s in the outbox, nor a failed delivery of it to an endpoint (delivered and deleted, purged, or never written)", id)
		}
		for _, r := range records {
			fmt.Println()
			printRecord(os.Stdout, r, names)
		}
		return nil
	}
}

// showDeliveries is failed show --endpoint: each failed delivery of event
// id to the endpoints of ep.
func showDeliveries(ctx context.Context, s *dburl.DB, ep *endpointFlag, id uuid.UUID, asJSON bool) error {
	endpointID, names, err := ep.resolve(ctx, s)
	if err != nil {
		return err
	}
	records, err := failedDeliveries(ctx, s.Outbox, endpointID, id)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]failedEventJSON, len(records))
		for i, r := range records {
			out[i] = eventJSON(r, names)
		}
		return writeJSON(os.Stdout, out)
	}
	if len(records) == 0 {
		return fmt.Errorf("no failed delivery of event %s to %s (delivered, retried, purged, or never written)", id, ep.value)
	}
	for i, r := range records {
		if i > 0 {
			fmt.Println()
		}
		printRecord(os.Stdout, r, names)
	}
	return nil
}

// failedDeliveries returns the failed deliveries of event id to endpoint
// (an id, or store.AnyEndpoint), the most recent failure first: it reads
// the endpoints' failed deliveries page by page, as failed list does.
func failedDeliveries(ctx context.Context, dl store.DeadLetters, endpoint, id uuid.UUID) ([]store.Record, error) {
	var out []store.Record
	var after store.FailedCursor
	for {
		page, err := dl.FailedList(ctx, store.FailedListParams{FailedFilter: store.FailedFilter{Endpoint: endpoint}, After: after, Limit: store.FailedListLimitMax})
		if err != nil {
			return nil, err
		}
		for _, r := range page.Events {
			if r.ID == id {
				out = append(out, r)
			}
		}
		if page.Next.IsZero() {
			return out, nil
		}
		after = page.Next
	}
}

// printRecord prints one outbox event, or one endpoint's delivery of it
// (its endpoint named from names).
func printRecord(w io.Writer, r store.Record, names endpointNames) {
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000 UTC") + " (" + age(t) + ")"
	}
	fmt.Fprintf(w, "id          %s\n", r.ID)
	if r.Endpoint != uuid.Nil {
		fmt.Fprintf(w, "endpoint    %s (%s)\n", printable.String(names.name(r.Endpoint)), r.Endpoint)
	}
	fmt.Fprintf(w, "status      %s\n", printable.String(r.Status))
	fmt.Fprintf(w, "event type  %s\n", printable.String(r.EventType))
	fmt.Fprintf(w, "aggregate   %s %s\n", printable.String(r.AggregateType), printable.String(r.AggregateID))
	fmt.Fprintf(w, "attempts    %d\n", r.Attempts)
	fmt.Fprintf(w, "created     %s\n", stamp(r.CreatedAt))
	switch r.Status {
	case store.StatusFailed:
		fmt.Fprintf(w, "failed      %s\n", stamp(r.ProcessedAt))
	case store.StatusDone:
		fmt.Fprintf(w, "delivered   %s\n", stamp(r.ProcessedAt))
	default:
		fmt.Fprintf(w, "due         %s\n", stamp(r.AvailableAt))
	}
	if r.LeaseOwner != "" {
		fmt.Fprintf(w, "leased to   %s until %s\n", printable.String(r.LeaseOwner), stamp(r.LeaseExpiresAt))
	}
	if r.DedupKey != "" {
		fmt.Fprintf(w, "dedup key   %s\n", printable.String(r.DedupKey))
	}
	lastError := r.LastError
	if lastError == "" {
		lastError = "-"
	}
	fmt.Fprintf(w, "last error  %s\n", printable.String(lastError))
	fmt.Fprintln(w, "headers")
	keys := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", printable.String(k), printable.String(r.Headers[k]))
	}
	if len(keys) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	fmt.Fprintln(w, "payload")
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, r.Payload, "", "  "); err != nil {
		pretty.Reset()
		pretty.Write(r.Payload)
	}
	fmt.Fprintln(w, printableLines(pretty.String()))
}

// selectionFlags are the selectors of retry and purge.
type selectionFlags struct {
	all       bool
	eventType string
	group     string
	olderThan ageFlag
}

func (f *selectionFlags) register(fs *flag.FlagSet, withAll bool) {
	if withAll {
		fs.BoolVar(&f.all, "all", false, "every failed event")
	}
	fs.StringVar(&f.eventType, "type", "", "the failed events of this type")
	fs.StringVar(&f.group, "group", "", "the failed events of this error group (the GROUP column of \"postbox failed list --group-by error\")")
}

// batchSize is the batch size batchSizeEnv sets; 0 for the default.
func batchSize() (int, error) {
	v, ok := os.LookupEnv(batchSizeEnv)
	if !ok || v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > store.FailedBatchMax {
		return 0, fmt.Errorf("%w: $%s %q: want 1 to %d", errUsage, batchSizeEnv, v, store.FailedBatchMax)
	}
	return n, nil
}

func setupFailedRetry(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	var sel selectionFlags
	sel.register(fs, true)
	var ep endpointFlag
	ep.register(fs, "send them back to their endpoints' queues")
	return func(ctx context.Context) error {
		if err := refuseEmpty(fs, "type", "group"); err != nil {
			return err
		}
		var ids []uuid.UUID
		for _, a := range fs.Args() {
			id, err := uuid.Parse(a)
			if err != nil {
				return fmt.Errorf("%w: %q is not an event id (a UUID)", errUsage, a)
			}
			ids = append(ids, id)
		}
		chosen := 0
		for _, set := range []bool{sel.all, sel.eventType != "", sel.group != "", len(ids) > 0} {
			if set {
				chosen++
			}
		}
		if chosen != 1 {
			return fmt.Errorf("%w: say which %s to retry: --all, --type T, --group G or event ids (one of them)", errUsage, ep.what())
		}
		if sel.group != "" && !store.ValidGroupID(sel.group) {
			return fmt.Errorf("%w: --group %q: a group is 12 hex digits (postbox failed list --group-by error)", errUsage, sel.group)
		}
		s, err := db.open(ctx, "failed retry", false)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Outbox.CheckSchema(ctx, store.SchemaParams{}); err != nil {
			return err
		}
		endpoint, _, err := ep.resolve(ctx, s)
		if err != nil {
			return err
		}
		return retryFailed(ctx, s.Outbox, store.FailedSelection{All: sel.all, IDs: ids, Group: sel.group,
			FailedFilter: store.FailedFilter{Endpoint: endpoint, EventType: sel.eventType}}, ep.what())
	}
}

// retryFailed is failed retry (and endpoints retry): it sends the failed
// events or deliveries (what) sel selects back to their queue, batch by
// batch, showing its progress.
func retryFailed(ctx context.Context, dl store.DeadLetters, sel store.FailedSelection, what string) error {
	batch, err := batchSize()
	if err != nil {
		return err
	}
	p := newProgress(os.Stdout, "retried")
	n, err := dl.FailedRetry(ctx, store.FailedRetryParams{FailedSelection: sel, BatchSize: batch, Progress: p.update})
	p.end()
	if err != nil {
		return stoppedError("retried", "retry", what, n, err)
	}
	fmt.Printf("retried %d %s: they are pending again, and running relays deliver them\n", n, what)
	return nil
}

func setupFailedPurge(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	var sel selectionFlags
	sel.register(fs, false)
	fs.Var(&sel.olderThan, "older-than", "required: delete the events that failed longer ago than this duration (90m, 12h, 7d)")
	dryRun := fs.Bool("dry-run", false, fmt.Sprintf("delete nothing: say how many failed events would be deleted, and list the %d most recent", dryRunListed))
	var ep endpointFlag
	ep.register(fs, "delete them")
	return func(ctx context.Context) error {
		if err := refuseEmpty(fs, "type", "group"); err != nil {
			return err
		}
		if !sel.olderThan.set {
			return fmt.Errorf("%w: --older-than is required (such as 30d; 0s for every failed event)", errUsage)
		}
		if sel.eventType != "" && sel.group != "" {
			return fmt.Errorf("%w: give --type or --group, not both", errUsage)
		}
		if sel.group != "" && !store.ValidGroupID(sel.group) {
			return fmt.Errorf("%w: --group %q: a group is 12 hex digits (postbox failed list --group-by error)", errUsage, sel.group)
		}
		batch, err := batchSize()
		if err != nil {
			return err
		}
		s, err := db.open(ctx, "failed purge", false)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Outbox.CheckSchema(ctx, store.SchemaParams{}); err != nil {
			return err
		}
		endpoint, names, err := ep.resolve(ctx, s)
		if err != nil {
			return err
		}
		selection := store.FailedSelection{Group: sel.group,
			FailedFilter: store.FailedFilter{Endpoint: endpoint, EventType: sel.eventType, FailedBefore: sel.olderThan.ago()}}
		if *dryRun {
			return previewPurge(ctx, os.Stdout, s.Outbox, selection, names, ep.what())
		}
		p := newProgress(os.Stdout, "purged")
		n, err := s.Outbox.FailedPurge(ctx, store.FailedPurgeParams{
			FailedSelection: selection,
			BatchSize:       batch,
			Progress:        p.update,
		})
		p.end()
		if err != nil {
			return stoppedError("purged", "purge", ep.what(), n, err)
		}
		fmt.Printf("purged %d %s\n", n, ep.what())
		return nil
	}
}

// refuseEmpty refuses each flag of names that was given an empty value,
// on the command line or by its environment variable (an unset shell
// variable, --group "$G"): a command that deletes or retries would read it
// as no filter, and act on more than was meant.
func refuseEmpty(fs *flag.FlagSet, names ...string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && slices.Contains(names, f.Name) && f.Value.String() == "" {
			err = fmt.Errorf("%w: --%s ($%s) is empty: give a value, or leave the flag out", errUsage, f.Name, envName(f.Name))
		}
	})
	return err
}

// dryRunListed is how many events purge --dry-run lists.
const dryRunListed = 20

// previewPurge is purge --dry-run: it reads the failed events sel selects,
// as the purge would, and prints how many there are and the dryRunListed
// most recent.
func previewPurge(ctx context.Context, w io.Writer, dl store.DeadLetters, sel store.FailedSelection, names endpointNames, what string) error {
	n, first, err := selectFailed(ctx, dl, sel, dryRunListed)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "would purge %d %s (--dry-run: nothing deleted)\n", n, what)
	if n == 0 {
		return nil
	}
	if err := printFailedPage(w, store.FailedPage{Events: first}, false, names, sel.Endpoint != uuid.Nil); err != nil {
		return err
	}
	if more := n - len(first); more > 0 {
		fmt.Fprintf(w, "… and %d more\n", more)
	}
	return nil
}

// selectFailed counts the failed events sel selects (its filter and group;
// not its IDs), reading them page by page, the most recent failure first,
// and returns the first keep of them.
func selectFailed(ctx context.Context, dl store.DeadLetters, sel store.FailedSelection, keep int) (n int, first []store.Record, err error) {
	var after store.FailedCursor
	for {
		page, err := dl.FailedList(ctx, store.FailedListParams{FailedFilter: sel.FailedFilter, After: after, Limit: store.FailedListLimitMax})
		if err != nil {
			return n, first, err
		}
		for _, r := range page.Events {
			if sel.Group != "" && store.ErrorGroupID(store.ErrorFingerprint(r.LastError)) != sel.Group {
				continue
			}
			n++
			if len(first) < keep {
				first = append(first, r)
			}
		}
		if page.Next.IsZero() {
			return n, first, nil
		}
		after = page.Next
	}
}

// stoppedError says how far a retry or purge went before err stopped it,
// and that running it again carries on.
func stoppedError(done, verb, what string, n int, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted: %s %d %s, each batch whole; run the same command again to %s the rest", done, n, what, verb)
	}
	return fmt.Errorf("%s %d %s, then: %w; run the same command again to %s the rest", done, n, what, err, verb)
}

// progress shows how many events a retry or purge changed so far: one line
// redrawn after each batch on a terminal, a line per batch otherwise.
type progress struct {
	w        io.Writer
	verb     string
	terminal bool
	drawn    bool
}

func newProgress(f *os.File, verb string) *progress {
	return &progress{w: f, verb: verb, terminal: isTerminal(f)}
}

func (p *progress) update(done int) {
	if p.terminal {
		fmt.Fprintf(p.w, "\r\033[K%s %d so far (Ctrl-C stops after this batch)", p.verb, done)
		p.drawn = true
		return
	}
	fmt.Fprintf(p.w, "%s %d so far\n", p.verb, done)
}

// end ends the redrawn line.
func (p *progress) end() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
