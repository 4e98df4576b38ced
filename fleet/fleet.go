package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Relay is what the fleet runs for one source.
type Relay interface {
	// Run runs until ctx ends and returns nil, or returns an error when the
	// relay cannot go on (the fleet then closes it and opens the source
	// again after a back-off).
	Run(ctx context.Context) error
	// Ready reports whether the relay delivers: its last claim succeeded.
	Ready() bool
	// Failing reports whether its last claim failed. Neither Ready nor
	// Failing: it has not claimed yet.
	Failing() bool
	// Close releases what Open took for the relay, once Run returned.
	Close()
}

// Config configures a Fleet. List and Open are required.
type Config struct {
	// List returns the sources to drain now (see ReadFile, Query). It is
	// called at start and every Every; while it fails the fleet keeps
	// the sources it has.
	List func(context.Context) ([]Source, error)
	// Every is how often List is called (EveryDefault when zero).
	Every time.Duration
	// Mine, when set, picks among the listed sources those this process
	// drains, when several processes share them (see package
	// fleet/share). Nil: all of them.
	Mine func(context.Context, []Source) ([]Source, error)
	// Open builds the relay of src; log is the source's logger (its lines
	// carry the source's name, repeated warnings and errors folded).
	Open func(ctx context.Context, src Source, log *slog.Logger) (Relay, error)
	// Logger receives the fleet's lines and, through the loggers Open
	// receives, the relays' (slog.Default() when nil).
	Logger *slog.Logger
	// RetryMin and RetryMax bound the back-off before a source that
	// failed is opened again (RetryMinDefault, RetryMaxDefault when
	// zero).
	RetryMin, RetryMax time.Duration
}

// Defaults of Config.
const (
	EveryDefault    = 10 * time.Second
	RetryMinDefault = time.Second
	RetryMaxDefault = 30 * time.Second
)

// readyEvery is how often the fleet looks at whether each relay delivers,
// to log the changes.
const readyEvery = time.Second

// State is what a source is doing.
type State string

// The states of a source.
const (
	// StateStarting: the source is being opened, or its relay has not
	// claimed yet (for startGrace at most).
	StateStarting State = "starting"
	// StateDelivering: its relay's last claim succeeded.
	StateDelivering State = "delivering"
	// StateNotDelivering: its relay runs but its claims fail (the database
	// unreachable, a table missing).
	StateNotDelivering State = "not delivering"
	// StateFailed: it could not be opened, or its relay stopped with an
	// error; it is opened again after a back-off.
	StateFailed State = "failed"
)

// Status is one source's state, as Fleet.Sources reports it.
type Status struct {
	Source Source
	State  State
	// Err is why the source failed (StateFailed), or empty.
	Err string
	// Since is when the source entered its state.
	Since time.Time
}

// Fleet runs the relays of the sources. Create it with New and run it once
// with Run.
type Fleet struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	running  map[string]*member
	stopping map[string]*member // removed or changed, not stopped yet
	listed   bool
	// refresh asks Run to list the sources now (Refresh).
	refresh chan struct{}
}

// member is a running source: its goroutine and what it reports.
type member struct {
	src    Source
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	status Status
	relay  Relay  // the running relay, or nil
	failed string // the error of the last failure logged, until the source delivers
	// fold folds the repeated warnings and errors of the source's lines;
	// a change of state resets it.
	fold *folding
}

// New checks cfg and returns a Fleet.
func New(cfg Config) (*Fleet, error) {
	switch {
	case cfg.List == nil:
		return nil, errors.New("fleet: Config.List is required")
	case cfg.Open == nil:
		return nil, errors.New("fleet: Config.Open is required")
	case cfg.Every < 0 || cfg.RetryMin < 0 || cfg.RetryMax < 0:
		return nil, errors.New("fleet: Config.Every, RetryMin and RetryMax may not be negative")
	}
	if cfg.Every == 0 {
		cfg.Every = EveryDefault
	}
	if cfg.RetryMin == 0 {
		cfg.RetryMin = RetryMinDefault
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = RetryMaxDefault
	}
	cfg.RetryMax = max(cfg.RetryMax, cfg.RetryMin)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Fleet{cfg: cfg, log: cfg.Logger, running: map[string]*member{}, stopping: map[string]*member{}, refresh: make(chan struct{}, 1)}, nil
}

// Run lists the sources, starts their relays and keeps them as the list
// changes, until ctx ends; it then stops every relay (each finishes its
// deliveries in flight, see relay.Config.ShutdownTimeout) and returns nil.
// It returns an error at once when the first listing fails: a fleet that
// never knew its sources has nothing to run.
func (f *Fleet) Run(ctx context.Context) error {
	defer f.stopAll()
	list, err := f.list(ctx)
	if err != nil {
		return fmt.Errorf("fleet: list the sources: %w", err)
	}
	f.apply(ctx, list)
	tick := time.NewTicker(f.cfg.Every)
	defer tick.Stop()
	ready := time.NewTicker(readyEvery)
	defer ready.Stop()
	var listErr string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ready.C:
			f.watchReady()
			continue
		case <-tick.C:
		case <-f.refresh:
		}
		list, err := f.list(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if err.Error() != listErr {
				listErr = err.Error()
				f.log.Error("fleet: cannot list the sources; the running ones go on", "error", err, "retry_in", f.cfg.Every)
			}
			continue
		case listErr != "":
			listErr = ""
			f.log.Info("fleet: the sources are listed again")
		}
		f.apply(ctx, list)
	}
}

// Refresh makes Run list the sources now rather than at its next tick
// (when the processes sharing them changed, say). It never blocks.
func (f *Fleet) Refresh() {
	select {
	case f.refresh <- struct{}{}:
	default:
	}
}

// list calls List, then Mine.
func (f *Fleet) list(ctx context.Context) ([]Source, error) {
	list, err := f.cfg.List(ctx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.listed = true
	f.mu.Unlock()
	if f.cfg.Mine == nil {
		return list, nil
	}
	return f.cfg.Mine(ctx, list)
}

// Listed reports whether the sources have been listed once: the fleet
// runs (for a health check).
func (f *Fleet) Listed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.listed
}

// apply starts the sources of list that do not run, and stops those that
// run and are not in list, or are with other settings (which then start
// again with the new ones, once the old relay stopped). It does not wait
// for a relay to stop: one slow to stop holds up no other source.
func (f *Fleet) apply(ctx context.Context, list []Source) {
	want := make(map[string]Source, len(list))
	for _, s := range list {
		want[s.Name] = s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, m := range f.running {
		s, ok := want[name]
		if ok && s == m.src {
			continue
		}
		reason := "no longer listed for this process"
		if ok {
			reason = "its settings changed"
		}
		delete(f.running, name)
		f.stopping[name] = m
		m.cancel()
		go func() {
			<-m.done
			f.log.Info("fleet: source stopped: "+reason, "source", name)
			f.mu.Lock()
			delete(f.stopping, name)
			f.mu.Unlock()
			f.Refresh() // a source that changed starts again
		}()
	}
	for _, s := range list {
		if _, ok := f.running[s.Name]; ok {
			continue
		}
		if _, ok := f.stopping[s.Name]; ok {
			continue // it starts once its old relay stopped
		}
		mctx, cancel := context.WithCancel(ctx)
		m := &member{src: s, cancel: cancel, done: make(chan struct{}), fold: newFolding(f.log.Handler()),
			status: Status{Source: s, State: StateStarting, Since: time.Now()}}
		f.running[s.Name] = m
		go func() {
			defer close(m.done)
			f.keep(mctx, m)
		}()
	}
}

// stopAll stops every source and waits for them, and for those stopping.
func (f *Fleet) stopAll() {
	f.mu.Lock()
	ms := make([]*member, 0, len(f.running)+len(f.stopping))
	for _, m := range f.running {
		ms = append(ms, m)
	}
	for _, m := range f.stopping {
		ms = append(ms, m)
	}
	f.running = map[string]*member{}
	f.mu.Unlock()
	for _, m := range ms {
		m.cancel()
	}
	for _, m := range ms {
		<-m.done
	}
}

// keep opens and runs the relay of m's source until ctx ends, opening it
// again after a back-off whenever it fails.
func (f *Fleet) keep(ctx context.Context, m *member) {
	log := slog.New(m.fold).With("source", m.src.Name)
	failures := 0
	for ctx.Err() == nil {
		r, err := f.cfg.Open(ctx, m.src, log)
		if err == nil {
			m.set(f.log, StateStarting, "")
			started := time.Now()
			m.setRelay(r)
			err = r.Run(ctx)
			m.setRelay(nil)
			r.Close()
			if time.Since(started) > f.cfg.RetryMax {
				failures = 0 // it ran a while: the next failure starts the back-off over
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the relay stopped")
		}
		failures++
		delay := min(f.cfg.RetryMin<<min(failures-1, 16), f.cfg.RetryMax)
		m.set(f.log, StateFailed, err.Error(), "retry_in", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}

// watchReady logs the sources whose relay started or stopped delivering.
func (f *Fleet) watchReady() {
	f.mu.Lock()
	ms := make([]*member, 0, len(f.running))
	for _, m := range f.running {
		ms = append(ms, m)
	}
	f.mu.Unlock()
	for _, m := range ms {
		m.watchReady(f.log)
	}
}

// Sources returns the state of every source the fleet runs, by name.
func (f *Fleet) Sources() []Status {
	f.mu.Lock()
	out := make([]Status, 0, len(f.running))
	for _, m := range f.running {
		m.mu.Lock()
		out = append(out, m.status)
		m.mu.Unlock()
	}
	f.mu.Unlock()
	slices.SortFunc(out, func(a, b Status) int { return cmp.Compare(a.Source.Name, b.Source.Name) })
	return out
}

// startGrace is how long a relay that has not claimed yet, nor failed to,
// is shown starting; after it, not delivering. A relay whose first claim
// fails is not delivering at once; one that starts slowly (its claim
// queued behind other sources' on a busy pool) is not flagged for it.
const startGrace = time.Minute

// set moves m to state (with err, the reason of StateFailed) and logs the
// change; staying in a state with the same reason logs nothing.
func (m *member) set(log *slog.Logger, state State, err string, attrs ...any) {
	m.mu.Lock()
	same := m.status.State == state && m.status.Err == err
	if !same {
		m.status.State, m.status.Err, m.status.Since = state, err, time.Now()
	}
	// A source that fails again as it failed before, having never
	// delivered between (reopened, it stopped at once), logs nothing new.
	repeated := state == StateFailed && err == m.failed
	switch state {
	case StateFailed:
		m.failed = err
	case StateDelivering:
		m.failed = ""
	}
	m.mu.Unlock()
	if same || repeated || state == StateStarting {
		return
	}
	m.fold.reset()
	attrs = append([]any{"source", m.src.Name}, attrs...)
	switch state {
	case StateFailed:
		log.Error("fleet: source failed; it is opened again after a back-off", append(attrs, "error", err)...)
	case StateNotDelivering:
		log.Warn("fleet: source not delivering: its claims fail", attrs...)
	case StateDelivering:
		log.Info("fleet: source delivering", attrs...)
	}
}

// setRelay records the relay running for m, or nil.
func (m *member) setRelay(r Relay) {
	m.mu.Lock()
	m.relay = r
	m.mu.Unlock()
}

// watchReady moves a running source between delivering and not
// delivering as its relay's readiness says.
func (m *member) watchReady(log *slog.Logger) {
	m.mu.Lock()
	r, st := m.relay, m.status
	m.mu.Unlock()
	if r == nil {
		return
	}
	switch ready := r.Ready(); {
	case ready && st.State != StateDelivering:
		m.set(log, StateDelivering, "")
	case ready || st.State == StateNotDelivering:
	case r.Failing(),
		st.State == StateStarting && time.Since(st.Since) > startGrace:
		m.set(log, StateNotDelivering, "")
	}
}
