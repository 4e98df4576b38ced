package chaos

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
)

// printedLogLines is the most relay log messages Print shows.
const printedLogLines = 10

// NoFault is the row of the events produced outside every fault's slot.
const NoFault = "(none)"

// Report is the reconciliation of a run, computed from the database: from
// the rows the producers committed with their events and the rows the
// consumer committed with each application.
type Report struct {
	// Server is the database server's version and autovacuum setting.
	Server          string  `json:"server"`
	DurationSeconds float64 `json:"duration_seconds"`
	EventsPerSecond int     `json:"events_per_second"`
	Relays          int     `json:"relays"`
	// RandomFailures is the share of each endpoint's requests that
	// failed at random, in endpoints mode.
	RandomFailures float64 `json:"random_failures,omitempty"`
	Ordered        bool    `json:"ordered"`
	LeaseSeconds   float64 `json:"lease_seconds"`
	// Faults has a row per fault kind injected, and NoFault.
	// In endpoints mode an event counts as applied once when every
	// endpoint applied it exactly once, as lost when one endpoint never
	// did, as applied twice or out of order when one endpoint did so; its
	// deliveries are the most requests of one endpoint; and the recovery
	// times wait for every endpoint.
	Faults []KindReport `json:"faults"`
	Total  KindReport   `json:"total"`
	// Endpoints has a row per endpoint, in endpoints mode: the
	// invariants checked at each.
	Endpoints []EndpointReport `json:"endpoints,omitempty"`
	// DeadLettered is the number of events that ended failed, and
	// StillPending those still pending or in flight after the drain: both
	// count as lost too, since they were never applied. In endpoints mode
	// both add the endpoints' deliveries to the outbox's events.
	DeadLettered int64 `json:"dead_lettered"`
	StillPending int64 `json:"still_pending"`
	// ProduceErrors counts the producers' transactions that failed (the
	// database restarting); what did not commit was not produced.
	ProduceErrors int64 `json:"produce_errors"`
	// MemoryAt2Min and MemoryAtEnd are the most resident memory and open
	// descriptors of each relay process, sampled every 5 s, within the
	// minute around minute 2 (empty in runs shorter than 3 minutes) and
	// within the last minute of production (after the drain in runs
	// shorter than a minute).
	MemoryAt2Min []ProcessSample `json:"memory_at_2min"`
	MemoryAtEnd  []ProcessSample `json:"memory_at_end"`
	// MemoryFlat, in runs of 3 minutes or more, says whether every relay
	// used at most 10 % more memory and descriptors in the last minute
	// than around minute 2.
	MemoryFlat *bool `json:"memory_flat,omitempty"`
	// Partitioned: the outbox was partitioned (Config.Partitioned).
	// PartitionsDropped counts the partitions the run's retention steps
	// dropped (its upkeep's and partition-drop's; the relays' own every
	// minute are not counted), PartitionEventsMoved about how many
	// unfinished events were in the partitions those steps dropped
	// (counted just before each step: moved to the DEFAULT partition,
	// leased ones included), and PartitionStepsGaveUp the
	// steps that gave up, waiting for their lock on the outbox or racing
	// a relay's own step on the same partition (the next step does their
	// work).
	Partitioned          bool  `json:"partitioned,omitempty"`
	PartitionsDropped    int64 `json:"partitions_dropped,omitempty"`
	PartitionEventsMoved int64 `json:"partition_events_moved,omitempty"`
	PartitionStepsGaveUp int64 `json:"partition_steps_gave_up,omitempty"`
	// SlowestStopSeconds is the longest a relay took to exit after
	// SIGTERM at the end.
	SlowestStopSeconds float64 `json:"slowest_stop_seconds"`
	// RelayLog counts the warnings and errors the relays logged, by
	// message, most frequent first.
	RelayLog []LogCount `json:"relay_log"`
	// Problems are what went wrong besides the counts: a fault that could
	// not be injected, a relay that exited by itself or did not stop
	// cleanly, an outbox that did not drain.
	Problems []string `json:"problems,omitempty"`
	// KeptSchema and RelayLogs are kept when the run failed (or with
	// Config.Keep), for inspection.
	KeptSchema string `json:"kept_schema,omitempty"`
	// KeptInboxSchemas are the endpoints' inbox schemas, kept with
	// KeptSchema in endpoints mode.
	KeptInboxSchemas []string `json:"kept_inbox_schemas,omitempty"`
	// KeptDatabases are the scratch databases of a run over many sources,
	// kept when it failed (or with Config.Keep).
	KeptDatabases []string `json:"kept_databases,omitempty"`
	// Sources has a row per source in a run over many sources
	// (Config.Sources), and Outages one per source-outage injected.
	Sources   []SourceReport `json:"sources,omitempty"`
	Outages   []OutageReport `json:"outages,omitempty"`
	RelayLogs string         `json:"relay_logs,omitempty"`
	// OK: nothing lost, nothing applied twice, nothing out of order (when
	// ordered), and no problem.
	OK bool `json:"ok"`
}

// KindReport is the reconciliation of the events produced in the slots of
// one fault kind.
type KindReport struct {
	Kind         string `json:"kind"`
	Injected     int    `json:"injected"`
	Produced     int64  `json:"produced"`
	AppliedOnce  int64  `json:"applied_once"`
	Lost         int64  `json:"lost"`
	AppliedTwice int64  `json:"applied_twice"`
	// OutOfOrder counts the events applied after a later event of their
	// aggregate (checked when ordered).
	OutOfOrder int64 `json:"out_of_order"`
	// MaxDeliveries is the most requests that reached the consumer for
	// one event.
	MaxDeliveries int `json:"max_deliveries"`
	// RecoverySeconds is the longest time from a fault's end to the first
	// application of an event produced after it: deliveries flowing again;
	// -1 when none of them was ever applied.
	RecoverySeconds float64 `json:"recovery_seconds"`
	// BacklogSeconds is the longest time from a fault's end until every
	// event produced before it had been applied; -1 when one never was.
	BacklogSeconds float64 `json:"backlog_cleared_seconds"`
}

// EndpointReport is the reconciliation of the events at one endpoint.
type EndpointReport struct {
	Name         string    `json:"name"`
	ID           uuid.UUID `json:"id"`
	AppliedOnce  int64     `json:"applied_once"`
	Lost         int64     `json:"lost"`
	AppliedTwice int64     `json:"applied_twice"`
	// OutOfOrder counts the events this endpoint applied after a later
	// event of their aggregate (checked when ordered).
	OutOfOrder int64 `json:"out_of_order"`
	// MaxDeliveries is the most requests that reached this endpoint's
	// consumer for one event.
	MaxDeliveries int `json:"max_deliveries"`
	// DeadLettered and StillPending are the endpoint's deliveries that
	// ended failed, and those still pending or in flight after the
	// drain.
	DeadLettered int64 `json:"dead_lettered"`
	StillPending int64 `json:"still_pending"`
}

// ok reports whether every event was applied once, in order when ordered,
// at the endpoint.
func (e EndpointReport) ok() bool {
	return e.Lost == 0 && e.AppliedTwice == 0 && e.OutOfOrder == 0 && e.DeadLettered == 0 && e.StillPending == 0
}

// applications of one event.
type applications struct {
	count      int64
	first      time.Time
	outOfOrder bool
}

func (r *run) reconcile(ctx context.Context) (*Report, error) {
	pool := r.store.Pool()
	var ids []uuid.UUID
	var produced []time.Time
	rows, err := pool.Query(ctx, r.tables.selectProduced)
	if err != nil {
		return nil, fmt.Errorf("chaos: reconcile: %w", err)
	}
	for rows.Next() {
		var id uuid.UUID
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		ids, produced = append(ids, id), append(produced, at)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chaos: reconcile: %w", err)
	}
	perDest := make([]map[uuid.UUID]applications, len(r.destinations))
	for i := range perDest {
		perDest[i] = map[uuid.UUID]applications{}
	}
	rows, err = pool.Query(ctx, r.tables.selectApplied)
	if err != nil {
		return nil, fmt.Errorf("chaos: reconcile: %w", err)
	}
	for rows.Next() {
		var dest int
		var id uuid.UUID
		var a applications
		var disorder int64
		if err := rows.Scan(&dest, &id, &a.count, &a.first, &disorder); err != nil {
			return nil, err
		}
		if dest < 0 || dest >= len(perDest) {
			rows.Close()
			return nil, fmt.Errorf("chaos: reconcile: an application by destination %d, of %d", dest, len(perDest))
		}
		a.outOfOrder = disorder > 0
		perDest[dest][id] = a
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chaos: reconcile: %w", err)
	}
	st, err := r.store.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: reconcile: %w", err)
	}
	counts, err := r.endpointCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: reconcile: %w", err)
	}

	rep := &Report{
		DurationSeconds: r.cfg.Duration.Seconds(), EventsPerSecond: r.cfg.EventsPerSecond, Relays: r.cfg.Relays,
		Ordered: r.cfg.Ordered, LeaseSeconds: r.cfg.Lease.Seconds(), DeadLettered: st.Failed, StillPending: st.Pending + st.Processing,
		ProduceErrors: r.producing.errors.Load(), Total: KindReport{Kind: "total"}, RandomFailures: r.cfg.RandomFailures,
	}
	r.mu.Lock()
	windows := append([]window(nil), r.windows...)
	r.mu.Unlock()
	row := map[string]*KindReport{}
	rep.Faults = append(rep.Faults, KindReport{Kind: NoFault})
	for _, name := range r.cfg.Faults {
		rep.Faults = append(rep.Faults, KindReport{Kind: name})
	}
	for i := range rep.Faults {
		row[rep.Faults[i].Kind] = &rep.Faults[i]
	}
	for _, w := range windows {
		row[w.kind].Injected++
		if w.err != "" {
			rep.Problems = append(rep.Problems, fmt.Sprintf("fault %s at %.1fs: %s", w.kind, w.start.Sub(r.begin).Seconds(), w.err))
		}
	}
	deliveries := make([]map[uuid.UUID]int, len(r.destinations))
	for i, d := range r.destinations {
		deliveries[i] = d.consumer.deliveriesOf()
	}
	if r.endpointsMode() {
		for i, d := range r.destinations {
			e := endpointReport(d, ids, perDest[i], deliveries[i], r.cfg.Ordered)
			e.DeadLettered, e.StillPending = counts[i].Failed, counts[i].Pending+counts[i].Processing
			rep.DeadLettered += e.DeadLettered
			rep.StillPending += e.StillPending
			rep.Endpoints = append(rep.Endpoints, e)
		}
	}
	applied := make(map[uuid.UUID]applications, len(ids))
	for i, id := range ids {
		k := row[kindAt(windows, produced[i])]
		a := everywhere(perDest, id)
		applied[id] = a
		most := 0
		for _, dl := range deliveries {
			most = max(most, dl[id])
		}
		for _, kr := range []*KindReport{k, &rep.Total} {
			kr.Produced++
			switch {
			case a.count == 0:
				kr.Lost++
			case a.count == 1:
				kr.AppliedOnce++
			default:
				kr.AppliedTwice++
			}
			if a.outOfOrder && r.cfg.Ordered {
				kr.OutOfOrder++
			}
			kr.MaxDeliveries = max(kr.MaxDeliveries, most)
		}
	}
	r.recoveries(rep, row, windows, ids, produced, applied)
	if r.source != nil {
		r.source.events = reconciled{ids: ids, produced: produced, applied: applied}
	}
	rep.Total.Injected = len(windows)
	rep.OK = rep.Total.Produced > 0 && rep.Total.Lost == 0 && rep.Total.AppliedTwice == 0 &&
		rep.Total.OutOfOrder == 0 && len(rep.Problems) == 0
	for _, e := range rep.Endpoints {
		rep.OK = rep.OK && e.ok()
	}
	return rep, nil
}

// everywhere folds the applications of event id at every destination into
// one: never applied if one destination never applied it, otherwise the
// most applications of one destination, out of order if it was at one, and
// first applied when the last destination first applied it.
func everywhere(perDest []map[uuid.UUID]applications, id uuid.UUID) applications {
	var out applications
	for i, m := range perDest {
		a := m[id]
		if a.count == 0 {
			return applications{}
		}
		if i == 0 || a.count > out.count {
			out.count = a.count
		}
		if a.first.After(out.first) {
			out.first = a.first
		}
		out.outOfOrder = out.outOfOrder || a.outOfOrder
	}
	return out
}

// endpointReport counts the events ids at the endpoint of d, from its
// applications and the requests that reached its consumer.
func endpointReport(d *destination, ids []uuid.UUID, applied map[uuid.UUID]applications, deliveries map[uuid.UUID]int, ordered bool) EndpointReport {
	e := EndpointReport{Name: d.name, ID: d.id}
	for _, id := range ids {
		a := applied[id]
		switch {
		case a.count == 0:
			e.Lost++
		case a.count == 1:
			e.AppliedOnce++
		default:
			e.AppliedTwice++
		}
		if a.outOfOrder && ordered {
			e.OutOfOrder++
		}
		e.MaxDeliveries = max(e.MaxDeliveries, deliveries[id])
	}
	return e
}

// kindAt is the kind of the slot in force at t, NoFault outside them.
func kindAt(windows []window, t time.Time) string {
	i := sort.Search(len(windows), func(i int) bool { return windows[i].slotStart.After(t) }) - 1
	if i < 0 || (!windows[i].slotEnd.IsZero() && !t.Before(windows[i].slotEnd)) {
		return NoFault
	}
	return windows[i].kind
}

// recoveries measures, for every fault's end, how long until deliveries
// flowed again and until the backlog before it was cleared, from the
// events in production order. Never is recorded as -1, and stays.
func (r *run) recoveries(rep *Report, row map[string]*KindReport, windows []window, ids []uuid.UUID, produced []time.Time, applied map[uuid.UUID]applications) {
	n := len(ids)
	// firstAfter[i]: the earliest application among events i..n-1 (zero
	// when none of them was applied); lastBefore[i]: the latest first
	// application among events 0..i-1, and unappliedBefore[i] how many of
	// them were never applied.
	firstAfter := make([]time.Time, n+1)
	lastBefore := make([]time.Time, n+1)
	unappliedBefore := make([]int, n+1)
	for i := n - 1; i >= 0; i-- {
		firstAfter[i] = firstAfter[i+1]
		if a := applied[ids[i]]; a.count > 0 && (firstAfter[i].IsZero() || a.first.Before(firstAfter[i])) {
			firstAfter[i] = a.first
		}
	}
	for i := range n {
		lastBefore[i+1], unappliedBefore[i+1] = lastBefore[i], unappliedBefore[i]
		switch a := applied[ids[i]]; {
		case a.count == 0:
			unappliedBefore[i+1]++
		case a.first.After(lastBefore[i+1]):
			lastBefore[i+1] = a.first
		}
	}
	for _, w := range windows {
		if w.err != "" {
			continue
		}
		j := sort.Search(n, func(i int) bool { return !produced[i].Before(w.end) })
		for _, kr := range []*KindReport{row[w.kind], &rep.Total} {
			switch {
			case j == n: // nothing produced after the fault's end
			case firstAfter[j].IsZero():
				kr.RecoverySeconds = never
			default:
				kr.RecoverySeconds = worst(kr.RecoverySeconds, seconds(firstAfter[j].Sub(w.end)))
			}
			switch {
			case unappliedBefore[j] > 0:
				kr.BacklogSeconds = never
			case !lastBefore[j].IsZero():
				kr.BacklogSeconds = worst(kr.BacklogSeconds, seconds(lastBefore[j].Sub(w.end)))
			}
		}
	}
}

// never is a recovery that did not happen.
const never = -1

// worst is the longer of two recovery times, never being the longest.
func worst(a, b float64) float64 {
	if a == never || b == never {
		return never
	}
	return max(a, b)
}

// recoveryText prints a recovery time.
func recoveryText(sec float64) string {
	if sec == never {
		return "never"
	}
	return fmt.Sprintf("%.1fs", sec)
}

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) float64 { return d.Round(time.Millisecond).Seconds() }

// Print writes the report as a table.
func (rep *Report) Print(out io.Writer) {
	fmt.Fprintf(out, "\nreconciliation (from the database): %.0fs at %d events/s asked (%.0f/s committed), %d relays, lease %.1fs%s%s; %s\n\n",
		rep.DurationSeconds, rep.EventsPerSecond, float64(rep.Total.Produced)/rep.DurationSeconds, rep.Relays, rep.LeaseSeconds, orderedText(rep.Ordered),
		endpointsText(Config{Endpoints: len(rep.Endpoints), RandomFailures: rep.RandomFailures}), rep.Server)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\tinjected\tproduced\tapplied once\tlost\tapplied twice\tout of order\tmost deliveries\tflowing again\tbacklog cleared\t")
	for _, k := range append(rep.Faults, rep.Total) {
		if k.Kind != "total" && k.Injected == 0 && k.Produced == 0 {
			continue
		}
		disorder := "-"
		if rep.Ordered {
			disorder = fmt.Sprint(k.OutOfOrder)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t\n", k.Kind, k.Injected, k.Produced, k.AppliedOnce,
			k.Lost, k.AppliedTwice, disorder, k.MaxDeliveries, recoveryText(k.RecoverySeconds), recoveryText(k.BacklogSeconds))
	}
	_ = tw.Flush()
	if len(rep.Endpoints) > 0 {
		fmt.Fprintln(out, "\nper endpoint (every event is due at each; an event above counts once for all of them):")
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "endpoint\tapplied once\tlost\tapplied twice\tout of order\tmost deliveries\tdead-lettered\tstill pending\t")
		for _, e := range rep.Endpoints {
			disorder := "-"
			if rep.Ordered {
				disorder = fmt.Sprint(e.OutOfOrder)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t\n", e.Name, e.AppliedOnce, e.Lost, e.AppliedTwice, disorder, e.MaxDeliveries, e.DeadLettered, e.StillPending)
		}
		_ = tw.Flush()
	}
	rep.printSources(out)
	if slow := rep.SlowRecoveries(); len(slow) > 0 {
		fmt.Fprintf(out, "\ndeliveries flowed again later than lease + 2 s (%.1fs) after: %s\n", rep.LeaseSeconds+2, strings.Join(slow, ", "))
	}
	fmt.Fprintf(out, "\nof the lost: dead-lettered %d, still pending after the drain %d; producer transactions that failed %d (not produced: they did not commit)\n", rep.DeadLettered, rep.StillPending, rep.ProduceErrors)
	if len(rep.MemoryAt2Min) > 0 {
		fmt.Fprintf(out, "relays around minute 2 (the most, sampled every 5 s): %s\n", samplesText(rep.MemoryAt2Min))
		fmt.Fprintf(out, "relays in the last minute:                          %s\n", samplesText(rep.MemoryAtEnd))
	} else {
		fmt.Fprintf(out, "relays at the end: %s\n", samplesText(rep.MemoryAtEnd))
	}
	if rep.MemoryFlat != nil {
		verdict := "yes"
		if !*rep.MemoryFlat {
			verdict = "NO"
		}
		fmt.Fprintf(out, "memory and descriptors flat (last minute within 10 %% of minute 2): %s\n", verdict)
	}
	if rep.Partitioned {
		fmt.Fprintf(out, "partitioned outbox (partitions of %v): %d partitions dropped, about %d unfinished events in them when partition-drop dropped them (moved to the DEFAULT partition), %d retention steps gave up (their lock not granted, or a relay's step on the same partition)\n",
			PartitionInterval, rep.PartitionsDropped, rep.PartitionEventsMoved, rep.PartitionStepsGaveUp)
	}
	fmt.Fprintf(out, "the slowest relay stopped %.1fs after SIGTERM\n", rep.SlowestStopSeconds)
	if len(rep.RelayLog) > 0 {
		fmt.Fprintln(out, "relays' warnings and errors:")
		for i, l := range rep.RelayLog {
			if i == printedLogLines {
				fmt.Fprintf(out, "  and %d other messages (all in --json)\n", len(rep.RelayLog)-i)
				break
			}
			fmt.Fprintf(out, "  %6d  %-5s %s\n", l.Count, l.Level, l.Message)
		}
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(out, "problem: %s\n", p)
	}
	switch {
	case rep.OK && len(rep.Sources) > 0:
		fmt.Fprintf(out, "OK: every event of every source (%d) applied exactly once%s\n", len(rep.Sources), map[bool]string{true: ", in order per aggregate", false: ""}[rep.Ordered])
	case rep.OK && rep.Ordered && len(rep.Endpoints) > 0:
		fmt.Fprintln(out, "OK: every event applied exactly once by every endpoint, in order per aggregate at each")
	case rep.OK && len(rep.Endpoints) > 0:
		fmt.Fprintln(out, "OK: every event applied exactly once by every endpoint")
	case rep.OK && rep.Ordered:
		fmt.Fprintln(out, "OK: every event applied exactly once, in order per aggregate")
	case rep.OK:
		fmt.Fprintln(out, "OK: every event applied exactly once")
	default:
		fmt.Fprintln(out, "FAILED: "+rep.verdict())
	}
	if len(rep.KeptDatabases) > 0 {
		fmt.Fprintf(out, "kept for inspection: databases %s, relay logs and the sources file in %s\n", strings.Join(rep.KeptDatabases, ", "), rep.RelayLogs)
	}
	if rep.KeptSchema != "" {
		fmt.Fprintf(out, "kept for inspection: schema %s, relay logs in %s\n", rep.KeptSchema, rep.RelayLogs)
		if len(rep.KeptInboxSchemas) > 0 {
			fmt.Fprintf(out, "and the endpoints' inboxes: schemas %s\n", strings.Join(rep.KeptInboxSchemas, ", "))
		}
	}
}

// SlowRecoveries are the fault kinds after which deliveries took longer
// than the lease and 2 s to flow again.
func (rep *Report) SlowRecoveries() []string {
	var out []string
	for _, k := range rep.Faults {
		if k.RecoverySeconds == never || k.RecoverySeconds > rep.LeaseSeconds+2 {
			out = append(out, fmt.Sprintf("%s (%s)", k.Kind, recoveryText(k.RecoverySeconds)))
		}
	}
	return out
}

// verdict says what failed.
func (rep *Report) verdict() string {
	var what []string
	t := rep.Total
	if t.Produced == 0 {
		what = append(what, "no event produced")
	}
	if t.Lost > 0 {
		what = append(what, fmt.Sprintf("%d lost", t.Lost))
	}
	if t.AppliedTwice > 0 {
		what = append(what, fmt.Sprintf("%d applied twice", t.AppliedTwice))
	}
	if t.OutOfOrder > 0 {
		what = append(what, fmt.Sprintf("%d out of order", t.OutOfOrder))
	}
	for _, e := range rep.Endpoints {
		if !e.ok() {
			what = append(what, fmt.Sprintf("endpoint %s: %d lost, %d applied twice, %d out of order, %d dead-lettered, %d still pending",
				e.Name, e.Lost, e.AppliedTwice, e.OutOfOrder, e.DeadLettered, e.StillPending))
		}
	}
	if len(rep.Problems) > 0 {
		what = append(what, fmt.Sprintf("%d problems", len(rep.Problems)))
	}
	return strings.Join(what, ", ")
}

// memoryFlat reports whether each relay of late used at most 10 % more
// memory and descriptors than in early; nil when early is empty (a run too
// short to compare).
func memoryFlat(early, late []ProcessSample) *bool {
	if len(early) == 0 {
		return nil
	}
	flat := true
	for _, l := range late {
		for _, e := range early {
			if e.Relay == l.Relay && (float64(l.RSSKiB) > 1.1*float64(e.RSSKiB) || float64(l.FDs) > 1.1*float64(e.FDs)) {
				flat = false
			}
		}
	}
	return &flat
}
