package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store/postgres"
)

// Goals of latency, in milliseconds, in both modes: at up to
// latencyLowRate events/s, and above.
const (
	latencyLowRate    = 200
	latencyP50GoalLow = 2
	latencyP99GoalLow = 5
	latencyP50Goal    = 3
	latencyP99Goal    = 10
)

// latencyGoals are the p50 and p99 goals at rate events/s.
func latencyGoals(rate int) (p50, p99 *Goal) {
	if rate <= latencyLowRate {
		return atMost(latencyP50GoalLow), atMost(latencyP99GoalLow)
	}
	return atMost(latencyP50Goal), atMost(latencyP99Goal)
}

// slotTimeout bounds the wait for a `postbox relay --wal` to stream its
// slot.
const slotTimeout = 30 * time.Second

const (
	// deliveryTimeout bounds the wait for the last events of a rate.
	deliveryTimeout = 30 * time.Second
	// maxProducers bounds the producer goroutines of a rate.
	maxProducers = 32
	// latencyWarmMax bounds the unmeasured run at each rate before the
	// measured one.
	latencyWarmMax = 2 * time.Second
	// idleWindowMax bounds the idle CPU measure.
	idleWindowMax = 5 * time.Second
)

// runLatency commits one-event transactions at each rate for
// Config.Duration (after an unmeasured fifth of it, at most 2s) while a
// `postbox relay` child process, with its defaults, delivers them as signed
// webhooks to a local receiver, and reports the time from each commit to
// the event's arrival. How soon the relay hears of new events is the
// command's own doing (LISTEN/NOTIFY, or its poll). Then it measures the
// CPU the idle relay process and its server processes use.
func runLatency(ctx context.Context, e *env, p *progress) error {
	return latency(ctx, e, p, false)
}

// runLatencyWAL is runLatency in WAL mode: the outbox as `postbox migrate
// --wal` leaves it (producers' commits skip the notify trigger) and
// `postbox relay --wal`, streaming the outbox's inserts from a replication
// slot; the clock starts once the relay streams.
func runLatencyWAL(ctx context.Context, e *env, p *progress) error {
	return latency(ctx, e, p, true)
}

// latency is runLatency, in WAL mode when wal is set.
func latency(ctx context.Context, e *env, p *progress, wal bool) (err error) {
	scenario, key, label := ScenarioLatency, "latency.", "latency"
	if wal {
		scenario, key, label = ScenarioLatencyWAL, "latency_wal.", "latency_wal"
	}
	sc, err := e.b.newScratch(ctx, label)
	if err != nil {
		return err
	}
	var stream *postgres.WAL
	if wal {
		if stream, err = walMode(ctx, sc); err != nil {
			return err
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
	args := relayArgs(sc, rec.url, 0)
	if wal {
		args = append(args, "--wal")
	}
	p.printf("starting `postbox relay %s`", strings.Join(args[len(args)-3:], " "))
	rp, err := e.startRelayProcess(ctx, p, args, cancel)
	if err != nil {
		return err
	}
	defer func() {
		if _, serr := rp.stop(); err == nil {
			err = serr
		}
	}()
	if wal {
		if err := waitStreaming(ctx, p, stream); err != nil {
			return err
		}
	}

	var seq atomic.Int64
	p.printf("warming up: one event through the relay")
	if _, err := latencyRun(ctx, sc, rec, &seq, 1, 1, 0); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	for _, r := range e.cfg.Rates {
		// A producer commits up to 250 events/s (one every 4 ms), so
		// the producers are few enough not to crowd the machine with
		// connections that mostly wait.
		producers := min(maxProducers, max(2, r/250))
		// Steady state is measured: the producers' connections are opened
		// and the relay has found its pace before the clock starts.
		warm := min(e.cfg.Duration/5, latencyWarmMax)
		p.printf("warming up at %d/s for %s (%d producers)", r, warm, producers)
		if _, err := latencyRun(ctx, sc, rec, &seq, r, producers, warm); err != nil {
			return fmt.Errorf("%d/s warm-up: %w", r, err)
		}
		p.printf("committing one-event transactions at %d/s for %s (%d producers)", r, e.cfg.Duration, producers)
		res, err := latencyRun(ctx, sc, rec, &seq, r, producers, e.cfg.Duration)
		if err != nil {
			return fmt.Errorf("%d/s: %w", r, err)
		}
		p.printf("  %d events at %.0f/s: p50 %s, p99 %s, max %s", res.events, res.rate,
			res.p50.Round(time.Microsecond), res.p99.Round(time.Microsecond), res.max.Round(time.Microsecond))
		rs := strconv.Itoa(r)
		p50Goal, p99Goal := latencyGoals(r)
		e.rep.add(scenario, key+"p50_"+rs, "commit → delivery p50 at "+rs+"/s", ms(res.p50), UnitMillis, p50Goal)
		e.rep.add(scenario, key+"p99_"+rs, "commit → delivery p99 at "+rs+"/s", ms(res.p99), UnitMillis, p99Goal)
		e.rep.add(scenario, key+"max_"+rs, "commit → delivery max at "+rs+"/s", ms(res.max), UnitMillis, nil)
		e.rep.add(scenario, key+"rate_"+rs, "commit rate reached, "+rs+"/s asked", res.rate, UnitEventsPerSec, nil)
	}
	if wal {
		if err := afterBurst(ctx, e, p, sc, rec, &seq); err != nil {
			return err
		}
	}
	if err := idleCPU(ctx, e, p, scenario, key, rp.pid); err != nil {
		return err
	}
	if _, err := rp.stop(); err != nil {
		return err
	}
	return e.release(ctx, sc)
}

// Right after a burst (latency-wal, a burst of Config.DrainEvents): the
// window, from the moment it is drained, in which new events are measured.
const (
	afterBurstWindow   = time.Second
	afterBurstRate     = latencyLowRate
	afterBurstP50Goal  = 5
	afterBurstProducer = 2
)

// afterBurst measures WAL mode right after a burst: Config.DrainEvents
// events written in
// transactions of walFillChunk, drained by the relay, then one-event
// transactions at afterBurstRate for afterBurstWindow from the moment the
// outbox is empty. The stream still decodes the drain's own writes then
// (its claims and settles): new events must not wait for it.
func afterBurst(ctx context.Context, e *env, p *progress, sc scratch, rec *receiver, seq *atomic.Int64) error {
	burstEvents := e.cfg.DrainEvents
	before := rec.distinct()
	start := time.Now()
	if err := fillBacklogBy(ctx, p, sc, burstEvents, walFillChunk); err != nil {
		return err
	}
	published := func() int64 { return rec.distinct() - before }
	if _, err := waitDrained(ctx, p, "the burst", sc.outbox(), published, burstEvents, start); err != nil {
		return err
	}
	p.printf("burst of %d drained after %s; committing one-event transactions at %d/s for %s",
		burstEvents, time.Since(start).Round(time.Millisecond), afterBurstRate, afterBurstWindow)
	res, err := latencyRun(ctx, sc, rec, seq, afterBurstRate, afterBurstProducer, afterBurstWindow)
	if err != nil {
		return fmt.Errorf("after the burst: %w", err)
	}
	p.printf("  %d events within %s of the drain's end: p50 %s, p99 %s, max %s", res.events, afterBurstWindow,
		res.p50.Round(time.Microsecond), res.p99.Round(time.Microsecond), res.max.Round(time.Microsecond))
	what := fmt.Sprintf("commit → delivery %%s at %d/s within %s of a %d-event burst's drain (%d per transaction)", afterBurstRate, afterBurstWindow, burstEvents, walFillChunk)
	e.rep.add(ScenarioLatencyWAL, "latency_wal.after_burst_p50", fmt.Sprintf(what, "p50"), ms(res.p50), UnitMillis, atMost(afterBurstP50Goal))
	e.rep.add(ScenarioLatencyWAL, "latency_wal.after_burst_p99", fmt.Sprintf(what, "p99"), ms(res.p99), UnitMillis, nil)
	return nil
}

// latencyResult is the outcome of one rate.
type latencyResult struct {
	events        int
	rate          float64
	p50, p99, max time.Duration
}

// latencyRun commits one-event transactions at perSec for d with
// producers goroutines that share one pacer (a single event when d is 0),
// waits for their arrival at rec, and returns the commit-to-arrival
// percentiles, counted from just before each producer's transaction (one
// statement that commits as it ends).
func latencyRun(ctx context.Context, sc scratch, rec *receiver, seq *atomic.Int64, perSec, producers int, d time.Duration) (latencyResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A tenth of a second of tokens: producers that fall behind lower the
	// rate reached rather than run past d.
	tokens := make(chan struct{}, max(1, perSec/10))
	var (
		mu      sync.Mutex
		commits = map[uuid.UUID]time.Time{}
		errs    []error
		wg      sync.WaitGroup
	)
	for range producers {
		wg.Go(func() {
			for range tokens {
				ev := orderEvent(seq.Add(1))
				// The clock starts as the producer sends its one-statement
				// transaction, which commits as it ends: the latency
				// includes the commit, as the acceptance run counts
				// it (from just before COMMIT).
				at := time.Now()
				if err := sc.enqueue(ctx, ev); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					cancel()
					continue
				}
				mu.Lock()
				commits[ev.ID] = at
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	if d == 0 {
		tokens <- struct{}{}
		close(tokens)
	} else {
		pace(ctx, tokens, perSec, d, start)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(errs) > 0 {
		return latencyResult{}, fmt.Errorf("enqueue: %w", errors.Join(errs...))
	}
	if err := ctx.Err(); err != nil {
		return latencyResult{}, err
	}

	lat := make([]time.Duration, 0, len(commits))
	deadline := time.Now().Add(deliveryTimeout)
	for id, committed := range commits {
		for {
			arrived, ok := rec.arrival(id)
			if ok {
				lat = append(lat, max(0, arrived.Sub(committed)))
				break
			}
			if time.Now().After(deadline) {
				missing := 0
				for id := range commits {
					if _, ok := rec.arrival(id); !ok {
						missing++
					}
				}
				return latencyResult{}, fmt.Errorf("%d of %d events not delivered %s after the last commit", missing, len(commits), deliveryTimeout)
			}
			if !sleep(ctx, time.Millisecond) {
				return latencyResult{}, ctx.Err()
			}
		}
	}
	slices.Sort(lat)
	return latencyResult{
		events: len(lat),
		rate:   float64(len(lat)) / elapsed.Seconds(),
		p50:    percentile(lat, 0.50),
		p99:    percentile(lat, 0.99),
		max:    lat[len(lat)-1],
	}, nil
}

// pace sends perSec tokens a second, evenly spaced, for d from start, then
// closes tokens. A pacer that falls behind catches up at once; one that
// cannot hand its tokens over waits (the rate reached is then lower).
func pace(ctx context.Context, tokens chan<- struct{}, perSec int, d time.Duration, start time.Time) {
	defer close(tokens)
	interval := time.Second / time.Duration(perSec)
	end := start.Add(d)
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if !at.Before(end) {
			return
		}
		if wait := time.Until(at); wait > 0 && !sleep(ctx, wait) {
			return
		}
		select {
		case tokens <- struct{}{}:
		case <-ctx.Done():
			return
		}
	}
}

// percentile is the nearest-rank q-quantile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// idleCPU measures the CPU the idle `postbox relay` process pid and its
// PostgreSQL server processes use while nothing is written, as a
// percentage of one core.
func idleCPU(ctx context.Context, e *env, p *progress, scenario, key string, pid int) error {
	window := min(e.cfg.Duration, idleWindowMax)
	p.printf("measuring the idle relay's CPU for %s", window)
	if !sleep(ctx, 200*time.Millisecond) {
		return ctx.Err()
	}
	var pids []int
	if pg, ok := e.b.(*pgBackend); ok {
		pids, _ = pg.processBackendPIDs(ctx)
	}
	proc := strconv.Itoa(pid)
	relay0, err := cpuTime(proc)
	if err != nil {
		p.printf("  no /proc: idle CPU not measured")
		return nil
	}
	pg0, pgOK := serverCPU(pids)
	start := time.Now()
	if !sleep(ctx, window) {
		return ctx.Err()
	}
	relay1, err := cpuTime(proc)
	if err != nil {
		return fmt.Errorf("idle CPU of `postbox relay`: %w", err)
	}
	pg1, _ := serverCPU(pids)
	elapsed := time.Since(start)
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / elapsed.Seconds() }
	e.rep.add(scenario, key+"idle_cpu_relay", "idle CPU: `postbox relay` process", pct(relay1-relay0), UnitCPUPercent, nil)
	if pgOK {
		e.rep.add(scenario, key+"idle_cpu_server", fmt.Sprintf("idle CPU: the relay's %d server processes", len(pids)), pct(pg1-pg0), UnitCPUPercent, nil)
	}
	return nil
}

// processServerCPU returns a function that reports the CPU time the
// server processes of the run's `postbox relay` processes (processAppName)
// used since processServerCPU was called, connections opened meanwhile
// included; 0 when the server is not on this machine or not PostgreSQL.
// Call it before the relays stop: the server processes of their
// connections exit with them.
func (e *env) processServerCPU(ctx context.Context) func() time.Duration {
	pg, ok := e.b.(*pgBackend)
	if !ok {
		return func() time.Duration { return 0 }
	}
	at := func() map[int]time.Duration {
		pids, _ := pg.processBackendPIDs(ctx)
		cpu := make(map[int]time.Duration, len(pids))
		for _, pid := range pids {
			if t, err := cpuTime(strconv.Itoa(pid)); err == nil {
				cpu[pid] = t
			}
		}
		return cpu
	}
	start := at()
	return func() time.Duration {
		var sum time.Duration
		for pid, t := range at() {
			sum += t - start[pid]
		}
		return sum
	}
}

// serverCPU sums the CPU time of the PostgreSQL server processes pids; it
// reports false when they are not on this machine.
func serverCPU(pids []int) (time.Duration, bool) {
	if len(pids) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, pid := range pids {
		t, err := cpuTime(strconv.Itoa(pid))
		if err != nil {
			return 0, false
		}
		sum += t
	}
	return sum, true
}
