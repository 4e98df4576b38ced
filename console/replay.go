package console

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/replay"
)

// The replay action (the replay page, /api/replays): a replay's request
// is checked into a plan (replay.Params), counted by a dry run on the
// confirmation (or the API's dry_run), then run by replay.Run in a
// goroutine of the console's, one at a time; its progress is kept, with
// the last replaysKept replays', for the pages and the API.

// Bounds of the replay action.
const (
	// replaysKept is how many finished replays the console remembers
	// (GET /api/replays, the replay page's list).
	replaysKept = 20
	// replayCountTimeout bounds a dry run's count: past it, the count is
	// "at least".
	replayCountTimeout = readTimeout
	// replayCancelWait is how long a cancel waits for the replay to stop
	// (after its batch in flight) before it answers.
	replayCancelWait = 10 * time.Second
	// replayTypesMax bounds the type globs of a replay.
	replayTypesMax = 64
)

// Where a replay reads from (replayRequest.From).
const (
	replayFromBoth    = "both"
	replayFromTable   = "table"
	replayFromArchive = "archive"
)

// The states of a replay.
const (
	replayRunning  = "running"
	replayDone     = "done"
	replayCanceled = "canceled"
	replayFailed   = "failed"
)

// replayRequest is a replay as the form or the API asks for it, not yet
// checked. Since and Until are times (RFC 3339; the form takes a few
// more spellings and ages); Endpoint is "" for the outbox's queue, else an
// endpoint's id (or, through the API, its name); From is "" (both),
// "both", "table" or "archive"; After and Name are optional.
type replayRequest struct {
	Since, Until               string
	Types                      []string
	AggregateType, AggregateID string
	Endpoint                   string
	From                       string
	Name                       string
	After                      string
}

// replayPlan is a checked replay: what replay.Run is given, and what the
// pages and the API show of it.
type replayPlan struct {
	Params replay.Params
	// EndpointName names Params.Endpoint ("" for the outbox's queue).
	EndpointName string
	// From is where it reads: replayFromBoth, replayFromTable or
	// replayFromArchive.
	From string
}

// replayRefusal is a field of a replayRequest the console refuses: the
// field's name (the API's member, the form's field) and why.
type replayRefusal struct {
	Field, Message string
}

func (r *replayRefusal) Error() string { return r.Field + ": " + r.Message }

// replayOff says why this console runs no replay ("" when it does).
func (c *Console) replayOff() string {
	switch {
	case c.cfg.Replay.Outbox == nil:
		return "Replay is off: this console was started without the outbox's history (console.Config.Replay)."
	case c.cfg.ReadOnly:
		return "This console is read-only: replays are shown, never started."
	}
	return ""
}

// hasArchive reports whether the console's replays may read an archive.
func (c *Console) hasArchive() bool { return c.cfg.Replay.Archive != nil }

// planReplay checks req into a plan; parseTime reads Since and Until.
// A refused field is a *replayRefusal; another error is the store's
// (listing the endpoints), or apiNotFound and apiAmbiguous for an
// endpoint no endpoint, or several, are.
func (c *Console) planReplay(ctx context.Context, req replayRequest, parseTime func(string) (time.Time, error)) (replayPlan, error) {
	var plan replayPlan
	p := &plan.Params
	refuse := func(field, format string, args ...any) error {
		return &replayRefusal{Field: field, Message: fmt.Sprintf(format, args...)}
	}
	for _, t := range []struct {
		field, text string
		dst         *time.Time
	}{{"since", req.Since, &p.Filter.Since}, {"until", req.Until, &p.Filter.Until}} {
		if t.text == "" {
			continue
		}
		at, err := parseTime(t.text)
		if err != nil {
			return plan, refuse(t.field, "%v", err)
		}
		*t.dst = at.UTC()
	}
	if len(req.Types) > replayTypesMax {
		return plan, refuse("types", "at most %d type patterns", replayTypesMax)
	}
	for _, t := range req.Types {
		if t = strings.TrimSpace(t); t != "" {
			p.Filter.EventTypes = append(p.Filter.EventTypes, t)
		}
	}
	p.Filter.AggregateType, p.Filter.AggregateID = req.AggregateType, req.AggregateID
	if err := p.Filter.Check(); err != nil {
		field := "types"
		if strings.Contains(err.Error(), "window") {
			field = "until"
		}
		return plan, refuse(field, "%s", strings.TrimPrefix(err.Error(), "store: "))
	}
	switch plan.From = req.From; plan.From {
	case "", replayFromBoth:
		plan.From = replayFromBoth
		if !c.hasArchive() {
			plan.From = replayFromTable
		}
	case replayFromTable:
	case replayFromArchive:
		if !c.hasArchive() {
			return plan, refuse("from", "this console has no archive (start postbox console with --archive URL)")
		}
	default:
		return plan, refuse("from", "want both, table or archive")
	}
	p.Table, p.Archive = plan.From == replayFromTable, plan.From == replayFromArchive
	if req.After != "" {
		id, err := uuid.Parse(req.After)
		if err != nil {
			return plan, refuse("after", "want an event's id (a UUID): the last one of the replay to resume")
		}
		p.After = id
	}
	if err := checkReplayName(req.Name); err != nil {
		return plan, refuse("name", "%v", err)
	}
	p.Name = req.Name
	if req.Endpoint == endpointAll {
		return plan, refuse("endpoint", "one endpoint, or none (the outbox's queue, which reaches every endpoint that wants the events)")
	}
	if req.Endpoint != "" {
		if c.cfg.Replay.Endpoints == nil {
			return plan, refuse("endpoint", "this console replays to the outbox's queue only (console.Config.Replay has no Endpoints)")
		}
		id, names, err := c.apiPlace(ctx, req.Endpoint)
		if err != nil {
			return plan, err
		}
		p.Endpoint, plan.EndpointName = id, names[id]
	}
	return plan, nil
}

// checkReplayName refuses a replay name the replay header cannot carry
// (replay.CheckName, as postbox replay --name); empty is the default
// name.
func checkReplayName(name string) error {
	if name == "" {
		return nil
	}
	if err := replay.CheckName(name); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "replay: "))
	}
	return nil
}

// describe says in words what the plan replays and where to.
func (p replayPlan) describe() string {
	f := p.Params.Filter
	var parts []string
	if len(f.EventTypes) > 0 {
		parts = append(parts, "of type "+show(strings.Join(f.EventTypes, ", "), cellMax))
	}
	if f.AggregateType != "" {
		parts = append(parts, `of aggregate type "`+show(f.AggregateType, cellMax)+`"`)
	}
	if f.AggregateID != "" {
		parts = append(parts, `of aggregate id "`+show(f.AggregateID, cellMax)+`"`)
	}
	switch {
	case !f.Since.IsZero() && !f.Until.IsZero():
		parts = append(parts, "written from "+showTime(f.Since)+" to "+showTime(f.Until))
	case !f.Since.IsZero():
		parts = append(parts, "written since "+showTime(f.Since))
	case !f.Until.IsZero():
		parts = append(parts, "written before "+showTime(f.Until))
	}
	if p.Params.After != uuid.Nil {
		parts = append(parts, "after event "+p.Params.After.String())
	}
	what := "every delivered event"
	if len(parts) > 0 {
		what += " " + strings.Join(parts, ", ")
	}
	from := map[string]string{replayFromBoth: "the outbox's table and its archive", replayFromTable: "the outbox's table",
		replayFromArchive: "the archive"}[p.From]
	to := "the outbox's queue"
	if p.Params.Endpoint != uuid.Nil {
		to = `the endpoint "` + show(p.EndpointName, cellMax) + `" alone`
	}
	return what + ", read from " + from + ", sent to " + to
}

// countReplay is the plan's dry run, bounded by replayCountTimeout:
// what it would read and send, complete false when the bound cut it
// short (at least that many).
func (c *Console) countReplay(ctx context.Context, plan replayPlan) (replay.Progress, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, replayCountTimeout)
	defer cancel()
	p := plan.Params
	p.DryRun = true
	got, err := replay.Run(ctx, c.cfg.Replay, p)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return got, false, nil
	}
	return got, err == nil, err
}

// replayRun is one replay the console started.
type replayRun struct {
	ID      uuid.UUID
	Plan    replayPlan
	Started time.Time
	// Expected is the dry run's count its confirmation showed (0: none).
	Expected int
	// Client is who started it, for the log.
	Client string

	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	progress replay.Progress
	state    string
	finished time.Time
	// canceled is true once a cancel was asked.
	canceled bool
}

// replayState is a replay as it is now.
type replayState struct {
	ID       uuid.UUID
	Plan     replayPlan
	Expected int
	Started  time.Time
	Progress replay.Progress
	State    string
	Finished time.Time
	// Canceling is true while a canceled replay finishes its batch.
	Canceling bool
}

func (r *replayRun) snapshot() replayState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return replayState{ID: r.ID, Plan: r.Plan, Expected: r.Expected, Started: r.Started, Progress: r.progress,
		State: r.state, Finished: r.finished, Canceling: r.canceled && r.state == replayRunning}
}

// setProgress is replay.Params.Progress.
func (r *replayRun) setProgress(p replay.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.progress = p
}

// replays are the console's replay running, if one, and those it
// remembers.
type replays struct {
	// ctx ends when the console stops (Console.Run's end): every replay
	// stops after its batch.
	ctx     context.Context
	stopAll context.CancelFunc
	running sync.WaitGroup

	mu      sync.Mutex
	current *replayRun   // the replay running; nil when none
	kept    []*replayRun // newest first, at most replaysKept
}

func newReplays() *replays {
	ctx, cancel := context.WithCancel(context.Background())
	return &replays{ctx: ctx, stopAll: cancel}
}

// busy reports whether a replay runs.
func (rs *replays) busy() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.current != nil
}

// errReplayRunning is start's refusal while a replay runs.
var errReplayRunning = errors.New("a replay is running: one at a time per console")

// start runs plan with cfg in the background, unless a replay runs (then
// it returns errReplayRunning and the running one); log says when it
// ends.
func (rs *replays) start(cfg replay.Config, plan replayPlan, expected int, client string, logEnd func(*replayRun)) (*replayRun, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.current != nil {
		return rs.current, errReplayRunning
	}
	if rs.ctx.Err() != nil {
		return nil, errors.New("the console is stopping")
	}
	now := time.Now()
	if plan.Params.Name == "" {
		plan.Params.Name = replay.DefaultName(now)
	}
	// A window left open, or ending later, ends now, as replay.Run's
	// would: events written while it runs are having their first
	// delivery. Fixed here, it is shown, and a resume reads the same
	// window.
	if f := &plan.Params.Filter; (f.Until.IsZero() || f.Until.After(now)) && f.Since.Before(now) {
		f.Until = now.UTC()
	}
	ctx, cancel := context.WithCancel(rs.ctx)
	run := &replayRun{ID: postbox.NewID(), Plan: plan, Started: now, Expected: expected, Client: client,
		cancel: cancel, done: make(chan struct{}), state: replayRunning}
	run.progress.Name = plan.Params.Name
	rs.current = run
	rs.kept = append([]*replayRun{run}, rs.kept...)
	if len(rs.kept) > replaysKept {
		rs.kept = rs.kept[:replaysKept]
	}
	rs.running.Go(func() {
		defer close(run.done)
		defer cancel()
		p := plan.Params
		p.Progress = run.setProgress
		got, err := replay.Run(ctx, cfg, p)
		run.mu.Lock()
		switch run.progress = got; {
		case err == nil:
			run.state = replayDone
		case ctx.Err() != nil:
			run.state = replayCanceled
		default:
			run.state = replayFailed
		}
		if run.progress.Name == "" {
			run.progress.Name = plan.Params.Name
		}
		run.finished = time.Now()
		run.mu.Unlock()
		rs.mu.Lock()
		rs.current = nil
		rs.mu.Unlock()
		logEnd(run)
		if run.state == replayFailed {
			cfg.Logger.Error("console: replay failed", "replay", run.ID, "error", err)
		}
	})
	return run, nil
}

// get is the replay id, if the console remembers it.
func (rs *replays) get(id uuid.UUID) (*replayRun, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, r := range rs.kept {
		if r.ID == id {
			return r, true
		}
	}
	return nil, false
}

// list is the replays the console remembers, newest first.
func (rs *replays) list() []replayState {
	rs.mu.Lock()
	kept := append([]*replayRun(nil), rs.kept...)
	rs.mu.Unlock()
	out := make([]replayState, len(kept))
	for i, r := range kept {
		out[i] = r.snapshot()
	}
	return out
}

// cancel asks run to stop after its batch in flight, and waits for it up
// to wait (or ctx); it reports whether it asked (the replay was running).
func (rs *replays) cancel(ctx context.Context, run *replayRun, wait time.Duration) bool {
	run.mu.Lock()
	asked := run.state == replayRunning && !run.canceled
	run.canceled = run.canceled || run.state == replayRunning
	run.mu.Unlock()
	run.cancel()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-run.done:
	case <-timer.C:
	case <-ctx.Done():
	}
	return asked
}

// stop stops every replay (after its batch in flight) and waits for it,
// up to wait; it reports whether every replay ended. Under rs.mu, so that
// no start slips in between the stop and the wait.
func (rs *replays) stop(wait time.Duration) bool {
	rs.mu.Lock()
	rs.stopAll()
	rs.mu.Unlock()
	ended := make(chan struct{})
	go func() {
		rs.running.Wait()
		close(ended)
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ended:
		return true
	case <-timer.C:
		return false
	}
}

// logReplayEnd logs how a replay ended, with where to resume one that
// did not finish.
func (c *Console) logReplayEnd(run *replayRun) {
	st := run.snapshot()
	attrs := []any{"replay", st.ID, "name", st.Progress.Name, "state", st.State, "read", st.Progress.Read, "matched", st.Progress.Matched,
		"requeued", st.Progress.Requeued, "inserted", st.Progress.Inserted, "skipped", st.Progress.Skipped,
		"took", st.Finished.Sub(st.Started).Round(time.Millisecond)}
	if st.State != replayDone {
		attrs = append(attrs, "resume_after", resumeAfter(st))
	}
	c.log.Info("console: replay "+st.State, attrs...)
}

// resumeAfter is the id a replay that did not finish resumes after: its
// last event's, or where it started.
func resumeAfter(st replayState) uuid.UUID {
	if st.Progress.Last != uuid.Nil {
		return st.Progress.Last
	}
	return st.Plan.Params.After
}

// sent is how many events a replay sent (requeued, or written again).
func (st replayState) sent() int { return st.Progress.Requeued + st.Progress.Inserted }
