package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

const (
	// fillChunk is the most events one fill statement writes.
	fillChunk = 50_000
	// stallTimeout fails a drain that makes no progress for this long.
	stallTimeout = time.Minute
	// pollInterval is how often a drain checks its progress.
	pollInterval = 2 * time.Millisecond
)

// fillBacklog writes n events into sc, fillChunk per statement, then
// vacuums, analyzes and checkpoints.
func fillBacklog(ctx context.Context, p *progress, sc scratch, n int) error {
	return fillBacklogBy(ctx, p, sc, n, fillChunk)
}

// fillBacklogBy is fillBacklog with chunk events per statement (each its
// own transaction).
func fillBacklogBy(ctx context.Context, p *progress, sc scratch, n, chunk int) error {
	return fillWith(ctx, p, sc, "events", n, chunk, func(ctx context.Context, from, to int) error {
		return sc.fill(ctx, from, to, 0)
	})
}

// fillAggregates is the modulus of the fill statements for a count of
// aggregates: 0 (each event its own aggregate) is one above every event.
func fillAggregates(aggregates int) int64 {
	if aggregates <= 0 {
		return math.MaxInt64
	}
	return int64(aggregates)
}

// fillWith is fillBacklogBy with fill writing the events from..to
// (inclusive) of the n; what names them in the progress lines.
func fillWith(ctx context.Context, p *progress, sc scratch, what string, n, chunk int, fill func(ctx context.Context, from, to int) error) error {
	start := time.Now()
	p.printf("filling %d %s into %s, %d per transaction", n, what, sc.name(), chunk)
	var th throttle
	for from := 1; from <= n; from += chunk {
		to := min(from+chunk-1, n)
		if err := fill(ctx, from, to); err != nil {
			return fmt.Errorf("fill %s: %w", sc.name(), err)
		}
		if th.due() && to < n {
			p.printf("  filled %d/%d", to, n)
		}
	}
	filled := time.Since(start)
	if err := sc.prepare(ctx); err != nil {
		return fmt.Errorf("prepare %s: %w", sc.name(), err)
	}
	p.printf("  filled in %s; vacuum, analyze and checkpoint in %s",
		filled.Round(time.Millisecond), (time.Since(start) - filled).Round(time.Millisecond))
	return nil
}

// drained is how a drain went.
type drained struct {
	// elapsed runs from the start to the moment nothing was left.
	elapsed time.Duration
	// steady is the publish rate, events/s, between the moments a tenth
	// and nine tenths of the backlog were published: the drain without
	// the relay's start and its last outcomes (0 when too short to tell).
	steady float64
}

// waitDrained waits until published() reaches n, then until st has nothing
// pending or processing, and reports the time from start to then.
func waitDrained(ctx context.Context, p *progress, what string, st store.Inspector, published func() int64, n int, start time.Time) (drained, error) {
	var (
		th                throttle
		last              = int64(-1)
		lastChange        = time.Now()
		tenth, nineTenths mark
		total             = int64(n)
	)
	for {
		got, now := published(), time.Now()
		tenth.at(got, now, total/10)
		nineTenths.at(got, now, total*9/10)
		if got >= total {
			break
		}
		if got > 0 && last <= 0 {
			p.printf("  %s: first events published after %s", what, now.Sub(start).Round(time.Millisecond))
		}
		if got != last {
			last, lastChange = got, now
		} else if now.Sub(lastChange) > stallTimeout {
			return drained{}, fmt.Errorf("%s: stalled at %d of %d events published", what, got, n)
		}
		if th.due() {
			p.printf("  %s: %d/%d published (%.0f/s)", what, got, n, float64(got)/now.Sub(start).Seconds())
		}
		if !sleep(ctx, pollInterval) {
			return drained{}, ctx.Err()
		}
	}
	p.printf("  %s: all %d published after %s; waiting for the outcomes to be recorded", what, n, time.Since(start).Round(time.Millisecond))
	deadline := time.Now().Add(stallTimeout)
	for {
		at := time.Now()
		stats, err := st.Stats(ctx)
		if err != nil {
			return drained{}, err
		}
		if stats.Pending+stats.Processing == 0 {
			if stats.Failed > 0 {
				return drained{}, fmt.Errorf("%s: %d events failed", what, stats.Failed)
			}
			return drained{elapsed: at.Sub(start), steady: tenth.rateTo(nineTenths)}, nil
		}
		if at.After(deadline) {
			return drained{}, fmt.Errorf("%s: all published, but still %d pending and %d processing", what, stats.Pending, stats.Processing)
		}
		if !sleep(ctx, pollInterval) {
			return drained{}, ctx.Err()
		}
	}
}

// mark is the first moment a count reached a threshold, and the count
// then.
type mark struct {
	when  time.Time
	count int64
}

func (m *mark) at(count int64, now time.Time, threshold int64) {
	if m.when.IsZero() && count >= threshold && count > 0 {
		m.when, m.count = now, count
	}
}

// rateTo is the rate from m to a later mark, or 0.
func (m mark) rateTo(later mark) float64 {
	d := later.when.Sub(m.when)
	if m.when.IsZero() || later.when.IsZero() || d <= 0 || later.count <= m.count {
		return 0
	}
	return float64(later.count-m.count) / d.Seconds()
}

// libraryRelay is a relay of the relay package with default settings,
// running in this process.
type libraryRelay struct {
	stop func()
	errc chan error
	once sync.Once
	err  error
}

// startLibraryRelay runs a relay of the relay package in this process with
// cfg, which sets Store and Sink and may set Observer, Stream (WAL mode),
// Retention (delivered events kept, for replay) and Ordered; every other
// setting is at its default. The relay logs to p.
func startLibraryRelay(ctx context.Context, p *progress, cfg relay.Config) (*libraryRelay, error) {
	r, err := relay.New(relay.Config{Store: cfg.Store, Sink: cfg.Sink, Logger: relayLogger(p), Observer: cfg.Observer, Stream: cfg.Stream, Retention: cfg.Retention, Ordered: cfg.Ordered})
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	rr := &libraryRelay{stop: stop, errc: make(chan error, 1)}
	go func() { rr.errc <- r.Run(runCtx) }()
	return rr, nil
}

// close stops the relay and waits for it; it may be called again.
func (r *libraryRelay) close() error {
	r.once.Do(func() {
		r.stop()
		r.err = <-r.errc
	})
	return r.err
}

// libraryDrain runs a relay of the relay package in this process with cfg
// (see startLibraryRelay) until the n events of its backlog, in outbox, are
// published and settled, and returns the time that took.
func libraryDrain(ctx context.Context, p *progress, what string, outbox store.Outbox, cfg relay.Config, published func() int64, n int) (time.Duration, error) {
	cfg.Store = outbox
	start := time.Now()
	r, err := startLibraryRelay(ctx, p, cfg)
	if err != nil {
		return 0, err
	}
	d, err := waitDrained(ctx, p, what, outbox, published, n, start)
	if cerr := r.close(); err == nil {
		err = cerr
	}
	return d.elapsed, err
}

// rawDrain drains sc with one raw-SQL statement per batch until none is
// left, and returns the time that took.
func rawDrain(ctx context.Context, p *progress, sc scratch, q rawQuery, n int) (time.Duration, error) {
	start := time.Now()
	var th throttle
	var total int64
	for {
		k, err := sc.rawBatch(ctx, q)
		if err != nil {
			return 0, fmt.Errorf("%v: %w", q, err)
		}
		if k == 0 {
			break
		}
		total += k
		if th.due() {
			p.printf("  %v: %d/%d (%.0f/s)", q, total, n, float64(total)/time.Since(start).Seconds())
		}
	}
	elapsed := time.Since(start)
	if total != int64(n) {
		return 0, fmt.Errorf("%v: took %d events of %d", q, total, n)
	}
	return elapsed, nil
}

// relayLogger shows the warnings and errors of a relay in this process
// among the progress lines.
func relayLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// noopSink accepts every message at once: it measures the relay and the
// store alone. It counts the messages, and those marked as replays.
type noopSink struct{ n, replays atomic.Int64 }

func (s *noopSink) Publish(_ context.Context, m *sink.Message) error {
	s.n.Add(1)
	if m.Headers[postbox.HeaderReplay] != "" {
		s.replays.Add(1)
	}
	return nil
}

func (s *noopSink) String() string { return "no-op sink" }

func (s *noopSink) Destination() sink.Destination {
	return sink.Destination{System: "noop", Name: "noop"}
}

// receiver is a local webhook endpoint that answers 200 with no body,
// after a delay when asked. It keeps the first arrival of every event id
// (the id header of Standard Webhooks), and the ids that arrived marked as
// replays (postbox.HeaderReplay).
type receiver struct {
	srv      *http.Server
	url      string
	idHeader string
	delay    time.Duration
	started  time.Time

	mu sync.Mutex
	// arrived holds the first arrival of each event id, since started.
	arrived map[uuid.UUID]time.Duration
	// replayed holds the ids that arrived as replays.
	replayed map[uuid.UUID]struct{}
}

func startReceiver(delay time.Duration) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	idHeader, _, _ := signature.Standard.HeaderNames()
	r := &receiver{
		url: "http://" + ln.Addr().String() + "/", idHeader: idHeader, delay: delay,
		started: time.Now(), arrived: map[uuid.UUID]time.Duration{}, replayed: map[uuid.UUID]struct{}{},
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Since(r.started)
	_, _ = io.Copy(io.Discard, req.Body)
	if id, err := uuid.Parse(req.Header.Get(r.idHeader)); err == nil {
		r.mu.Lock()
		if _, seen := r.arrived[id]; !seen {
			r.arrived[id] = at
		}
		if req.Header.Get(postbox.HeaderReplay) != "" {
			r.replayed[id] = struct{}{}
		}
		r.mu.Unlock()
	}
	if r.delay > 0 {
		time.Sleep(r.delay)
	}
	w.WriteHeader(http.StatusOK)
}

// arrival returns when the event id first arrived.
func (r *receiver) arrival(id uuid.UUID) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.arrived[id]
	return r.started.Add(d), ok
}

// distinct counts the event ids that arrived: the events published,
// however many times each was delivered.
func (r *receiver) distinct() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(len(r.arrived))
}

// span returns the first and the last first arrival of an event id, and
// false when none arrived.
func (r *receiver) span() (first, last time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.arrived) == 0 {
		return time.Time{}, time.Time{}, false
	}
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	for _, d := range r.arrived {
		lo, hi = min(lo, d), max(hi, d)
	}
	return r.started.Add(lo), r.started.Add(hi), true
}

// arrivalAt returns the moment the nth first arrival (1-based, in the
// order of arrival) happened, and false when fewer arrived.
func (r *receiver) arrivalAt(n int) (time.Time, bool) {
	r.mu.Lock()
	at := make([]time.Duration, 0, len(r.arrived))
	for _, d := range r.arrived {
		at = append(at, d)
	}
	r.mu.Unlock()
	if n < 1 || n > len(at) {
		return time.Time{}, false
	}
	slices.Sort(at)
	return r.started.Add(at[n-1]), true
}

// replays counts the event ids that arrived marked as replays.
func (r *receiver) replays() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(len(r.replayed))
}

func (r *receiver) close() { _ = r.srv.Close() }

// newSecret is a new signing secret in the whsec_ form: 32 random bytes in
// base64.
func newSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// sleep waits for d or ctx; it reports whether the whole time passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// loadCallTimeout bounds each call of loadRun: one request or transaction.
const loadCallTimeout = 10 * time.Second

// loadRun runs clients goroutines that call send, each with a new number
// from seq, for d, and returns how many calls succeeded and how long it
// took. The first error stops the run.
func loadRun(ctx context.Context, seq *atomic.Int64, clients int, d time.Duration, send func(context.Context, int64) error) (int64, time.Duration, error) {
	var (
		n        atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		once     sync.Once
	)
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				cctx, cancel := context.WithTimeout(ctx, loadCallTimeout)
				err := send(cctx, seq.Add(1))
				cancel()
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, 0, firstErr
	}
	return n.Load(), time.Since(start), nil
}
