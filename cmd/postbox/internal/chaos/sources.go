package chaos

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/postboxtest/netfault"
	"github.com/postbox-go/postbox/store/postgres"
)

// OutageBound bounds how long after its production an event of a source
// that stayed reachable may be applied when it was produced during a
// source-outage: the other sources keep delivering while one source's
// database is down. Their events are applied within it whether or not the
// outage ended meanwhile.
const OutageBound = 5 * time.Second

// A run over many sources (Config.Sources) has a child run per source:
// its store (schema) in one of the run's scratch databases, business
// tables, consumer and producers; the parent holds the relay processes,
// the faults and the proxy to the server, and its store is an
// administrative one on --db (its schema is never created).
//
// Source 0, the victim of source-outage, is alone in the first scratch
// database; the others share the second.

// sourceOf is what a child run knows of its source.
type sourceOf struct {
	name, database string
	// victim: the source alone in its database, cut off by
	// source-outage.
	victim bool
	// events are what the child's reconcile counted, for the outages'
	// check.
	events reconciled
}

// reconciled is one source's events in production order and their
// applications.
type reconciled struct {
	ids      []uuid.UUID
	produced []time.Time
	applied  map[uuid.UUID]applications
}

// sourcesMode reports whether the run is over many sources.
func (r *run) sourcesMode() bool { return r.cfg.Sources >= 2 }

// scratchDatabases are the names of the run's databases: the victim's,
// then the others'.
func scratchDatabases(id string) []string {
	return []string{"postbox_chaos_" + id + "_victim", "postbox_chaos_" + id + "_others"}
}

// databaseURL is u with its database (path) replaced by database.
func databaseURL(u, database string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("chaos: --db %s: %v", dburl.Redact(u), err)
	}
	parsed.Path = "/" + database
	parsed.RawPath = ""
	return parsed.String(), nil
}

// setupSources creates the scratch databases and, in them, a schema per
// source with its outbox and business tables, each a child run.
func (r *run) setupSources(ctx context.Context, id string) error {
	for _, db := range scratchDatabases(id) {
		if _, err := r.store.Pool().Exec(ctx, "create database "+pgx.Identifier{db}.Sanitize()); err != nil {
			return fmt.Errorf("chaos: create database %s: %w", db, err)
		}
		r.databases = append(r.databases, db)
	}
	for i := range r.cfg.Sources {
		db := r.databases[min(i, 1)]
		u, err := databaseURL(r.cfg.DB, db)
		if err != nil {
			return err
		}
		schema := "postbox_chaos_" + id + "_s" + strconv.Itoa(i)
		s, err := dburl.Open(ctx, u, dburl.Options{Schema: schema, ApplicationName: "postbox chaos"})
		if err != nil {
			return fmt.Errorf("chaos: open source %d: %w", i, err)
		}
		pg, _ := s.Postgres()
		cfg := r.cfg
		cfg.Sources, cfg.DB = 0, u
		child := &run{cfg: cfg, store: pg, tables: newTables(pg), applicationName: r.applicationName,
			source: &sourceOf{name: "source-" + strconv.Itoa(i), database: db, victim: i == 0}}
		r.sources = append(r.sources, child)
		r.closers = append(r.closers, s.Close)
		if err := child.setupSchema(ctx); err != nil {
			return fmt.Errorf("%w (source %s)", err, child.source.name)
		}
	}
	return nil
}

// closeSources closes the sources' stores.
func (r *run) closeSources() {
	for _, c := range slices.Backward(r.closers) {
		c()
	}
	r.closers = nil
}

// dropDatabases drops the scratch databases (their connections
// terminated: WITH (FORCE), PostgreSQL 13 and later).
func (r *run) dropDatabases() {
	r.closeSources()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, db := range r.databases {
		name := pgx.Identifier{db}.Sanitize()
		// Should the run have stopped in the middle of an outage.
		_, _ = r.store.Pool().Exec(ctx, "alter database "+name+" allow_connections true")
		if _, err := r.store.Pool().Exec(ctx, "drop database if exists "+name+" with (force)"); err != nil {
			fmt.Fprintf(r.cfg.Out, "chaos: drop database %s: %v\n", db, err)
		}
	}
}

// startSourceDestinations starts a consumer (and its proxy) per source,
// with its inbox and applied table in the source's schema; all of them
// check the one secret that the relays sign with.
func (r *run) startSourceDestinations() (string, error) {
	secret := rand.Text() + rand.Text()
	for i, child := range r.sources {
		d := &destination{index: i, inbox: child.store}
		logger, err := d.openLog(r.logDir)
		if err != nil {
			return "", err
		}
		child.destinations = []*destination{d}
		r.destinations = append(r.destinations, d)
		// Each source's applied table is its own: the destination is
		// number 0 there.
		if d.consumer, err = startConsumer(child.store, child.tables, 0, secret, slowAnswer, 0, logger); err != nil {
			return "", err
		}
		if d.proxy, err = netfault.NewProxy(d.consumer.addr); err != nil {
			return "", err
		}
	}
	return secret, nil
}

// sourcesFile writes the relays' sources file: every source, reached
// through the database proxy with the run's application_name, delivering
// to its own consumer. It returns its path.
func (r *run) sourcesFile() (string, error) {
	type entry struct {
		Name   string `yaml:"name"`
		DB     string `yaml:"db"`
		Schema string `yaml:"schema"`
		Sink   string `yaml:"sink"`
	}
	var file struct {
		Sources []entry `yaml:"sources"`
	}
	base, err := r.relayDB()
	if err != nil {
		return "", err
	}
	for i, child := range r.sources {
		u, err := databaseURL(base, child.source.database)
		if err != nil {
			return "", err
		}
		file.Sources = append(file.Sources, entry{Name: child.source.name, DB: u, Schema: child.store.Schema(),
			Sink: "http://" + r.destinations[i].proxy.Addr() + "/webhook"})
	}
	data, err := yaml.Marshal(file)
	if err != nil {
		return "", err
	}
	name := filepath.Join(r.logDir, "sources.yaml")
	return name, os.WriteFile(name, data, 0o600)
}

// sourcesText says, in a run over many sources, how many and where.
func sourcesText(r *run) string {
	if !r.sourcesMode() {
		return ""
	}
	return fmt.Sprintf(", %d sources (postbox relay --sources; %s in database %s alone, the others in %s)",
		len(r.sources), r.sources[0].source.name, r.databases[0], r.databases[1])
}

// produceAll runs the producers until ctx ends: the run's, or in a run
// over many sources each source's, sharing the rate.
func (r *run) produceAll(ctx context.Context) {
	if !r.sourcesMode() {
		r.produce(ctx, r.cfg.EventsPerSecond)
		return
	}
	var wg sync.WaitGroup
	for _, child := range r.sources {
		wg.Go(func() { child.produce(ctx, max(1, r.cfg.EventsPerSecond/len(r.sources))) })
	}
	wg.Wait()
}

// produced and produceErrors count what the producers did, every
// source's.
func (r *run) produced() int64 {
	n := r.producing.produced.Load()
	for _, child := range r.sources {
		n += child.producing.produced.Load()
	}
	return n
}

func (r *run) produceErrors() int64 {
	n := r.producing.errors.Load()
	for _, child := range r.sources {
		n += child.producing.errors.Load()
	}
	return n
}

// outboxStats are the outbox's counts, summed over the sources in a run
// over many sources (at most upTo each; asked of all at once).
func (r *run) outboxStats(ctx context.Context, upTo int64) (pending, processing, failed int64, err error) {
	stores := []*postgres.Store{r.store}
	if r.sourcesMode() {
		stores = stores[:0]
		for _, child := range r.sources {
			stores = append(stores, child.store)
		}
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, s := range stores {
		wg.Go(func() {
			st, err := s.StatsUpTo(ctx, upTo)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			pending, processing, failed = pending+st.Pending, processing+st.Processing, failed+st.Failed
		})
	}
	wg.Wait()
	return pending, processing, failed, errors.Join(errs...)
}

// drainSources waits until no source has an event pending or in flight,
// within DrainTimeout.
func (r *run) drainSources(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.DrainTimeout)
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var open []string
		var err error
		for _, child := range r.sources {
			st, serr := child.store.Stats(callCtx)
			switch {
			case serr != nil:
				err = errors.Join(err, fmt.Errorf("%s: %w", child.source.name, serr))
			case st.Pending+st.Processing > 0:
				open = append(open, fmt.Sprintf("%s: %d pending, %d in flight", child.source.name, st.Pending, st.Processing))
			}
		}
		cancel()
		if err == nil && len(open) == 0 {
			r.say("drained in %v", time.Since(r.begin.Add(r.cfg.Duration)).Round(100*time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("the outboxes did not drain within %v: %v", r.cfg.DrainTimeout, err)
			}
			return fmt.Errorf("the outboxes did not drain within %v: %s", r.cfg.DrainTimeout, strings.Join(open, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// SourceReport is the reconciliation of one source's events, in a run
// over many sources.
type SourceReport struct {
	Name     string `json:"name"`
	Database string `json:"database"`
	Schema   string `json:"schema"`
	// Victim: the source cut off by source-outage (alone in its
	// database).
	Victim        bool  `json:"victim,omitempty"`
	Produced      int64 `json:"produced"`
	AppliedOnce   int64 `json:"applied_once"`
	Lost          int64 `json:"lost"`
	AppliedTwice  int64 `json:"applied_twice"`
	OutOfOrder    int64 `json:"out_of_order"`
	DeadLettered  int64 `json:"dead_lettered"`
	StillPending  int64 `json:"still_pending"`
	ProduceErrors int64 `json:"produce_errors"`
	OK            bool  `json:"ok"`
}

// OutageReport is one source-outage: how the sources that stayed
// reachable delivered while it lasted.
type OutageReport struct {
	Source   string `json:"source"`
	Database string `json:"database"`
	// AtSeconds is when the outage began, since production began;
	// Seconds how long it lasted.
	AtSeconds float64 `json:"at_seconds"`
	Seconds   float64 `json:"seconds"`
	// OthersProduced counts the other sources' events produced during
	// the outage, OthersApplied those of them applied, OthersAppliedDuring
	// those applied before it ended, OthersWithinBound those applied
	// within BoundSeconds of their production.
	OthersProduced      int64 `json:"others_produced"`
	OthersApplied       int64 `json:"others_applied"`
	OthersAppliedDuring int64 `json:"others_applied_during"`
	OthersWithinBound   int64 `json:"others_within_bound"`
	// SlowestSeconds is the longest from the production of one of them
	// to its application; SlowestProducedAt and SlowestAppliedAt say
	// when that event was produced and applied, since production began.
	SlowestSeconds    float64 `json:"slowest_seconds"`
	SlowestProducedAt float64 `json:"slowest_produced_at"`
	SlowestAppliedAt  float64 `json:"slowest_applied_at"`
	BoundSeconds      float64 `json:"bound_seconds"`
	// Settled says how long the outage waited, before it began, for the
	// other sources' backlog (left by the faults before it) to clear.
	Settled string `json:"settled"`
	// OK: the other sources produced during the outage, and every one of
	// those events was applied within the bound.
	OK bool `json:"ok"`
}

// reconcileSources reconciles each source with its child run, and sums
// them up.
func (r *run) reconcileSources(ctx context.Context) (*Report, error) {
	r.mu.Lock()
	windows := slices.Clone(r.windows)
	r.mu.Unlock()
	var rep *Report
	for _, child := range r.sources {
		child.begin, child.windows = r.begin, windows
		cr, err := child.reconcile(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w (source %s)", err, child.source.name)
		}
		t := cr.Total
		sr := SourceReport{Name: child.source.name, Database: child.source.database, Schema: child.store.Schema(), Victim: child.source.victim,
			Produced: t.Produced, AppliedOnce: t.AppliedOnce, Lost: t.Lost, AppliedTwice: t.AppliedTwice, OutOfOrder: t.OutOfOrder,
			DeadLettered: cr.DeadLettered, StillPending: cr.StillPending, ProduceErrors: cr.ProduceErrors, OK: cr.OK}
		if rep == nil {
			rep = cr
			rep.Sources = []SourceReport{sr}
			continue
		}
		rep.Sources = append(rep.Sources, sr)
		rep.Total = sumKinds(rep.Total, t)
		for i := range rep.Faults {
			rep.Faults[i] = sumKinds(rep.Faults[i], cr.Faults[i])
		}
		rep.DeadLettered += cr.DeadLettered
		rep.StillPending += cr.StillPending
		rep.ProduceErrors += cr.ProduceErrors
		for _, p := range cr.Problems {
			if !slices.Contains(rep.Problems, p) {
				rep.Problems = append(rep.Problems, p)
			}
		}
		rep.OK = rep.OK && cr.OK
	}
	rep.Outages = r.outages(windows)
	for _, o := range rep.Outages {
		rep.OK = rep.OK && o.OK
	}
	return rep, nil
}

// sumKinds adds b's counts to a's (the faults injected are the same).
func sumKinds(a, b KindReport) KindReport {
	a.Produced += b.Produced
	a.AppliedOnce += b.AppliedOnce
	a.Lost += b.Lost
	a.AppliedTwice += b.AppliedTwice
	a.OutOfOrder += b.OutOfOrder
	a.MaxDeliveries = max(a.MaxDeliveries, b.MaxDeliveries)
	a.RecoverySeconds = worst(a.RecoverySeconds, b.RecoverySeconds)
	a.BacklogSeconds = worst(a.BacklogSeconds, b.BacklogSeconds)
	return a
}

// outages checks each source-outage: the events the other sources
// produced while it lasted were applied within OutageBound.
func (r *run) outages(windows []window) []OutageReport {
	var out []OutageReport
	for _, w := range windows {
		if w.kind != FaultSourceOutage || w.err != "" {
			continue
		}
		o := OutageReport{Source: r.sources[0].source.name, Database: r.sources[0].source.database,
			AtSeconds: seconds(w.start.Sub(r.begin)), Seconds: seconds(w.end.Sub(w.start)), BoundSeconds: OutageBound.Seconds(), Settled: w.settled}
		for _, child := range r.sources {
			if child.source.victim {
				continue
			}
			ev := child.source.events
			for i, id := range ev.ids {
				at := ev.produced[i]
				if at.Before(w.start) || !at.Before(w.end) {
					continue
				}
				o.OthersProduced++
				a := ev.applied[id]
				if a.count == 0 {
					continue
				}
				o.OthersApplied++
				if a.first.Before(w.end) {
					o.OthersAppliedDuring++
				}
				took := a.first.Sub(at)
				if took <= OutageBound {
					o.OthersWithinBound++
				}
				if seconds(took) > o.SlowestSeconds {
					o.SlowestSeconds = seconds(took)
					o.SlowestProducedAt, o.SlowestAppliedAt = seconds(at.Sub(r.begin)), seconds(a.first.Sub(r.begin))
				}
			}
		}
		o.OK = o.OthersProduced > 0 && o.OthersWithinBound == o.OthersProduced
		out = append(out, o)
	}
	return out
}

// printSources writes the per-source lines and the outages' of a run over
// many sources.
func (rep *Report) printSources(out io.Writer) {
	if len(rep.Sources) == 0 {
		return
	}
	fmt.Fprintln(out, "\nper source (each its own outbox and inbox, all drained by every relay process through postbox relay --sources):")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "source\tdatabase\tproduced\tapplied once\tlost\tapplied twice\tout of order\tdead-lettered\tstill pending\tproduce errors\t\t")
	for _, s := range rep.Sources {
		disorder, verdict, victim := "-", "OK", ""
		if rep.Ordered {
			disorder = fmt.Sprint(s.OutOfOrder)
		}
		if !s.OK {
			verdict = "FAILED"
		}
		if s.Victim {
			victim = " (source-outage)"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t\n", s.Name, victim, s.Database, s.Produced, s.AppliedOnce, s.Lost,
			s.AppliedTwice, disorder, s.DeadLettered, s.StillPending, s.ProduceErrors, verdict)
	}
	_ = tw.Flush()
	for _, o := range rep.Outages {
		verdict := "OK"
		if !o.OK {
			verdict = "FAILED"
		}
		fmt.Fprintf(out, "source-outage at %.1fs for %.1fs (%s, database %s): the other sources produced %d events during it, applied %d (%d before it ended, %d within %.0fs of their production, the slowest after %.1fs, produced at %.1fs): %s\n",
			o.AtSeconds, o.Seconds, o.Source, o.Database, o.OthersProduced, o.OthersApplied, o.OthersAppliedDuring, o.OthersWithinBound, o.BoundSeconds,
			o.SlowestSeconds, o.SlowestProducedAt, verdict)
		if o.Settled != "" {
			fmt.Fprintf(out, "  (before it: %s)\n", o.Settled)
		}
	}
}

// Before an outage the other sources' backlog is let clear, so that the
// outage's check measures the outage, not the recovery from the fault
// before it: at most settleWithin, until each other source has at most
// settledBacklog events pending or in flight per event per second it is
// produced at (a second of production).
const (
	settleWithin   = 30 * time.Second
	settledBacklog = 1
)

// settleOthers waits until the sources other than the victim have no
// backlog to speak of, and says how long it waited.
func settleOthers(ctx context.Context, r *run) string {
	if !r.sourcesMode() {
		return ""
	}
	began := time.Now()
	limit := int64(max(50, settledBacklog*r.cfg.EventsPerSecond/len(r.sources)))
	for {
		worst := int64(0)
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		for _, child := range r.sources[1:] {
			st, err := child.store.StatsUpTo(callCtx, 1_000_000)
			if err != nil {
				worst = -1
				break
			}
			worst = max(worst, st.Pending+st.Processing)
		}
		cancel()
		waited := time.Since(began).Round(100 * time.Millisecond)
		switch {
		case worst >= 0 && worst <= limit:
			return fmt.Sprintf("waited %v for the other sources' backlog to fall to %d events or fewer each (%d at most)", waited, limit, worst)
		case time.Since(began) > settleWithin || ctx.Err() != nil:
			backlog := fmt.Sprint(worst)
			if worst < 0 {
				backlog = "unknown: their outboxes did not answer"
			}
			return fmt.Sprintf("waited %v for the other sources' backlog to fall to %d events or fewer each; it did not (%s)", waited, limit, backlog)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// injectSourceOutage makes the victim's database refuse connections and
// terminates its sessions (the relays', the run's own producers' and
// consumer's); the end lets connections in again.
func injectSourceOutage(ctx context.Context, r *run, _ int) (func() error, error) {
	if !r.sourcesMode() {
		return nil, errors.New("source-outage needs a run over many sources")
	}
	db := r.sources[0].source.database
	name := pgx.Identifier{db}.Sanitize()
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := r.store.Pool().Exec(callCtx, "alter database "+name+" allow_connections false"); err != nil {
		return nil, err
	}
	allow := func() error {
		// Even when the run is being stopped: a database left refusing
		// connections would outlive it (--keep, a failed run).
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := r.store.Pool().Exec(callCtx, "alter database "+name+" allow_connections true")
		return err
	}
	if _, err := r.store.Pool().Exec(callCtx,
		`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, db); err != nil {
		return nil, errors.Join(err, allow())
	}
	return allow, nil
}
