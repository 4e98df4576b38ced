package endpoint

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// Supervisor runs endpoints mode: one lane, a relay.Relay, per enabled
// endpoint, and the FanOut that writes their deliveries. See the package
// documentation.
type Supervisor struct {
	cfg      SupervisorConfig
	fanOut   *FanOut
	attempts *batcher[store.Attempt]
	// events writes the operator events; nil without
	// SupervisorConfig.OperatorEvents.
	events *operatorEvents
	// refreshNow asks Run to read the endpoints again at once (a lane
	// stopped: its endpoint may need a new one).
	refreshNow chan struct{}
	// fatal receives the error of a lane that could not start (tables not
	// migrated, ordered claims not ready): Run returns it.
	fatal chan error

	mu sync.Mutex
	// lanes are the lanes by endpoint, those stopping included until their
	// relay's Run returns; running is false once Run stops them all.
	lanes   map[uuid.UUID]*lane
	running bool
	// refused are the settings (settingsKey) of the endpoints whose lane
	// could not be built, logged once until they change.
	refused map[uuid.UUID]string
	// opening are the settings of the endpoints whose sink is being opened
	// (openLaneLocked), unreachable those of the endpoints whose sink could
	// not be opened (a broker down), tried again at every refresh, logged
	// once until they are opened or change.
	opening, unreachable map[uuid.UUID]string
	lanesWG              sync.WaitGroup
	// offering counts the fan-out's batches offering now (offerable):
	// Run waits for them before the attempts log's last write.
	offering sync.WaitGroup
	// retired sums the Stats of the lanes that ended.
	retired SupervisorStats

	breakerOpened, autoDisabled atomic.Int64
}

// SupervisorStats are the counts of endpoints mode since New: the lanes' deliveries
// (summed over lanes, those that ended included, as relay.Stats counts
// them), the fan-out's writes, and the endpoints' health.
type SupervisorStats struct {
	// Delivered, Retried, Failed and Released are the lanes' relay.Stats
	// counts. Dropped counts the deliveries of shadow endpoints that used
	// their attempts (store.StatusDropped): not in Failed.
	Delivered, Retried, Failed, Dropped, Released int64
	// Written counts the deliveries the fan-out wrote, Offered the events
	// it offered to a lane (sent), Direct those of them delivered without
	// a delivery written (counted in Delivered too), and Unrouted the
	// events no endpoint wanted (FanOut.Written, FanOut.Offered,
	// FanOut.Direct, FanOut.Unrouted).
	Written, Offered, Direct, Unrouted int64
	// Filtered counts the times an endpoint's filter turned away an event
	// of its types, FilterErrors the filter evaluations that failed (the
	// event turned away too) (FanOut.Filtered, FanOut.FilterErrors).
	Filtered, FilterErrors int64
	// BreakerOpened counts the times an endpoint's breaker opened (not its
	// reopening after a failed probe); AutoDisabled the endpoints disabled
	// for failing SupervisorConfig.DisableAfter.
	BreakerOpened, AutoDisabled int64
	// OperatorEvents counts the operator events written, by type
	// (SupervisorConfig.OperatorEvents).
	OperatorEvents OperatorEventCounts
	// Lanes is the number of lanes delivering now.
	Lanes int
}

// New validates cfg, fills its defaults and returns a Supervisor, refusing
// an invalid Config with an error that names the field.
func New(cfg SupervisorConfig) (*Supervisor, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Supervisor{
		cfg:         cfg,
		refreshNow:  make(chan struct{}, 1),
		fatal:       make(chan error, 1),
		lanes:       map[uuid.UUID]*lane{},
		refused:     map[uuid.UUID]string{},
		opening:     map[uuid.UUID]string{},
		unreachable: map[uuid.UUID]string{},
		events:      newOperatorEvents(cfg),
	}
	s.fanOut = &FanOut{store: cfg.Store, refreshEvery: cfg.RefreshEvery, written: s.wake,
		offerable: s.offerable, within: s.directWithin(), ordered: cfg.Relay.Ordered, log: cfg.Logger,
		workers: newWorkers()}
	s.attempts = newBatcher(cfg.AttemptsBatch, cfg.AttemptsFlush, func(ctx context.Context, a []store.Attempt) {
		if err := cfg.Store.AttemptInsert(ctx, a); err != nil {
			cfg.Logger.Warn("writing the attempts log failed; these attempts are not logged", "attempts", len(a), "error", err)
		}
	})
	return s, nil
}

// Owner is the name the lanes lease under, each followed by its endpoint:
// SupervisorConfig.Relay.Owner, or the relay's default when it is empty. The relay
// that drains the outbox into the FanOut may take it, so that leases and
// logs name one process.
func (s *Supervisor) Owner() string { return s.cfg.Relay.Owner }

// FanOut is the sink of the relay that drains the outbox in endpoints
// mode: it writes the deliveries and wakes the lanes they are for.
func (s *Supervisor) FanOut() *FanOut { return s.fanOut }

// Run runs the lanes until ctx is done; then each lane shuts down as a
// relay does (deliveries in flight get Relay.ShutdownTimeout, the rest go
// back to the queue), the attempts log is written, and Run returns nil. It
// returns an error, once every lane stopped, when a lane cannot start for
// a reason that holds for all (relay.Run's: the tables not migrated,
// ordered claims not ready).
func (s *Supervisor) Run(ctx context.Context) error {
	var writer sync.WaitGroup
	writer.Go(s.attempts.run)
	// The operator events are written until every lane stopped: the last
	// transitions they report too.
	eventsCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEvents()
	if s.events != nil {
		writer.Go(func() { s.events.run(eventsCtx) })
	}
	s.mu.Lock()
	s.running = true
	s.mu.Unlock()
	s.cfg.Logger.Info("endpoints supervisor started: one relay per enabled endpoint", "owner", s.cfg.Relay.Owner,
		"refresh_every", s.cfg.RefreshEvery, "poll_interval", s.cfg.PollInterval, "ordered", s.cfg.Relay.Ordered,
		"breaker_failures", s.cfg.BreakerFailures, "disable_after", s.cfg.DisableAfter, "retention", s.cfg.Retention,
		"direct_within", s.directWithin(), "operator_events", s.events.describe())

	laneCtx, stopLanes := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLanes()
	// The sinks being opened give up at once when Run stops.
	opens, stopOpens := context.WithCancel(laneCtx)
	defer stopOpens()
	refresh := time.NewTicker(s.cfg.RefreshEvery)
	defer refresh.Stop()
	poll := time.NewTicker(s.cfg.PollInterval)
	defer poll.Stop()
	var err error
	s.refresh(laneCtx, opens)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-s.fatal:
			break loop
		case <-refresh.C:
			s.refresh(laneCtx, opens)
		case <-s.refreshNow:
			s.refresh(laneCtx, opens)
		case <-poll.C:
			s.pollDue(ctx)
		}
	}
	s.mu.Lock()
	s.running = false
	for _, l := range s.lanes {
		s.stopLaneLocked(l)
	}
	s.mu.Unlock()
	stopOpens()
	s.lanesWG.Wait()
	s.offering.Wait()
	s.attempts.close()
	stopEvents()
	writer.Wait()
	st := s.Stats()
	s.cfg.Logger.Info("endpoints supervisor stopped", "delivered", st.Delivered, "retried", st.Retried, "failed", st.Failed,
		"dropped", st.Dropped, "written", st.Written, "offered", st.Offered, "direct", st.Direct, "unrouted", st.Unrouted)
	return err
}

// supervisorCallTimeout bounds the supervisor's own store calls (reading
// the endpoints, the due-poll): a connection lost without a word (a
// network that drops packets) must not stop the refreshes and wake-ups of
// every lane, which the next call, on another connection, resumes.
const supervisorCallTimeout = 10 * time.Second

// refresh reads the endpoints, gives them to the fan-out, starts a lane
// for each enabled endpoint that has none, stops the lanes of the others,
// and restarts a lane whose settings changed (once the old one stopped).
// A lane starts once its sink is opened, in a goroutine of its own under
// opens: a broker that takes long to answer holds back no other lane.
func (s *Supervisor) refresh(ctx, opens context.Context) {
	callCtx, cancel := context.WithTimeout(ctx, supervisorCallTimeout)
	all, err := s.cfg.Store.EndpointList(callCtx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("reading the endpoints failed; the lanes keep running as they are", "error", err)
		}
		return
	}
	now := time.Now()
	s.fanOut.setRoutes(all, now)
	want := map[uuid.UUID]store.Endpoint{}
	for _, e := range all {
		if e.State == store.EndpointEnabled {
			want[e.ID] = e
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return
	}
	for id, l := range s.lanes {
		if e, ok := want[id]; !l.stopping && (!ok || settingsKey(e, now) != l.key) {
			what := "endpoint no longer enabled: its lane stops"
			if ok {
				what = "endpoint settings changed: its lane restarts"
			}
			s.cfg.Logger.Info(what, "endpoint", id, "endpoint_name", l.e.Name)
			s.stopLaneLocked(l)
		}
	}
	for id, e := range want {
		if _, ok := s.lanes[id]; ok {
			continue // running, or stopping: started again once stopped
		}
		if _, ok := s.opening[id]; ok {
			continue // started once its sink is opened
		}
		key := settingsKey(e, now)
		if s.refused[id] == key {
			continue
		}
		delete(s.refused, id)
		s.openLaneLocked(ctx, opens, e, now, key)
	}
	for _, m := range []map[uuid.UUID]string{s.refused, s.unreachable} {
		for id := range m {
			if _, ok := want[id]; !ok {
				delete(m, id)
			}
		}
	}
}

// openLaneLocked opens the sink of e, whose settings are key, in a
// goroutine of its own under opens, bounded by openTimeout, and then starts
// its lane under ctx; s.mu is held. A sink refused for its settings (a
// scheme no kind has, a URL parameter its kind refuses) refuses the lane
// until they change; one that cannot be opened now (a broker down) is
// tried again at the next refresh. Each is logged once, and so is the
// sink opened after it could not be.
func (s *Supervisor) openLaneLocked(ctx, opens context.Context, e store.Endpoint, now time.Time, key string) {
	s.opening[e.ID] = key
	log := s.laneLogger(e)
	s.lanesWG.Go(func() {
		openCtx, cancel := context.WithTimeout(opens, s.openTimeout())
		own, err := OpenSink(openCtx, s.sinkConfig(log), e, now)
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.opening, e.ID)
		switch {
		case !s.running:
			if err == nil {
				s.closeSink(log, own)
			}
			return
		case errors.As(err, new(*sink.OptionError)):
			s.refuseLocked(e, key, err)
			return
		case err != nil:
			if s.unreachable[e.ID] != key {
				s.unreachable[e.ID] = key
				log.Warn("endpoint not delivered to: its sink cannot be opened; its deliveries wait, and it is tried again at every refresh",
					"delivers_to", DescribeURL(s.cfg.Kinds, e.URL), "error", err)
			}
			return
		}
		if _, was := s.unreachable[e.ID]; was {
			delete(s.unreachable, e.ID)
			log.Info("endpoint's sink opened: its lane starts, and its waiting deliveries go", "delivers_to", DescribeURL(s.cfg.Kinds, e.URL))
		}
		if err := s.startLaneLocked(ctx, e, now, own, log); err != nil {
			s.closeSink(log, own)
			s.refuseLocked(e, key, err)
		}
	})
}

// openTimeout bounds the opening of an endpoint's sink: a broker's connect
// and its check that the destination exists, each bounded by the sink's
// timeout.
func (s *Supervisor) openTimeout() time.Duration { return 2 * sinkTimeout(s.cfg.Webhook) }

// refuseLocked logs that the lane of e, whose settings are key, cannot
// start until they change, for err; s.mu is held.
func (s *Supervisor) refuseLocked(e store.Endpoint, key string, err error) {
	s.refused[e.ID] = key
	s.cfg.Logger.Error("endpoint not delivered to: its lane cannot start until its settings change; its deliveries wait",
		"endpoint", e.ID, "endpoint_name", e.Name, "error", err)
}

// closeSink closes own, an endpoint's sink, logging its error to log.
func (s *Supervisor) closeSink(log *slog.Logger, own sink.Sink) {
	if c, ok := own.(io.Closer); ok {
		if err := c.Close(); err != nil {
			log.Warn("closing the endpoint's sink", "error", err)
		}
	}
}

// startLaneLocked starts the lane of e around own, its sink; s.mu is held.
func (s *Supervisor) startLaneLocked(ctx context.Context, e store.Endpoint, now time.Time, own sink.Sink, log *slog.Logger) error {
	l, err := s.newLane(e, now, own, log)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	s.lanes[e.ID] = l
	s.cfg.Logger.Info("endpoint lane starting", "endpoint", e.ID, "endpoint_name", e.Name, "delivers_to", DescribeURL(s.cfg.Kinds, e.URL), "types", e.Types,
		"rate_per_second", e.RatePerSecond, "concurrency", e.Concurrency, "shadow", e.Shadow, "allow_private", e.AllowPrivate)
	s.lanesWG.Go(func() {
		defer cancel()
		err := l.relay.Run(runCtx)
		s.laneEnded(l, err)
	})
	return nil
}

// laneEnded retires l, whose relay's Run returned err.
func (s *Supervisor) laneEnded(l *lane, err error) {
	s.mu.Lock()
	s.retired.add(laneStats(l))
	if s.lanes[l.e.ID] == l {
		delete(s.lanes, l.e.ID)
	}
	running := s.running
	s.mu.Unlock()
	if cerr := l.close(sinkTimeout(s.cfg.Webhook)); cerr != nil {
		s.cfg.Logger.Warn("closing the endpoint's sink", "endpoint", l.e.ID, "endpoint_name", l.e.Name, "error", cerr)
	}
	switch {
	case err != nil && (errors.Is(err, store.ErrNotMigrated) || errors.Is(err, store.ErrOrderedNotReady)):
		select {
		case s.fatal <- err:
		default:
		}
	case err != nil:
		s.cfg.Logger.Error("endpoint lane stopped", "endpoint", l.e.ID, "endpoint_name", l.e.Name, "error", err)
	}
	if running {
		select {
		case s.refreshNow <- struct{}{}:
		default:
		}
	}
}

// stopLane stops l (its endpoint was disabled for failing too long).
func (s *Supervisor) stopLane(l *lane) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLaneLocked(l)
}

func (s *Supervisor) stopLaneLocked(l *lane) {
	if !l.stopping {
		l.stopping = true
		l.cancel()
	}
}

// pollDue wakes the lanes that have deliveries due, in one query for all:
// deliveries written by other processes, retries scheduled by other
// relays, deliveries of an endpoint enabled again.
func (s *Supervisor) pollDue(ctx context.Context) {
	s.mu.Lock()
	ids := make([]uuid.UUID, 0, len(s.lanes))
	for id, l := range s.lanes {
		if !l.stopping {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	callCtx, cancel := context.WithTimeout(ctx, supervisorCallTimeout)
	due, err := s.cfg.Store.DeliveryDue(callCtx, ids)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("looking for due deliveries failed", "error", err)
		}
		return
	}
	s.wake(due)
}

// directWithin is SupervisorConfig.DirectWithin, or -1 (no direct delivery) with
// SupervisorConfig.KeepDelivered.
func (s *Supervisor) directWithin() time.Duration {
	if s.cfg.KeepDelivered {
		return -1
	}
	return s.cfg.DirectWithin
}

// offerable returns the lanes, among those of endpoints, that take the
// fan-out's offers of a batch of n events now (lane.takesOffers), or nil
// (always once Run is stopping), how long an offer may wait for a slot
// (directBounds), and done, which the caller calls once its offers ended
// when lanes is not nil.
func (s *Supervisor) offerable(endpoints []uuid.UUID, n int) (lanes map[uuid.UUID]*lane, wait time.Duration, done func()) {
	if s.directWithin() <= 0 {
		return nil, 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil, 0, nil
	}
	means := make([]time.Duration, 0, len(s.lanes))
	perSlot := make([]time.Duration, 0, len(s.lanes))
	for _, l := range s.lanes {
		if mean, known := l.pace.measured(); known && !l.stopping {
			means = append(means, mean)
			perSlot = append(perSlot, mean/time.Duration(cap(l.slots)))
		}
	}
	bound, wait := directBounds(s.cfg.DirectWithin, means, perSlot, n)
	for _, id := range endpoints {
		if l, ok := s.lanes[id]; ok && l.takesOffers(bound) {
			if lanes == nil {
				lanes = map[uuid.UUID]*lane{}
			}
			lanes[id] = l
		}
	}
	if lanes == nil {
		return nil, 0, nil
	}
	s.offering.Add(1)
	return lanes, wait, s.offering.Done
}

// wake wakes the lanes of endpoints.
func (s *Supervisor) wake(endpoints []uuid.UUID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range endpoints {
		if l, ok := s.lanes[id]; ok && !l.stopping {
			l.poke()
		}
	}
}

// Stats returns the counts since New. It is safe to call from any
// goroutine while Run runs.
func (s *Supervisor) Stats() SupervisorStats {
	s.mu.Lock()
	st := s.retired
	for _, l := range s.lanes {
		st.add(laneStats(l))
		if !l.stopping {
			st.Lanes++
		}
	}
	s.mu.Unlock()
	st.Written, st.Offered, st.Direct, st.Unrouted = s.fanOut.Written(), s.fanOut.Offered(), s.fanOut.Direct(), s.fanOut.Unrouted()
	st.Filtered, st.FilterErrors = s.fanOut.Filtered(), s.fanOut.FilterErrors()
	st.BreakerOpened, st.AutoDisabled = s.breakerOpened.Load(), s.autoDisabled.Load()
	st.OperatorEvents = s.events.counts()
	return st
}

// laneStats are the counts of l's relay, a shadow endpoint's failures
// counted as dropped.
func laneStats(l *lane) SupervisorStats {
	r := l.relay.Stats()
	st := SupervisorStats{Delivered: r.Delivered, Retried: r.Retried, Released: r.Released}
	if l.e.Shadow {
		st.Dropped = r.Failed
	} else {
		st.Failed = r.Failed
	}
	return st
}

// add adds the lane counts of o to st.
func (st *SupervisorStats) add(o SupervisorStats) {
	st.Delivered += o.Delivered
	st.Retried += o.Retried
	st.Failed += o.Failed
	st.Dropped += o.Dropped
	st.Released += o.Released
}
