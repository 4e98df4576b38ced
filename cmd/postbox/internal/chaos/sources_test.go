package chaos

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// source-outage needs many sources: "all" includes it only with them,
// naming it without them is refused, and relay-kill is kill.
func TestSourceOutageNeedsSources(t *testing.T) {
	all, err := ParseFaultsWith("all", FaultOptions{})
	if err != nil || slices.Contains(all, FaultSourceOutage) {
		t.Errorf("all without sources: %v, %v; want no source-outage", all, err)
	}
	all, err = ParseFaultsWith("all", FaultOptions{Sources: true})
	if err != nil || !slices.Contains(all, FaultSourceOutage) || !slices.Contains(all, FaultKill) {
		t.Errorf("all with sources: %v, %v; want source-outage and kill", all, err)
	}
	if _, err := ParseFaultsWith("source-outage,kill", FaultOptions{}); err == nil || !strings.Contains(err.Error(), "--sources") {
		t.Errorf("source-outage without sources: %v, want an error naming --sources", err)
	}
	named, err := ParseFaultsWith("source-outage,relay-kill,kill", FaultOptions{Sources: true})
	if err != nil || !slices.Equal(named, []string{FaultSourceOutage, FaultKill}) {
		t.Errorf("source-outage,relay-kill,kill: %v, %v; want [source-outage kill]", named, err)
	}
	base := Config{DB: "postgres://postgres@127.0.0.1:5432/postgres", Executable: "postbox"}
	for _, c := range []Config{
		{Sources: 1}, {Sources: -2}, {Sources: 3, Endpoints: 2}, {Sources: 3, Partitioned: true},
		{Faults: []string{FaultSourceOutage}},
	} {
		c.DB, c.Executable = base.DB, base.Executable
		if _, err := c.withDefaults(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	cfg, err := Config{DB: base.DB, Executable: "postbox", Sources: 3}.withDefaults()
	if err != nil || !slices.Contains(cfg.Faults, FaultSourceOutage) {
		t.Errorf("--sources 3: faults %v (%v), want source-outage among them", cfg.Faults, err)
	}
}

func TestDatabaseURL(t *testing.T) {
	got, err := databaseURL("postgres://u@h:5432/postgres?application_name=x&sslmode=disable", "other")
	if err != nil || got != "postgres://u@h:5432/other?application_name=x&sslmode=disable" {
		t.Errorf("databaseURL: %q, %v", got, err)
	}
}

// An outage passes when every event the other sources produced during it
// was applied within OutageBound, and fails otherwise; the victim's events
// do not count.
func TestOutageCheck(t *testing.T) {
	begin := time.Now()
	w := window{kind: FaultSourceOutage, start: begin.Add(time.Second), end: begin.Add(3 * time.Second)}
	victim, other := uuid.New(), uuid.New()
	newRun := func(applyAfter time.Duration) *run {
		at := begin.Add(2 * time.Second)
		return &run{begin: begin, sources: []*run{
			{source: &sourceOf{name: "source-0", victim: true, events: reconciled{ids: []uuid.UUID{victim}, produced: []time.Time{at}}}},
			{source: &sourceOf{name: "source-1", events: reconciled{ids: []uuid.UUID{other}, produced: []time.Time{at},
				applied: map[uuid.UUID]applications{other: {count: 1, first: at.Add(applyAfter)}}}}},
		}}
	}
	o := newRun(500 * time.Millisecond).outages([]window{w})
	if len(o) != 1 || !o[0].OK || o[0].OthersProduced != 1 || o[0].OthersAppliedDuring != 1 {
		t.Errorf("applied 0.5s after: %+v, want OK", o)
	}
	o = newRun(OutageBound + time.Second).outages([]window{w})
	if len(o) != 1 || o[0].OK || o[0].OthersAppliedDuring != 0 {
		t.Errorf("applied past the bound: %+v, want not OK", o)
	}
	var out bytes.Buffer
	(&Report{Sources: []SourceReport{{Name: "source-0", Victim: true, OK: true}}, Outages: o}).printSources(&out)
	if !strings.Contains(out.String(), "source-outage at 1.0s for 2.0s") || !strings.Contains(out.String(), "FAILED") {
		t.Errorf("printed:\n%s", out.String())
	}
}
