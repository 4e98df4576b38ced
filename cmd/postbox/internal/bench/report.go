package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Units of measures.
const (
	UnitEventsPerSec = "events/s"
	// UnitDeliveriesPerSec counts requests to webhook endpoints: in
	// endpoints mode, every event is one delivery per endpoint.
	UnitDeliveriesPerSec = "deliveries/s"
	UnitTxPerSec         = "tx/s"
	UnitRatio            = "ratio"
	UnitMillis           = "ms"
	UnitMiB              = "MiB"
	UnitCPUPercent       = "% of a core"
	UnitMicros           = "µs"
	UnitSeconds          = "s"
	UnitPartitions       = "partitions"
	UnitEvents           = "events"
	UnitLines            = "lines"
	UnitProcesses        = "processes"
)

// How the relay of a measure ran (Measure.Relay).
const (
	// RelayInProcess is a relay of the relay package that the bench runs
	// in its own process, with only Store, Sink and Logger set: the
	// library path, not the command users run.
	RelayInProcess = "relay library, in process"
	// RelayProcess is the shipped command, `postbox relay`, that the
	// bench runs as a child process with its flags.
	RelayProcess = "`postbox relay` (child process)"
)

// scenarioRelay is how each scenario runs its relay.
var scenarioRelay = map[string]string{
	ScenarioDrain:      RelayInProcess,
	ScenarioWebhook:    RelayProcess,
	ScenarioWrite:      RelayInProcess,
	ScenarioLatency:    RelayProcess,
	ScenarioScale:      RelayProcess,
	ScenarioScaling:    RelayProcess,
	ScenarioEndpoints:  RelayProcess,
	ScenarioDrainWAL:   RelayInProcess,
	ScenarioWriteWAL:   RelayInProcess,
	ScenarioLatencyWAL: RelayProcess,
	ScenarioBloat:      RelayInProcess,
	ScenarioSources:    RelayProcess,
}

// Report is the outcome of a run: what ran where, and every measure.
type Report struct {
	// Database is "postgres", "sqlite" or "mysql"; Version names the server or
	// library, Settings the server settings that matter for an outbox.
	Database string            `json:"database"`
	Version  string            `json:"version"`
	Settings map[string]string `json:"settings,omitempty"`
	Machine  Machine           `json:"machine"`
	// Run names the run: its scratch outboxes are the PostgreSQL schemas
	// <Run>_<label>, the SQLite files PATH.<Run>_<label>, or the MySQL
	// databases <Run>_<label>.
	Run      string    `json:"run"`
	Params   Params    `json:"params"`
	Measures []Measure `json:"measures"`
	// Scaling is the drain rate by `postbox relay` processes and
	// --concurrency, when the scaling scenario ran.
	Scaling []ScalingPoint `json:"scaling,omitempty"`
	// Seconds is how long the run took, by scenario and in total.
	Seconds map[string]float64 `json:"seconds"`
}

// Params are the sizes a run used.
type Params struct {
	Scenarios       []string `json:"scenarios"`
	DrainEvents     int      `json:"drain_events"`
	WebhookEvents   int      `json:"webhook_events"`
	ScaleEvents     []int    `json:"scale_events"`
	ScalingEvents   int      `json:"scaling_events"`
	DurationSeconds float64  `json:"duration_seconds"`
	Rates           []int    `json:"rates"`
	Clients         int      `json:"clients"`
	InboxClients    int      `json:"inbox_clients,omitempty"`
	Instances       []int    `json:"instances"`
	Concurrency     []int    `json:"concurrency"`
	// ReceiverLatencyMs is how long the webhook receiver took to answer.
	ReceiverLatencyMs float64 `json:"receiver_latency_ms"`
	// BrokerEvents is the backlog of each broker scenario.
	BrokerEvents int `json:"broker_events"`
	// BloatEvents, RetentionEvents and ReplayEvents are the sizes of
	// bloat, retention and replay.
	BloatEvents     int `json:"bloat_events,omitempty"`
	RetentionEvents int `json:"retention_events,omitempty"`
	ReplayEvents    int `json:"replay_events,omitempty"`
	// RetentionPartitionSeconds is the interval of retention's partitions.
	RetentionPartitionSeconds float64 `json:"retention_partition_seconds,omitempty"`
	// OrderedEvents is the backlog of each drain of ordered, spread over
	// OrderedAggregates aggregates.
	OrderedEvents     int `json:"ordered_events,omitempty"`
	OrderedAggregates int `json:"ordered_aggregates,omitempty"`
	// SourcesCount, SourcesEvents, SourcesBacklog, SourcesPerSecond and
	// SourcesWindowSeconds are the sizes of sources.
	SourcesCount         int     `json:"sources_count,omitempty"`
	SourcesEvents        int     `json:"sources_events,omitempty"`
	SourcesBacklog       int     `json:"sources_backlog,omitempty"`
	SourcesPerSecond     int     `json:"sources_per_second,omitempty"`
	SourcesWindowSeconds float64 `json:"sources_window_seconds,omitempty"`
}

// Measure is one figure.
type Measure struct {
	// Key names the measure stably, such as "drain.postbox".
	Key      string  `json:"key"`
	Scenario string  `json:"scenario"`
	Name     string  `json:"name"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	// Relay is how the relay measured ran: RelayProcess or
	// RelayInProcess. It is empty for a measure that involves no relay
	// (the raw-SQL drains, business transactions with no relay running).
	Relay string `json:"relay,omitempty"`
	// Goal is the goal for this measure, if it has one. Met is
	// set when the goal applies (PostgreSQL only).
	Goal *Goal `json:"goal,omitempty"`
	Met  *bool `json:"met,omitempty"`
}

// Goal is a bound a measure should respect.
type Goal struct {
	// Op is ">=" or "<=".
	Op    string  `json:"op"`
	Value float64 `json:"value"`
}

func atLeast(v float64) *Goal { return &Goal{Op: ">=", Value: v} }
func atMost(v float64) *Goal  { return &Goal{Op: "<=", Value: v} }

func (g *Goal) met(v float64) bool {
	if g.Op == ">=" {
		return v >= g.Value
	}
	return v <= g.Value
}

// ScalingPoint is the drain rate of Instances `postbox relay` processes of
// --concurrency Concurrency each, delivering signed webhooks to a local
// receiver, and the highest peak resident memory among them.
type ScalingPoint struct {
	Instances    int     `json:"instances"`
	Concurrency  int     `json:"concurrency"`
	EventsPerSec float64 `json:"events_per_s"`
	PeakRSSMiB   float64 `json:"peak_rss_mib"`
}

// add records a measure of the relay as scenario runs it; goals are judged
// on PostgreSQL only, which is what they were set for.
func (r *Report) add(scenario, key, name string, value float64, unit string, goal *Goal) {
	r.record(Measure{Key: key, Scenario: scenario, Relay: scenarioRelay[scenario], Name: name, Value: value, Unit: unit, Goal: goal})
}

// addBy records a measure of the relay run as relay says (RelayProcess or
// RelayInProcess), for a scenario that runs it both ways, as add does.
func (r *Report) addBy(relay, scenario, key, name string, value float64, unit string, goal *Goal) {
	r.record(Measure{Key: key, Scenario: scenario, Relay: relay, Name: name, Value: value, Unit: unit, Goal: goal})
}

// addNoRelay records a measure that involves no relay, as add does.
func (r *Report) addNoRelay(scenario, key, name string, value float64, unit string, goal *Goal) {
	r.record(Measure{Key: key, Scenario: scenario, Name: name, Value: value, Unit: unit, Goal: goal})
}

func (r *Report) record(m Measure) {
	if m.Goal != nil && r.Database == "postgres" {
		met := m.Goal.met(m.Value)
		m.Met = &met
	}
	r.Measures = append(r.Measures, m)
}

// Measure returns the measure with key.
func (r *Report) Measure(key string) (Measure, bool) {
	i := slices.IndexFunc(r.Measures, func(m Measure) bool { return m.Key == key })
	if i < 0 {
		return Measure{}, false
	}
	return r.Measures[i], true
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as text: what ran where, a table of the
// measures with how their relay ran and their goals, and the scaling
// matrix.
func (r *Report) WriteTable(w io.Writer) error {
	m := r.Machine
	fmt.Fprintf(w, "postbox bench on %s, %s\n", r.Version, m.Date.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "machine: %d CPUs (%s), %.1f GiB memory, %s, %s\n", m.CPUs, m.CPUModel, float64(m.MemoryMiB)/1024, m.OS, m.Go)
	if len(r.Settings) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(r.Settings)) {
			kv = append(kv, k+"="+r.Settings[k])
		}
		fmt.Fprintf(w, "settings: %s\n", strings.Join(kv, " "))
	}
	fmt.Fprintf(w, "sizes: %s\n\n", r.Params.describe())

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tRELAY\tMEASURE\tVALUE\tGOAL\tMET")
	met, goals := 0, 0
	for _, ms := range r.Measures {
		goal, ok := "", ""
		if ms.Goal != nil {
			goal = strings.Replace(strings.Replace(ms.Goal.Op, ">=", "≥ ", 1), "<=", "≤ ", 1) + formatGoal(ms.Goal.Value, ms.Unit)
			ok = "n/a"
		}
		if ms.Met != nil {
			goals++
			ok = "NO"
			if *ms.Met {
				ok = "yes"
				met++
			}
		}
		relay := ms.Relay
		if relay == "" {
			relay = "none"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ms.Scenario, relay, ms.Name, formatValue(ms.Value, ms.Unit), goal, ok)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if goals > 0 {
		fmt.Fprintf(w, "\ngoals met: %d of %d\n", met, goals)
	} else if r.Database != "postgres" {
		fmt.Fprintln(w, "\ngoals are set for PostgreSQL: not judged on "+r.Database)
	}
	if len(r.Scaling) > 0 {
		r.writeScaling(w)
	}
	fmt.Fprintf(w, "\ntook %s\n", time.Duration(r.Seconds["total"]*float64(time.Second)).Round(time.Second))
	return nil
}

// writeScaling prints the drain rate by `postbox relay` processes (rows)
// and --concurrency (columns).
func (r *Report) writeScaling(w io.Writer) {
	var instances, concurrency []int
	rate := map[[2]int]float64{}
	for _, s := range r.Scaling {
		if !slices.Contains(instances, s.Instances) {
			instances = append(instances, s.Instances)
		}
		if !slices.Contains(concurrency, s.Concurrency) {
			concurrency = append(concurrency, s.Concurrency)
		}
		rate[[2]int{s.Instances, s.Concurrency}] = s.EventsPerSec
	}
	fmt.Fprintf(w, "\n%s: drain as signed webhooks to a local receiver, events/s, by processes (rows) and --concurrency (columns), backlog %d:\n",
		RelayProcess, r.Params.ScalingEvents)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "relays\t")
	for _, c := range concurrency {
		fmt.Fprintf(tw, "concurrency %d\t", c)
	}
	fmt.Fprintln(tw)
	for _, i := range instances {
		fmt.Fprintf(tw, "%d\t", i)
		for _, c := range concurrency {
			fmt.Fprintf(tw, "%s\t", thousands(rate[[2]int{i, c}]))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

// describe lists the sizes of the scenarios that ran.
func (p Params) describe() string {
	d := time.Duration(p.DurationSeconds * float64(time.Second))
	var parts []string
	for _, s := range p.Scenarios {
		switch s {
		case ScenarioDrain, ScenarioDrainWAL:
			parts = append(parts, fmt.Sprintf("%s %d events", s, p.DrainEvents))
		case ScenarioWebhook:
			parts = append(parts, fmt.Sprintf("webhook %d events", p.WebhookEvents))
		case ScenarioLatency, ScenarioLatencyWAL:
			parts = append(parts, fmt.Sprintf("%s %s at each of %s/s", s, d, joinInts(p.Rates, ", ")))
		case ScenarioInbox:
			parts = append(parts, fmt.Sprintf("%s %d clients for %s each side", s, p.InboxClients, d))
		case ScenarioWrite, ScenarioWriteWAL:
			parts = append(parts, fmt.Sprintf("%s %d clients for %s per run", s, p.Clients, d))
		case ScenarioScale:
			parts = append(parts, fmt.Sprintf("scale %s events", joinInts(p.ScaleEvents, " and ")))
		case ScenarioScaling:
			parts = append(parts, fmt.Sprintf("scaling %d events per drain", p.ScalingEvents))
		case ScenarioBloat:
			parts = append(parts, fmt.Sprintf("bloat %d events per drain", p.BloatEvents))
		case ScenarioRetention:
			parts = append(parts, fmt.Sprintf("retention %d delivered events per outbox, partitions of %s", p.RetentionEvents,
				time.Duration(p.RetentionPartitionSeconds*float64(time.Second))))
		case ScenarioReplay:
			parts = append(parts, fmt.Sprintf("replay %d events", p.ReplayEvents))
		case ScenarioOrdered:
			parts = append(parts, fmt.Sprintf("ordered %d events over %d aggregates per drain", p.OrderedEvents, p.OrderedAggregates))
		case ScenarioSources:
			parts = append(parts, fmt.Sprintf("sources %d sources, %d events per drain, a %d backlog beside a trickle of %d/s per source, windows of %s",
				p.SourcesCount, p.SourcesEvents, p.SourcesBacklog, p.SourcesPerSecond, time.Duration(p.SourcesWindowSeconds*float64(time.Second))))
		case ScenarioNATS, ScenarioAMQP, ScenarioKafka:
			parts = append(parts, fmt.Sprintf("%s %d events per drain", s, p.BrokerEvents))
		}
	}
	if p.ReceiverLatencyMs > 0 && (slices.Contains(p.Scenarios, ScenarioWebhook) || slices.Contains(p.Scenarios, ScenarioScaling)) {
		parts = append(parts, fmt.Sprintf("the webhook receiver answers after %g ms", p.ReceiverLatencyMs))
	}
	return strings.Join(parts, "; ")
}

// formatGoal is formatValue with no more decimals than the goal has.
func formatGoal(v float64, unit string) string {
	switch unit {
	case UnitRatio:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case UnitMillis:
		return strconv.FormatFloat(v, 'f', -1, 64) + " ms"
	case UnitMiB:
		return strconv.FormatFloat(v, 'f', -1, 64) + " MiB"
	case UnitSeconds:
		return strconv.FormatFloat(v, 'f', -1, 64) + " s"
	case UnitEvents, UnitLines, UnitProcesses:
		return strconv.FormatFloat(v, 'f', -1, 64) + " " + unit
	}
	return formatValue(v, unit)
}

func formatValue(v float64, unit string) string {
	switch unit {
	case UnitEventsPerSec, UnitTxPerSec, UnitDeliveriesPerSec:
		return thousands(v) + " " + unit
	case UnitRatio:
		// Three decimals: a ratio just below its goal must not print as
		// the goal.
		return strconv.FormatFloat(v, 'f', 3, 64)
	case UnitMillis:
		return strconv.FormatFloat(v, 'f', 2, 64) + " ms"
	case UnitMiB:
		return strconv.FormatFloat(v, 'f', 1, 64) + " MiB"
	case UnitMicros:
		return strconv.FormatFloat(v, 'f', 0, 64) + " µs"
	case UnitSeconds:
		return strconv.FormatFloat(v, 'f', 3, 64) + " s"
	case UnitPartitions, UnitEvents, UnitLines, UnitProcesses:
		return strconv.FormatFloat(v, 'f', 0, 64) + " " + unit
	case UnitCPUPercent:
		return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + " " + unit
}

// thousands formats v rounded, with thousands separators.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, sep)
}
