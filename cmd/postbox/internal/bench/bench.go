package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/keyring"
)

// cleanupTimeout bounds dropping the scratch outboxes at the end of a run.
const cleanupTimeout = time.Minute

// env is what the scenarios of one run share.
type env struct {
	cfg Config
	b   backend
	rep *Report
	// private is which allow-private flags the postbox binary has, once
	// the endpoints scenario asked (see allowPrivate).
	private *privateFlags
	// secretsKey seals the secrets of the endpoints the run adds: a new
	// key per run, given to the postbox children in their environment
	// (childEnv), never on a command line.
	secretsKey string
}

// scenarios run the scenario of each name, adding their measures to the
// report.
var scenarios = map[string]func(ctx context.Context, e *env, p *progress) error{
	ScenarioDrain:      runDrain,
	ScenarioWebhook:    runWebhook,
	ScenarioLatency:    runLatency,
	ScenarioWrite:      runWrite,
	ScenarioScale:      runScale,
	ScenarioDrainWAL:   runDrainWAL,
	ScenarioLatencyWAL: runLatencyWAL,
	ScenarioWriteWAL:   runWriteWAL,
	ScenarioInbox:      runInbox,
	ScenarioScaling:    runScaling,
	ScenarioEndpoints:  runEndpoints,
	ScenarioNATS:       runNATS,
	ScenarioAMQP:       runAMQP,
	ScenarioKafka:      runKafka,
	ScenarioBloat:      runBloat,
	ScenarioRetention:  runRetention,
	ScenarioReplay:     runReplay,
	ScenarioOrdered:    runOrdered,
	ScenarioSources:    runSources,
}

// Run runs the scenarios of cfg and returns their report. It drops every
// scratch outbox it created before it returns, on error and on
// cancellation too, unless cfg.Keep; the report holds the measures taken
// until an error.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	run := runName()
	b, err := openBackend(ctx, cfg.DB, run)
	if err != nil {
		return nil, err
	}
	defer b.close()
	rep = &Report{Database: b.kind(), Machine: thisMachine(), Run: run, Params: cfg.params(), Seconds: map[string]float64{}}
	p := newProgress(cfg.Progress)
	defer func() {
		if cfg.Keep {
			p.printf("keeping the scratch outboxes %s_*", run)
			return
		}
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if derr := b.dropAll(cleanup); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	rep.Version, rep.Settings = b.info(ctx)
	p.printf("postbox bench on %s: %v", rep.Version, cfg.Scenarios)

	e := &env{cfg: cfg, b: b, rep: rep, secretsKey: keyring.GenerateKey()}
	for _, name := range cfg.Scenarios {
		sp := p.in(name)
		start := time.Now()
		if err := scenarios[name](ctx, e, sp); err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("interrupted: %w", context.Cause(ctx))
			}
			return rep, fmt.Errorf("%s: %w", name, err)
		}
		rep.Seconds[name] = time.Since(start).Seconds()
		sp.printf("done in %s", time.Since(start).Round(100*time.Millisecond))
	}
	rep.Seconds["total"] = time.Since(started).Seconds()
	return rep, nil
}

// runName is a new prefix for the scratch outboxes of a run.
func runName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "postbox_bench_" + hex.EncodeToString(b)
}

// Leftovers lists the scratch outboxes of the run named run (Report.Run)
// that still exist in db: PostgreSQL schemas, SQLite files or MySQL
// databases. It is empty
// after a run without Keep.
func Leftovers(ctx context.Context, db, run string) ([]string, error) {
	b, err := openBackend(ctx, db, run)
	if err != nil {
		return nil, err
	}
	defer b.close()
	return b.leftovers(ctx)
}

// filled returns a new scratch outbox holding a backlog of n events.
func (e *env) filled(ctx context.Context, p *progress, label string, n int) (scratch, error) {
	sc, err := e.b.newScratch(ctx, label)
	if err != nil {
		return nil, err
	}
	if err := fillBacklog(ctx, p, sc, n); err != nil {
		return nil, err
	}
	return sc, nil
}

// release drops a scratch outbox as soon as its scenario is done with it,
// unless the run keeps them.
func (e *env) release(ctx context.Context, sc scratch) error {
	if e.cfg.Keep {
		return nil
	}
	return sc.drop(context.WithoutCancel(ctx))
}

// rate is events per second.
func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }
