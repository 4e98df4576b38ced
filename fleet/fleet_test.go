package fleet_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/fleet"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
)

// world is what the fleet under test sees: a list that the test changes,
// sources whose opening fails on demand, and the relays running.
type world struct {
	mu      sync.Mutex
	list    []fleet.Source
	listErr error
	broken  map[string]error         // Open fails with it
	stops   map[string]error         // the relay's Run returns it at once
	slow    map[string]chan struct{} // the relay's Run returns only once it is closed
	running map[string]*testRelay
	opened  map[string]int
	// ready: the relays' claims succeed, or fail; unclaimed: they have
	// not claimed yet (neither).
	ready, unclaimed bool
}

func newWorld(names ...string) *world {
	w := &world{broken: map[string]error{}, stops: map[string]error{}, slow: map[string]chan struct{}{}, running: map[string]*testRelay{}, opened: map[string]int{}, ready: true}
	for _, n := range names {
		w.list = append(w.list, fleet.Source{Name: n, DB: "postgres://h/" + n, Schema: "public", Weight: 1, Sink: "https://x"})
	}
	return w
}

func (w *world) List(context.Context) ([]fleet.Source, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]fleet.Source(nil), w.list...), w.listErr
}

func (w *world) Open(_ context.Context, src fleet.Source, log *slog.Logger) (fleet.Relay, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.opened[src.Name]++
	if err := w.broken[src.Name]; err != nil {
		return nil, err
	}
	r := &testRelay{w: w, src: src, log: log, stop: w.stops[src.Name], slow: w.slow[src.Name]}
	w.running[src.Name] = r
	return r, nil
}

func (w *world) set(f func(w *world)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w)
}

// runningSources returns the sources running, with their settings.
func (w *world) runningSources() map[string]fleet.Source {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]fleet.Source{}
	for n, r := range w.running {
		out[n] = r.src
	}
	return out
}

type testRelay struct {
	w    *world
	src  fleet.Source
	log  *slog.Logger
	stop error
	slow chan struct{}
}

func (r *testRelay) Run(ctx context.Context) error {
	if r.stop != nil {
		return r.stop
	}
	// Like a relay whose claims fail: an error each time it is not ready.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if r.slow != nil {
				<-r.slow
			}
			return nil
		case <-tick.C:
			if r.Failing() {
				r.log.Error("claim failed", "error", "the same each time")
			}
		}
	}
}

func (r *testRelay) Ready() bool {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	return r.w.ready && !r.w.unclaimed
}

func (r *testRelay) Failing() bool {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	return !r.w.ready && !r.w.unclaimed
}

func (r *testRelay) Close() {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	if r.w.running[r.src.Name] == r {
		delete(r.w.running, r.src.Name)
	}
}

// start runs a fleet over w until the test ends.
func start(t *testing.T, w *world) (*fleet.Fleet, *logbuf.Buffer) {
	t.Helper()
	logs := &logbuf.Buffer{}
	fl, err := fleet.New(fleet.Config{List: w.List, Open: w.Open, Every: 20 * time.Millisecond,
		RetryMin: 10 * time.Millisecond, RetryMax: 40 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if n := len(w.runningSources()); n != 0 {
			t.Errorf("%d relays left open after Run returned", n)
		}
	})
	return fl, logs
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

func TestFleetFollowsTheList(t *testing.T) {
	w := newWorld("a", "b")
	_, logs := start(t, w)
	waitUntil(t, "a and b run", func() bool { return len(w.runningSources()) == 2 })

	w.set(func(w *world) {
		w.list = append(w.list, fleet.Source{Name: "c", DB: "postgres://h/c", Weight: 1, Sink: "https://x"})
	})
	waitUntil(t, "c is added", func() bool { _, ok := w.runningSources()["c"]; return ok })

	w.set(func(w *world) { w.list = w.list[1:] }) // a removed
	waitUntil(t, "a is removed", func() bool { _, ok := w.runningSources()["a"]; return !ok })
	if !strings.Contains(logs.String(), `msg="fleet: source stopped: no longer listed for this process" source=a`) {
		t.Errorf("the removal is not logged:\n%s", logs)
	}

	w.set(func(w *world) { w.list[0].Weight = 5 }) // b changed
	waitUntil(t, "b runs with its new weight", func() bool { return w.runningSources()["b"].Weight == 5 })
	if !strings.Contains(logs.String(), `msg="fleet: source stopped: its settings changed" source=b`) {
		t.Errorf("the restart is not logged:\n%s", logs)
	}
	if w.opened["c"] != 1 {
		t.Errorf("c, unchanged, was opened %d times", w.opened["c"])
	}
}

// A source that cannot be opened is retried alone; the others run; its
// failure is logged once however many retries fail the same way, and its
// relay's repeated errors once.
func TestFleetIsolatesAFailingSource(t *testing.T) {
	w := newWorld("good", "bad")
	w.broken["bad"] = errors.New("cannot reach the database")
	fl, logs := start(t, w)
	waitUntil(t, "bad is retried 4 times", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.opened["bad"] >= 4
	})
	if _, ok := w.runningSources()["good"]; !ok {
		t.Fatal("good does not run beside bad")
	}
	if n := strings.Count(logs.String(), "source=bad"); n != 1 {
		t.Errorf("bad's failure logged %d times, want once:\n%s", n, logs)
	}
	waitUntil(t, "good is delivering", func() bool {
		for _, st := range fl.Sources() {
			if st.Source.Name == "good" && st.State == fleet.StateDelivering {
				return true
			}
		}
		return false
	})
	for _, st := range fl.Sources() {
		if st.Source.Name == "bad" && (st.State != fleet.StateFailed || st.Err != "cannot reach the database") {
			t.Errorf("bad's status = %+v", st)
		}
	}

	// mended, it runs; a new failure is logged again.
	w.set(func(w *world) { delete(w.broken, "bad") })
	waitUntil(t, "bad runs", func() bool { _, ok := w.runningSources()["bad"]; return ok })
}

// A relay that stops with an error is opened again, and its state changes
// are logged: delivering, not delivering, delivering.
func TestFleetLogsStateChanges(t *testing.T) {
	w := newWorld("s")
	_, logs := start(t, w)
	waitUntil(t, "s delivering", func() bool { return strings.Contains(logs.String(), `msg="fleet: source delivering" source=s`) })
	w.set(func(w *world) { w.ready = false })
	waitUntil(t, "s not delivering", func() bool {
		return strings.Contains(logs.String(), `msg="fleet: source not delivering: its claims fail" source=s`)
	})
	// The first error when the claims began to fail, the second once the
	// fleet saw it (a change of state shows the next line again); none of
	// the hundreds between.
	waitUntil(t, "the error is shown again", func() bool { return strings.Count(logs.String(), `msg="claim failed"`) == 2 })
	time.Sleep(50 * time.Millisecond)
	w.set(func(w *world) { w.ready = true })
	waitUntil(t, "s delivering again", func() bool { return strings.Count(logs.String(), `msg="fleet: source delivering" source=s`) == 2 })
	if n := strings.Count(logs.String(), `msg="claim failed"`); n != 2 {
		t.Errorf("the relay's error logged %d times, want twice:\n%s", n, logs)
	}
}

// A relay that has not claimed yet (its first claim queued behind other
// sources' on a busy pool) is starting, not "not delivering"; its first
// claim decides.
func TestFleetShowsARelayNotClaimedYetStarting(t *testing.T) {
	w := newWorld("s")
	w.unclaimed = true
	fl, logs := start(t, w)
	waitUntil(t, "s runs", func() bool { _, ok := w.runningSources()["s"]; return ok })
	time.Sleep(3 * time.Second) // the fleet looks every second
	if st := fl.Sources(); len(st) != 1 || st[0].State != fleet.StateStarting {
		t.Fatalf("a relay that has not claimed yet: %+v, want starting", st)
	}
	if strings.Contains(logs.String(), "not delivering") {
		t.Fatalf("a relay that has not claimed yet was logged not delivering:\n%s", logs)
	}
	w.set(func(w *world) { w.unclaimed, w.ready = false, false })
	waitUntil(t, "s not delivering once its first claim failed", func() bool {
		return strings.Contains(logs.String(), `msg="fleet: source not delivering: its claims fail" source=s`)
	})
}

func TestFleetReopensARelayThatStops(t *testing.T) {
	w := newWorld("s")
	w.stops["s"] = errors.New("not migrated")
	_, logs := start(t, w)
	waitUntil(t, "s reopened 3 times", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.opened["s"] >= 3
	})
	if n := strings.Count(logs.String(), "not migrated"); n != 1 {
		t.Errorf("the same failure logged %d times, want once:\n%s", n, logs)
	}
}

// A listing that fails keeps the sources running; the first one failing
// is Run's error.
func TestFleetListing(t *testing.T) {
	w := newWorld("a")
	_, logs := start(t, w)
	waitUntil(t, "a runs", func() bool { return len(w.runningSources()) == 1 })
	w.set(func(w *world) { w.listErr = errors.New("registry down") })
	waitUntil(t, "the failure is logged", func() bool { return strings.Contains(logs.String(), "registry down") })
	time.Sleep(60 * time.Millisecond)
	if len(w.runningSources()) != 1 {
		t.Error("a stopped while the list could not be read")
	}
	if n := strings.Count(logs.String(), "registry down"); n != 1 {
		t.Errorf("the listing failure logged %d times, want once", n)
	}

	w2 := newWorld()
	w2.listErr = errors.New("no such file")
	fl, err := fleet.New(fleet.Config{List: w2.List, Open: w2.Open})
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("Run = %v, want the listing's error", err)
	}
}

// A relay slow to stop holds up no other source: the list's other changes
// apply meanwhile, and a source whose settings changed starts again once
// its old relay stopped, never two at once.
func TestFleetDoesNotWaitForARelayToStop(t *testing.T) {
	w := newWorld("slow", "other")
	release := make(chan struct{})
	w.slow["slow"] = release
	_, _ = start(t, w)
	waitUntil(t, "both run", func() bool { return len(w.runningSources()) == 2 })

	w.set(func(w *world) {
		w.list[0].Weight = 2 // slow changed: it stops, slowly
		w.list = append(w.list, fleet.Source{Name: "new", DB: "postgres://h/new", Weight: 1, Sink: "https://x"})
	})
	waitUntil(t, "new starts while slow stops", func() bool { _, ok := w.runningSources()["new"]; return ok })
	time.Sleep(100 * time.Millisecond)
	if got := w.runningSources()["slow"]; got.Weight != 1 {
		t.Fatalf("slow runs with weight %d before its old relay stopped", got.Weight)
	}
	close(release)
	waitUntil(t, "slow runs with its new settings", func() bool { return w.runningSources()["slow"].Weight == 2 })
}
