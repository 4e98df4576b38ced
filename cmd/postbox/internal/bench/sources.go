package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/store/postgres"
)

// Goals of sources (issue 30).
const (
	// sourcesRatioGoal: the drain rate of many sources, each with a share
	// of the backlog, over that of one source with all of it.
	sourcesRatioGoal = 0.8
	// sourcesP99Goal: the trickle's commit-return → delivery p99, in ms,
	// while one source drains a backlog, and while one source's database
	// is unreachable.
	sourcesP99Goal = 50
)

const (
	// sourcesPoolConns bounds each scratch database's pool of the bench's
	// producers and fills.
	sourcesPoolConns = 10
	// sourcesProducersMax bounds the trickle's producer goroutines.
	sourcesProducersMax = 32
	// sourcesMigrators is how many schemas are migrated at once.
	sourcesMigrators = 4
	// sourcesReadyTimeout bounds the wait, after the relay's start, for
	// every trickling source to deliver.
	sourcesReadyTimeout = time.Minute
	// sourcesSettle is the trickle's unmeasured time between the moment
	// every trickling source delivered and the first measured window.
	sourcesSettle = time.Second
	// sourcesRecoverTimeout bounds the wait for the outage's source to
	// deliver again once its database is back: its relay is reopened
	// after a back-off of at most 30 s.
	sourcesRecoverTimeout = time.Minute
)

// pgTrickleInsert is one event of the trickle, a producer's plain-SQL
// insert in a transaction of its own: the id the bench chose, the columns
// of pgFill, the rest from the table's defaults.
const pgTrickleInsert = `insert into {outbox} (id, aggregate_type, aggregate_id, event_type, payload)
values ($1::uuid, 'order', $2, 'order.created', $3::jsonb)`

// pgSourceLeft counts the events of an outbox still to be delivered, and
// those that failed.
const pgSourceLeft = `select count(*) filter (where status in ('pending', 'processing')),
       count(*) filter (where status = 'failed')
from {outbox}`

// srcDB is a scratch database of sources.
type srcDB struct {
	name string
	// relayURL is the URL `postbox relay` opens it with: the
	// application_name of the run's relay processes, which finds their
	// server processes.
	relayURL string
	// benchURL and pool are the bench's: producers, fills, vacuums.
	benchURL string
	pool     *pgxpool.Pool
}

// benchSource is one source: a migrated schema in a scratch database.
type benchSource struct {
	name, schema string
	db           *srcDB
	st           *postgres.Store // on db.pool
}

func (s *benchSource) sql(q string) string { return withTables(q, s.st.Table) }

// sourcesEnv is what the phases of sources share.
type sourcesEnv struct {
	e   *env
	pg  *pgBackend
	dir string // the sources files
	// dbs are the databases: sources_a and sources_b, which hold every
	// source but the solo one, half each, and sources_solo, which holds it
	// alone.
	dbs []*srcDB
	// all are the sources; all[0] is the solo source, the others are
	// others.
	all    []*benchSource
	others []*benchSource
	files  int
}

// runSources is the sources scenario: see ScenarioSources and
// docs/performance.md.
func runSources(ctx context.Context, e *env, p *progress) (err error) {
	pg, ok := e.b.(*pgBackend)
	if !ok {
		return errors.New("sources needs PostgreSQL: it creates scratch databases of its own on the server")
	}
	s := &sourcesEnv{e: e, pg: pg}
	defer func() { err = errors.Join(err, s.close(ctx)) }()
	if err := s.setup(ctx, p); err != nil {
		return err
	}
	if err := s.manyRatio(ctx, p); err != nil {
		return fmt.Errorf("many_ratio: %w", err)
	}
	if err := s.trickle(ctx, p); err != nil {
		return fmt.Errorf("trickle: %w", err)
	}
	return nil
}

// setup creates the databases and migrates the sources' schemas in them.
func (s *sourcesEnv) setup(ctx context.Context, p *progress) error {
	dir, err := os.MkdirTemp("", "postbox-bench-sources-")
	if err != nil {
		return err
	}
	s.dir = dir
	for _, label := range []string{"sources_a", "sources_b", "sources_solo"} {
		name, err := s.pg.createDatabase(ctx, label)
		if err != nil {
			return err
		}
		db := &srcDB{name: name}
		if db.relayURL, err = s.pg.databaseURL(name, processAppName(s.pg.run)); err != nil {
			return err
		}
		if db.benchURL, err = s.pg.databaseURL(name, "postbox-bench"); err != nil {
			return err
		}
		if err := db.open(ctx); err != nil {
			return err
		}
		s.dbs = append(s.dbs, db)
	}
	n := s.e.cfg.SourcesCount
	for i := range n {
		db := s.dbs[2] // the solo source
		if i > 0 {
			db = s.dbs[(i+1)%2] // odd: a, even: b
		}
		name := fmt.Sprintf("src_%03d", i)
		st, err := postgres.New(db.pool, postgres.Config{Schema: name})
		if err != nil {
			return err
		}
		s.all = append(s.all, &benchSource{name: name, schema: name, db: db, st: st})
	}
	s.others = s.all[1:]
	p.printf("migrating %d schemas: %d in %s, %d in %s, 1 in %s", n, (n)/2, s.dbs[0].name, (n-1)/2, s.dbs[1].name, s.dbs[2].name)
	start := time.Now()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next atomic.Int64
	)
	for range sourcesMigrators {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if _, err := s.all[i].st.Migrate(ctx); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("migrate %s in %s: %w", s.all[i].schema, s.all[i].db.name, err))
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	p.printf("  migrated in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

func (db *srcDB) open(ctx context.Context) error {
	cfg, err := pgxpool.ParseConfig(db.benchURL)
	if err != nil {
		return err
	}
	cfg.MaxConns = sourcesPoolConns
	if db.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return fmt.Errorf("connect to %s: %w", db.name, err)
	}
	return nil
}

// close closes the pools, removes the sources files and drops the
// databases, unless the run keeps them (then Run's end leaves them too).
func (s *sourcesEnv) close(ctx context.Context) error {
	for _, db := range s.dbs {
		if db.pool != nil {
			db.pool.Close()
		}
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
	if s.e.cfg.Keep {
		return nil
	}
	var errs []error
	for _, db := range s.dbs {
		errs = append(errs, s.pg.dropDatabase(context.WithoutCancel(ctx), db.name))
	}
	return errors.Join(errs...)
}

// writeFile writes a sources file listing srcs, and returns its path.
func (s *sourcesEnv) writeFile(srcs []*benchSource) (string, error) {
	var b strings.Builder
	b.WriteString("sources:\n")
	for _, src := range srcs {
		fmt.Fprintf(&b, "  - name: %s\n    db: %s\n    schema: %s\n", src.name, strconv.Quote(src.db.relayURL), src.schema)
	}
	s.files++
	path := filepath.Join(s.dir, fmt.Sprintf("sources-%d.yaml", s.files))
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// relayLog counts the relay's lines that tell of a source not delivering
// or failed, and passes every line on.
type relayLog struct {
	w                     io.Writer
	notDelivering, failed atomic.Int64
}

func (l *relayLog) Write(b []byte) (int, error) {
	l.notDelivering.Add(int64(bytes.Count(b, []byte("source not delivering"))))
	l.failed.Add(int64(bytes.Count(b, []byte("source failed"))))
	return l.w.Write(b)
}

// startRelay starts `postbox relay --sources FILE` over srcs, delivering
// signed webhooks to rec, its other flags at their defaults.
func (s *sourcesEnv) startRelay(ctx context.Context, p *progress, srcs []*benchSource, rec *receiver, died context.CancelCauseFunc) (*relayProcess, *relayLog, error) {
	file, err := s.writeFile(srcs)
	if err != nil {
		return nil, nil, err
	}
	args := []string{"--sources", file, "--webhook-url", rec.url, "--webhook-secret", newSecret(), "--log-level", "warn"}
	p.printf("starting `postbox relay --sources` over %d source(s)", len(srcs))
	log := &relayLog{w: p}
	rp, err := s.e.startRelayProcessLog(ctx, log, args, died)
	return rp, log, err
}

// fill writes a backlog of n events into src, fillChunk per transaction.
func (s *sourcesEnv) fill(ctx context.Context, src *benchSource, n int) error {
	for from := 1; from <= n; from += fillChunk {
		to := min(from+fillChunk-1, n)
		if _, err := src.db.pool.Exec(ctx, src.sql(pgFill), from, to, fillAggregates(0)); err != nil {
			return fmt.Errorf("fill %s: %w", src.name, err)
		}
	}
	return nil
}

// prepare vacuums and analyzes the outbox and lease tables of srcs (the
// server's autovacuum may be off), then checkpoints, so each phase starts
// alike.
func (s *sourcesEnv) prepare(ctx context.Context, srcs []*benchSource) error {
	for _, src := range srcs {
		for _, t := range []string{"outbox_events", "outbox_leases"} {
			if _, err := src.db.pool.Exec(ctx, "vacuum analyze "+src.st.Table(t)); err != nil {
				return fmt.Errorf("vacuum %s.%s: %w", src.schema, t, err)
			}
		}
	}
	if _, err := s.pg.workPool.Exec(ctx, pgCheckpoint); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			return nil
		}
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// waitSettled waits until the outboxes of srcs hold nothing pending or
// processing, and fails if an event failed.
func waitSettled(ctx context.Context, srcs []*benchSource) error {
	deadline := time.Now().Add(stallTimeout)
	for _, src := range srcs {
		for {
			var left, failed int64
			if err := src.db.pool.QueryRow(ctx, src.sql(pgSourceLeft)).Scan(&left, &failed); err != nil {
				return fmt.Errorf("%s: %w", src.name, err)
			}
			if failed > 0 {
				return fmt.Errorf("%s: %d events failed", src.name, failed)
			}
			if left == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: every event published, but %d still pending or processing after %s", src.name, left, stallTimeout)
			}
			if !sleep(ctx, 20*time.Millisecond) {
				return ctx.Err()
			}
		}
	}
	return nil
}

// sourcesDrain is how one drain of many_ratio went.
type sourcesDrain struct {
	events int
	// rate is events over the time from the first delivery to the last;
	// rate90 is 90 % of them over the time from the first delivery to the
	// moment 90 % were delivered: the drain without its tail.
	rate, rate90 float64
	// firstAfter is the time from the relay's start to its first
	// delivery.
	firstAfter time.Duration
	// cpu is the relay process's CPU time, and server its server
	// processes', from its start to its last delivery.
	cpu, server   time.Duration
	rssKiB        int64
	notDelivering int64
}

// drain fills perSource events into each of srcs, then drains them all
// with one `postbox relay --sources` process delivering to a local
// receiver.
func (s *sourcesEnv) drain(ctx context.Context, p *progress, srcs []*benchSource, perSource int) (_ sourcesDrain, err error) {
	total := perSource * len(srcs)
	p.printf("filling %d events into each of %d source(s): %d in all", perSource, len(srcs), total)
	start := time.Now()
	for _, src := range srcs {
		if err := s.fill(ctx, src, perSource); err != nil {
			return sourcesDrain{}, err
		}
	}
	if err := s.prepare(ctx, srcs); err != nil {
		return sourcesDrain{}, err
	}
	p.printf("  filled, vacuumed and analyzed in %s", time.Since(start).Round(time.Millisecond))
	rec, err := startReceiver(0)
	if err != nil {
		return sourcesDrain{}, err
	}
	defer rec.close()

	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() { err = relayExit(parent, ctx, err) }()
	server := s.e.processServerCPU(ctx)
	started := time.Now()
	rp, log, err := s.startRelay(ctx, p, srcs, rec, cancel)
	if err != nil {
		return sourcesDrain{}, err
	}
	defer func() { _, _ = rp.stop() }()
	var (
		th         throttle
		last       = int64(-1)
		lastChange = time.Now()
	)
	for {
		got := rec.distinct()
		if got >= int64(total) {
			break
		}
		now := time.Now()
		if got != last {
			last, lastChange = got, now
		} else if now.Sub(lastChange) > stallTimeout {
			return sourcesDrain{}, fmt.Errorf("stalled at %d of %d events delivered", got, total)
		}
		if th.due() {
			p.printf("  %d/%d delivered", got, total)
		}
		if !sleep(ctx, pollInterval) {
			return sourcesDrain{}, ctx.Err()
		}
	}
	d := sourcesDrain{events: total, server: server(), notDelivering: log.notDelivering.Load()}
	d.cpu, _ = cpuTime(strconv.Itoa(rp.pid)) // 0 where /proc is missing
	first, lastAt, _ := rec.span()
	d.firstAfter = first.Sub(started)
	if span := lastAt.Sub(first); span > 0 {
		d.rate = float64(total) / span.Seconds()
	}
	n90 := max(1, total*9/10)
	if at, ok := rec.arrivalAt(n90); ok && at.After(first) {
		d.rate90 = float64(n90) / at.Sub(first).Seconds()
	}
	if err := waitSettled(ctx, srcs); err != nil {
		return sourcesDrain{}, err
	}
	if d.rssKiB, err = rp.stop(); err != nil {
		return sourcesDrain{}, err
	}
	p.printf("  delivered %d events at %.0f/s (first → last delivery; %.0f/s to 90 %%); first delivery %s after the start; relay CPU %s (%.1f µs an event), peak RSS %.1f MiB; %d 'not delivering' lines",
		total, d.rate, d.rate90, d.firstAfter.Round(time.Millisecond), d.cpu, perEventMicros(d.cpu, total), mib(d.rssKiB), d.notDelivering)
	return d, nil
}

func perEventMicros(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Microsecond) / float64(n)
}

// manyRatio is phase many_ratio: one source with SourcesEvents events,
// then every source with its share of them, each drained by one `postbox
// relay --sources` process.
func (s *sourcesEnv) manyRatio(ctx context.Context, p *progress) error {
	n, count := s.e.cfg.SourcesEvents, len(s.all)
	perSource := max(1, n/count)
	p.printf("many_ratio: 1 source × %d events, then %d sources × %d events", n, count, perSource)
	one, err := s.drain(ctx, p, s.all[:1], n)
	if err != nil {
		return fmt.Errorf("one source: %w", err)
	}
	many, err := s.drain(ctx, p, s.all, perSource)
	if err != nil {
		return fmt.Errorf("%d sources: %w", count, err)
	}
	if one.rate <= 0 || many.rate <= 0 {
		return errors.New("a drain delivered everything at once: raise --events")
	}
	r := s.e.rep
	oneWhat := fmt.Sprintf("1 source × %d events", n)
	manyWhat := fmt.Sprintf("%d sources × %d events", count, perSource)
	for _, d := range []struct {
		key, what string
		d         sourcesDrain
	}{{"one", oneWhat, one}, {"many", manyWhat, many}} {
		r.add(ScenarioSources, "sources."+d.key+"_rate", "drain, "+d.what+", first → last delivery", d.d.rate, UnitEventsPerSec, nil)
		if d.d.rate90 > 0 {
			r.add(ScenarioSources, "sources."+d.key+"_rate90", "drain, "+d.what+", first delivery → 90 % delivered", d.d.rate90, UnitEventsPerSec, nil)
		}
		r.add(ScenarioSources, "sources."+d.key+"_first", "drain, "+d.what+": relay start → first delivery", d.d.firstAfter.Seconds(), UnitSeconds, nil)
		if d.d.cpu > 0 {
			r.add(ScenarioSources, "sources."+d.key+"_cpu", "CPU per event, `postbox relay` process, "+d.what, perEventMicros(d.d.cpu, d.d.events), UnitMicros, nil)
		}
		if d.d.server > 0 {
			r.add(ScenarioSources, "sources."+d.key+"_server_cpu", "CPU per event, the relay's server processes, "+d.what, perEventMicros(d.d.server, d.d.events), UnitMicros, nil)
		}
		r.add(ScenarioSources, "sources."+d.key+"_rss", "relay peak resident memory, "+d.what, mib(d.d.rssKiB), UnitMiB, nil)
		r.add(ScenarioSources, "sources."+d.key+"_not_delivering", "'source not delivering' log lines, "+d.what, float64(d.d.notDelivering), UnitLines, nil)
	}
	r.add(ScenarioSources, "sources.many_ratio", "drain rate "+manyWhat+" / "+oneWhat, many.rate/one.rate, UnitRatio, atLeast(sourcesRatioGoal))
	return nil
}

// trickleEvent is one event of a trickle.
type trickleEvent struct {
	id  uuid.UUID
	src int
	// committed is when its COMMIT returned; commit is how long the
	// COMMIT took.
	committed time.Time
	commit    time.Duration
}

// trickle commits one-event transactions (BEGIN, the plain-SQL insert,
// COMMIT) into each of its sources at perSec a second, spread evenly.
type trickle struct {
	srcs   []*benchSource
	stopCh chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	events []trickleEvent
	err    error
	// ready: which sources have had an event delivered (see ready).
	ready     []bool
	readyN    int
	readyFrom int
	// arrivedN events were seen delivered; pending are the indexes of
	// the others among events[:scanFrom] (see arrived).
	arrivedN int64
	pending  []int
	scanFrom int
}

// startTrickle starts a trickle of perSec one-event transactions a second
// into each of srcs, its event numbers from seq.
func startTrickle(ctx context.Context, srcs []*benchSource, perSec int, seq *atomic.Int64) *trickle {
	t := &trickle{srcs: srcs, stopCh: make(chan struct{}), ready: make([]bool, len(srcs))}
	total := len(srcs) * perSec
	tokens := make(chan int, max(1, total/10))
	producers := min(sourcesProducersMax, max(4, total/50))
	interval := time.Second / time.Duration(total)
	t.wg.Go(func() {
		defer close(tokens)
		start := time.Now()
		for i := 0; ; i++ {
			if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
				timer := time.NewTimer(wait)
				select {
				case <-timer.C:
				case <-t.stopCh:
					timer.Stop()
					return
				case <-ctx.Done():
					timer.Stop()
					return
				}
			}
			select {
			case tokens <- i % len(srcs):
			case <-t.stopCh:
				return
			case <-ctx.Done():
				return
			}
		}
	})
	for range producers {
		t.wg.Go(func() {
			for i := range tokens {
				ev, err := t.commit(ctx, i, seq.Add(1))
				t.mu.Lock()
				if err != nil {
					if t.err == nil && ctx.Err() == nil {
						t.err = fmt.Errorf("trickle into %s: %w", srcs[i].name, err)
					}
				} else {
					t.events = append(t.events, ev)
				}
				t.mu.Unlock()
			}
		})
	}
	return t
}

// commit commits one event into source i in a transaction of its own.
func (t *trickle) commit(ctx context.Context, i int, n int64) (trickleEvent, error) {
	src := t.srcs[i]
	ev := orderEvent(n)
	tx, err := src.db.pool.Begin(ctx)
	if err != nil {
		return trickleEvent{}, err
	}
	if _, err := tx.Exec(ctx, src.sql(pgTrickleInsert), ev.ID.String(), ev.AggregateID, string(ev.Payload)); err != nil {
		_ = tx.Rollback(ctx)
		return trickleEvent{}, err
	}
	at := time.Now()
	if err := tx.Commit(ctx); err != nil {
		return trickleEvent{}, err
	}
	now := time.Now()
	return trickleEvent{id: ev.ID, src: i, committed: now, commit: now.Sub(at)}, nil
}

// stop stops the trickle once its transactions in flight are done, and
// returns its first error.
func (t *trickle) stop() error {
	close(t.stopCh)
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// failed returns the trickle's first error so far.
func (t *trickle) failed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// isReady reports whether every source of the trickle has had an event
// delivered to rec.
func (t *trickle) isReady(rec *receiver) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ; t.readyFrom < len(t.events); t.readyFrom++ {
		ev := t.events[t.readyFrom]
		if t.ready[ev.src] {
			continue
		}
		if _, ok := rec.arrival(ev.id); !ok {
			break // arrivals are checked in commit order
		}
		t.ready[ev.src] = true
		t.readyN++
	}
	return t.readyN == len(t.srcs)
}

// arrived counts the trickle's events delivered to rec. It checks only
// the events it has not seen delivered yet.
func (t *trickle) arrived(rec *receiver) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ; t.scanFrom < len(t.events); t.scanFrom++ {
		t.pending = append(t.pending, t.scanFrom)
	}
	t.pending = slices.DeleteFunc(t.pending, func(i int) bool {
		_, ok := rec.arrival(t.events[i].id)
		if ok {
			t.arrivedN++
		}
		return ok
	})
	return t.arrivedN
}

// lost waits up to deliveryTimeout for every event of the stopped trickle
// to reach rec, and returns how many did not.
func (t *trickle) lost(ctx context.Context, rec *receiver) (int, error) {
	deadline := time.Now().Add(deliveryTimeout)
	for {
		missing := len(t.events) - int(t.arrived(rec))
		if missing == 0 || time.Now().After(deadline) {
			return missing, nil
		}
		if !sleep(ctx, 10*time.Millisecond) {
			return 0, ctx.Err()
		}
	}
}

// trickleWindow is what the trickle's events committed in one window
// went through.
type trickleWindow struct {
	events, lost int
	rate         float64
	// p50 and p99 are of commit-return → delivery; commitP50 and
	// commitP99 of the COMMIT's round trip.
	p50, p99, max        time.Duration
	commitP50, commitP99 time.Duration
}

// window sums up the events whose COMMIT returned in [from, to); those
// that did not reach rec are lost.
func (t *trickle) window(rec *receiver, from, to time.Time) (trickleWindow, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lat, commits []time.Duration
	var w trickleWindow
	for _, ev := range t.events {
		if ev.committed.Before(from) || !ev.committed.Before(to) {
			continue
		}
		w.events++
		commits = append(commits, ev.commit)
		if rec == nil {
			continue
		}
		if at, ok := rec.arrival(ev.id); ok {
			lat = append(lat, max(0, at.Sub(ev.committed)))
		} else {
			w.lost++
		}
	}
	if len(commits) == 0 {
		return w, fmt.Errorf("no event committed in the window of %s", to.Sub(from).Round(time.Millisecond))
	}
	w.rate = float64(w.events) / to.Sub(from).Seconds()
	slices.Sort(commits)
	w.commitP50, w.commitP99 = percentile(commits, 0.50), percentile(commits, 0.99)
	if len(lat) > 0 {
		slices.Sort(lat)
		w.p50, w.p99, w.max = percentile(lat, 0.50), percentile(lat, 0.99), lat[len(lat)-1]
	}
	return w, nil
}

// windowBare is window for a trickle with no relay: its COMMITs.
func (t *trickle) windowBare(from, to time.Time) (trickleWindow, error) {
	return t.window(nil, from, to)
}

// trickle is phases trickle and outage, with the bare-commit baseline
// before them: see docs/performance.md.
func (s *sourcesEnv) trickle(ctx context.Context, p *progress) (err error) {
	cfg := s.e.cfg
	window, perSec := cfg.SourcesWindow, cfg.SourcesPerSecond
	others, solo := s.others, s.all[0]
	rate := perSec * len(others)
	var seq atomic.Int64
	r := s.e.rep

	// The outboxes as the drains of many_ratio left them (the server's
	// autovacuum may be off).
	if err := s.prepare(ctx, s.all); err != nil {
		return err
	}

	// Bare commits: the trickle with no relay running.
	p.printf("bare commits: %d sources × %d one-event transactions/s (%d/s in all) for %s, no relay", len(others), perSec, rate, window)
	bare := startTrickle(ctx, others, perSec, &seq)
	start := time.Now()
	if !sleep(ctx, window) {
		_ = bare.stop()
		return ctx.Err()
	}
	end := time.Now()
	if err := bare.stop(); err != nil {
		return err
	}
	// The first fifth, at most a second, opens the connections.
	bw, err := bare.windowBare(start.Add(min(window/5, time.Second)), end)
	if err != nil {
		return err
	}
	p.printf("  %d commits at %.0f/s: COMMIT p50 %s, p99 %s", bw.events, bw.rate, bw.commitP50.Round(time.Microsecond), bw.commitP99.Round(time.Microsecond))
	r.addNoRelay(ScenarioSources, "sources.bare_commit_p50", "bare INSERT + COMMIT: COMMIT p50, no relay", ms(bw.commitP50), UnitMillis, nil)
	r.addNoRelay(ScenarioSources, "sources.bare_commit_p99", "bare INSERT + COMMIT: COMMIT p99, no relay", ms(bw.commitP99), UnitMillis, nil)
	r.addNoRelay(ScenarioSources, "sources.bare_commit_rate", fmt.Sprintf("bare INSERT + COMMIT: rate reached, %d/s asked", rate), bw.rate, UnitTxPerSec, nil)
	for _, src := range others { // what the bare commits left
		if _, err := src.db.pool.Exec(ctx, "truncate "+src.st.Table("outbox_events")); err != nil {
			return fmt.Errorf("truncate %s: %w", src.name, err)
		}
	}

	rec, err := startReceiver(0)
	if err != nil {
		return err
	}
	defer rec.close()
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() { err = relayExit(parent, ctx, err) }()
	started := time.Now()
	rp, log, err := s.startRelay(ctx, p, s.all, rec, cancel)
	if err != nil {
		return err
	}
	defer func() { _, _ = rp.stop() }()
	tr := startTrickle(ctx, others, perSec, &seq)
	stopped := false
	defer func() {
		if !stopped {
			_ = tr.stop()
		}
	}()

	// Trickle alone, once every trickling source delivered.
	p.printf("trickle: %d sources × %d/s; waiting for each to deliver", len(others), perSec)
	for !tr.isReady(rec) {
		if err := tr.failed(); err != nil {
			return err
		}
		if time.Since(started) > sourcesReadyTimeout {
			return fmt.Errorf("not every trickling source delivered %s after the relay's start", sourcesReadyTimeout)
		}
		if !sleep(ctx, 10*time.Millisecond) {
			return ctx.Err()
		}
	}
	readyAfter := time.Since(started)
	startLines := log.notDelivering.Load()
	p.printf("  every trickling source delivered %s after the relay's start (%d 'not delivering' lines); measuring the trickle alone for %s",
		readyAfter.Round(time.Millisecond), startLines, window)
	if !sleep(ctx, sourcesSettle) {
		return ctx.Err()
	}
	aloneFrom := time.Now()
	if !sleep(ctx, window) {
		return ctx.Err()
	}
	aloneTo := time.Now()

	// The backlog, written while the relay runs and the trickle goes on.
	backlog := cfg.SourcesBacklog
	p.printf("backlog: filling %d events into %s while the trickle goes on", backlog, solo.name)
	fillStart := time.Now()
	if err := s.fill(ctx, solo, backlog); err != nil {
		return err
	}
	if _, err := solo.db.pool.Exec(ctx, "analyze "+solo.st.Table("outbox_events")); err != nil {
		return err
	}
	backlogFrom := time.Now()
	backlogDelivered := func() int64 { return rec.distinct() - tr.arrived(rec) }
	left := int64(backlog) - backlogDelivered()
	p.printf("  filled in %s, %d of them left; measuring the trickle until the backlog is delivered, %s at most",
		backlogFrom.Sub(fillStart).Round(time.Millisecond), left, window)
	backlogTo := time.Time{}
	var (
		th         throttle
		last       = int64(-1)
		lastChange = time.Now()
	)
	for {
		if err := tr.failed(); err != nil {
			return err
		}
		got := backlogDelivered()
		now := time.Now()
		if backlogTo.IsZero() && (got >= int64(backlog) || now.Sub(backlogFrom) >= window) {
			backlogTo = now
			p.printf("  measure window ends after %s, %d of the backlog delivered", now.Sub(backlogFrom).Round(time.Millisecond), got)
		}
		if got >= int64(backlog) {
			break
		}
		if got != last {
			last, lastChange = got, now
		} else if now.Sub(lastChange) > stallTimeout {
			return fmt.Errorf("backlog: stalled at %d of %d delivered", got, backlog)
		}
		if th.due() {
			p.printf("  backlog %d/%d delivered", got, backlog)
		}
		if !sleep(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
	backlogDone := time.Now()
	if err := waitSettled(ctx, []*benchSource{solo}); err != nil {
		return err
	}
	if _, err := solo.db.pool.Exec(ctx, "vacuum analyze "+solo.st.Table("outbox_events")); err != nil {
		return err
	}
	backlogRate := float64(backlog) / backlogDone.Sub(fillStart).Seconds()
	p.printf("  backlog delivered %s after the fill started (%.0f/s)", backlogDone.Sub(fillStart).Round(time.Millisecond), backlogRate)

	// The outage: the solo source's database refuses connections and its
	// sessions are ended, while the others trickle.
	if !sleep(ctx, window/5) {
		return ctx.Err()
	}
	failedBefore := log.failed.Load()
	ndBefore := log.notDelivering.Load()
	p.printf("outage: %s refuses connections and its sessions are ended, for %s, while the trickle goes on", solo.db.name, window)
	solo.db.pool.Close()
	outageFrom := time.Now()
	if err := s.setAllowConnections(ctx, solo.db, false); err != nil {
		return err
	}
	restored := false
	defer func() { // a run cut short (--keep) leaves no database refusing connections
		if !restored {
			restoreCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = s.setAllowConnections(restoreCtx, solo.db, true)
		}
	}()
	if !sleep(ctx, window) {
		return ctx.Err()
	}
	outageTo := time.Now()
	if err := s.setAllowConnections(ctx, solo.db, true); err != nil {
		return err
	}
	restored = true
	alive := 1.0
	select {
	case <-rp.exited:
		alive = 0
	default:
	}
	p.printf("  %s is back; the relay process is %s; %d 'source failed' and %d 'not delivering' lines during the outage",
		solo.db.name, map[bool]string{true: "alive", false: "gone"}[alive == 1], log.failed.Load()-failedBefore, log.notDelivering.Load()-ndBefore)
	// The solo source delivers again.
	if err := solo.db.open(ctx); err != nil {
		return err
	}
	var recovery time.Duration
	if alive == 1 {
		if recovery, err = s.recover(ctx, p, solo, rec, &seq, outageTo); err != nil {
			return err
		}
	}
	stopped = true
	if err := tr.stop(); err != nil {
		return err
	}
	lost, err := tr.lost(ctx, rec)
	if err != nil {
		return err
	}
	rss, serr := rp.stop()
	if serr != nil && alive == 1 {
		return serr
	}

	alone, err := tr.window(rec, aloneFrom, aloneTo)
	if err != nil {
		return fmt.Errorf("trickle alone: %w", err)
	}
	during, err := tr.window(rec, backlogFrom, backlogTo)
	if err != nil {
		return fmt.Errorf("trickle during the backlog (raise --sources-backlog): %w", err)
	}
	outage, err := tr.window(rec, outageFrom, outageTo)
	if err != nil {
		return fmt.Errorf("trickle during the outage: %w", err)
	}
	for _, w := range []struct {
		what string
		w    trickleWindow
	}{{"alone", alone}, {"during the backlog", during}, {"during the outage", outage}} {
		p.printf("trickle %s: %d events at %.0f/s: p50 %s, p99 %s, max %s; COMMIT p50 %s, p99 %s; %d lost",
			w.what, w.w.events, w.w.rate, w.w.p50.Round(time.Microsecond), w.w.p99.Round(time.Microsecond), w.w.max.Round(time.Microsecond),
			w.w.commitP50.Round(time.Microsecond), w.w.commitP99.Round(time.Microsecond), w.w.lost)
	}
	trick := fmt.Sprintf("%d sources × %d/s", len(others), perSec)
	r.add(ScenarioSources, "sources.start_ready", "relay start → every trickling source delivered, "+strconv.Itoa(len(s.all))+" sources", readyAfter.Seconds(), UnitSeconds, nil)
	r.add(ScenarioSources, "sources.start_not_delivering", "'source not delivering' log lines until then", float64(startLines), UnitLines, nil)
	r.add(ScenarioSources, "sources.alone_p50", "trickle alone, commit return → delivery p50, "+trick, ms(alone.p50), UnitMillis, nil)
	r.add(ScenarioSources, "sources.alone_p99", "trickle alone, commit return → delivery p99, "+trick, ms(alone.p99), UnitMillis, nil)
	r.add(ScenarioSources, "sources.alone_commit_p99", "trickle alone, COMMIT p99", ms(alone.commitP99), UnitMillis, nil)
	r.add(ScenarioSources, "sources.alone_rate", "trickle alone, commit rate reached", alone.rate, UnitEventsPerSec, nil)
	bw2 := fmt.Sprintf("one source drains %d", backlog)
	r.add(ScenarioSources, "sources.backlog_p50", "trickle while "+bw2+", commit return → delivery p50", ms(during.p50), UnitMillis, nil)
	r.add(ScenarioSources, "sources.backlog_p99", "trickle while "+bw2+", commit return → delivery p99", ms(during.p99), UnitMillis, atMost(sourcesP99Goal))
	r.add(ScenarioSources, "sources.backlog_share", "the relay's share: backlog p99 − alone p99", ms(during.p99-alone.p99), UnitMillis, nil)
	r.add(ScenarioSources, "sources.backlog_commit_p99", "trickle while "+bw2+", COMMIT p99", ms(during.commitP99), UnitMillis, nil)
	r.add(ScenarioSources, "sources.backlog_window", "measured window during the backlog (fill end → backlog delivered, or the window)", backlogTo.Sub(backlogFrom).Seconds(), UnitSeconds, nil)
	r.add(ScenarioSources, "sources.backlog_left", "backlog left to deliver as the window started", float64(left), UnitEvents, nil)
	r.add(ScenarioSources, "sources.backlog_rate", "backlog delivered / time from its fill's start", backlogRate, UnitEventsPerSec, nil)
	r.add(ScenarioSources, "sources.outage_p50", "trickle while one database is unreachable, commit return → delivery p50", ms(outage.p50), UnitMillis, nil)
	r.add(ScenarioSources, "sources.outage_p99", "trickle while one database is unreachable, commit return → delivery p99", ms(outage.p99), UnitMillis, atMost(sourcesP99Goal))
	r.add(ScenarioSources, "sources.outage_lost", "trickle events committed during the outage not delivered", float64(outage.lost), UnitEvents, atMost(0))
	r.add(ScenarioSources, "sources.lost", "trickle events not delivered, whole run", float64(lost), UnitEvents, atMost(0))
	r.add(ScenarioSources, "sources.outage_alive", "relay processes alive after the outage", alive, UnitProcesses, atLeast(1))
	r.add(ScenarioSources, "sources.outage_failed", "'source failed' log lines during the outage", float64(log.failed.Load()-failedBefore), UnitLines, nil)
	if alive == 1 {
		r.add(ScenarioSources, "sources.outage_recovery", "database back → its source's first delivery", recovery.Seconds(), UnitSeconds, nil)
	}
	r.add(ScenarioSources, "sources.trickle_rss", "relay peak resident memory, trickle, backlog and outage", mib(rss), UnitMiB, nil)
	if alive == 0 {
		return fmt.Errorf("the relay process exited during the outage: %s", exitText(rp.err))
	}
	return nil
}

// setAllowConnections lets db take connections, or refuses them and ends
// its sessions.
func (s *sourcesEnv) setAllowConnections(ctx context.Context, db *srcDB, allow bool) error {
	id := pgx.Identifier{db.name}.Sanitize()
	if _, err := s.pg.workPool.Exec(ctx, fmt.Sprintf("alter database %s allow_connections %t", id, allow)); err != nil {
		return fmt.Errorf("alter database %s: %w", db.name, err)
	}
	if allow {
		return nil
	}
	_, err := s.pg.workPool.Exec(ctx, "select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()", db.name)
	if err != nil {
		return fmt.Errorf("end the sessions of %s: %w", db.name, err)
	}
	return nil
}

// recover commits an event into src every 100 ms until one reaches rec,
// and returns the time from since to the first arrival.
func (s *sourcesEnv) recover(ctx context.Context, p *progress, src *benchSource, rec *receiver, seq *atomic.Int64, since time.Time) (time.Duration, error) {
	t := &trickle{srcs: []*benchSource{src}}
	var sent []trickleEvent
	for {
		for _, ev := range sent {
			if at, ok := rec.arrival(ev.id); ok {
				d := at.Sub(since)
				p.printf("  %s delivers again: its first event since arrived %s after its database came back", src.name, d.Round(time.Millisecond))
				return d, nil
			}
		}
		if time.Since(since) > sourcesRecoverTimeout {
			return 0, fmt.Errorf("%s: nothing delivered %s after its database came back", src.name, sourcesRecoverTimeout)
		}
		if ev, err := t.commit(ctx, 0, seq.Add(1)); err == nil {
			sent = append(sent, ev)
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return 0, ctx.Err()
		}
	}
}
