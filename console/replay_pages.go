package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/replay"
	"github.com/postbox-go/postbox/store"
)

// replayRefreshSeconds is how often a running replay's page refreshes.
const replayRefreshSeconds = 2

// replayPageRoutes adds the replay pages' routes, under /replay.
func (c *Console) replayPageRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /replay", c.requireAuth(c.replayFormPage))
	mux.HandleFunc("POST /replay", c.action(c.replayPost))
	mux.HandleFunc("GET /replay/{id}", c.requireAuth(c.replayShow))
	mux.HandleFunc("POST /replay/{id}/cancel", c.action(c.replayCancel))
}

// replayForm is the replay form's fields as sent: shown again with a
// refusal, carried by the confirmation, and by the link that resumes a
// replay.
type replayForm struct {
	Since, Until, Types, AggregateType, AggregateID, Endpoint, From, Name, After string
	// Expected is the confirmation's count, which the progress page
	// measures the replay against.
	Expected string
}

// replayFormFields are the form's fields, as readReplayForm reads them.
var replayFormFields = []string{"since", "until", "types", "aggregate_type", "aggregate_id", "endpoint", "from", "name", "after", "expected"}

func readReplayForm(v url.Values) replayForm {
	get := func(name string) string { return strings.TrimSpace(v.Get(name)) }
	return replayForm{Since: get("since"), Until: get("until"), Types: get("types"), AggregateType: get("aggregate_type"),
		AggregateID: get("aggregate_id"), Endpoint: get("endpoint"), From: get("from"), Name: get("name"), After: get("after"),
		Expected: get("expected")}
}

// query is the form as URL parameters, without the empty ones.
func (f replayForm) query() url.Values {
	v := url.Values{}
	for i, s := range []string{f.Since, f.Until, f.Types, f.AggregateType, f.AggregateID, f.Endpoint, f.From, f.Name, f.After, f.Expected} {
		if s != "" {
			v.Set(replayFormFields[i], s)
		}
	}
	return v
}

func (f replayForm) request() replayRequest {
	return replayRequest{Since: f.Since, Until: f.Until, Types: store.SplitTypes(f.Types), AggregateType: f.AggregateType,
		AggregateID: f.AggregateID, Endpoint: f.Endpoint, From: f.From, Name: f.Name, After: f.After}
}

// replayFormOf is the form of a checked plan: its times as RFC 3339, so
// that a confirmation runs the window it counted (an age would move).
func replayFormOf(p replayPlan) replayForm {
	f := replayForm{Types: strings.Join(p.Params.Filter.EventTypes, ", "), AggregateType: p.Params.Filter.AggregateType,
		AggregateID: p.Params.Filter.AggregateID, From: p.From, Name: p.Params.Name}
	if t := p.Params.Filter.Since; !t.IsZero() {
		f.Since = t.UTC().Format(time.RFC3339Nano)
	}
	if t := p.Params.Filter.Until; !t.IsZero() {
		f.Until = t.UTC().Format(time.RFC3339Nano)
	}
	if p.Params.Endpoint != uuid.Nil {
		f.Endpoint = p.Params.Endpoint.String()
	}
	if p.Params.After != uuid.Nil {
		f.After = p.Params.After.String()
	}
	return f
}

// formTimeLayouts are the spellings of a time the form takes, in UTC
// unless they say otherwise.
var formTimeLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// formTime reads a time of the replay form: a date and time (UTC unless
// it says its offset), or an age ("2h", "3d"): that long before now.
func formTime(now time.Time) func(string) (time.Time, error) {
	return func(s string) (time.Time, error) {
		for _, layout := range formTimeLayouts {
			if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
				return t, nil
			}
		}
		if d, err := parseAge(s); err == nil {
			return now.Add(-d), nil
		}
		return time.Time{}, fmt.Errorf("%q: want a time (2026-12-01 10:00, in UTC, or RFC 3339) or an age (2h, 3d: that long ago)", show(s, 40))
	}
}

// replayView is a replay as the pages show it.
type replayView struct {
	replayState
	Describe string
	// Resume is the link to the form, filled in, that resumes a replay
	// that did not finish ("" for one running or done). A template.URL:
	// the query url.Values.Encode built is put in the href as it is
	// (html/template would escape its & and =, and the form would open
	// empty: a replay of everything).
	Resume template.URL
}

func replayViewOf(st replayState) replayView {
	v := replayView{replayState: st, Describe: st.Plan.describe()}
	if st.State == replayCanceled || st.State == replayFailed {
		f := replayFormOf(st.Plan)
		f.Name = st.Progress.Name // the same header value
		if after := resumeAfter(st); after != uuid.Nil {
			f.After = after.String()
		}
		v.Resume = template.URL("/replay?" + f.query().Encode())
	}
	return v
}

// Sent is how many events it sent.
func (v replayView) Sent() int { return v.sent() }

// Percent is how far it is, against the count its confirmation showed:
// 0 to 100, -1 without a count.
func (v replayView) Percent() int {
	if v.Expected <= 0 {
		return -1
	}
	n := v.Progress.Matched
	if v.State == replayDone {
		n = v.Expected
	}
	return min(100, n*100/v.Expected)
}

// LastID is the id of the last event it handled, "" before the first.
func (v replayView) LastID() string {
	if v.Progress.Last == uuid.Nil {
		return ""
	}
	return v.Progress.Last.String()
}

// Took is how long it ran, or runs.
func (v replayView) Took() string {
	end := v.Finished
	if end.IsZero() {
		end = time.Now()
	}
	return roundAge(end.Sub(v.Started))
}

// replayPage is the replay form, with the replays the console remembers.
type replayPage struct {
	Form replayForm
	// Off says why no replay can be started ("": one can).
	Off string
	// Archive names the console's archive ("" when it has none).
	Archive   string
	Endpoints []endpointOption
	Froms     []endpointOption
	// Errors are the refusals by field; Error one of no field.
	Errors map[string]string
	Error  string
	// Running is the replay running, if one; Runs are those remembered,
	// newest first.
	Running *replayView
	Runs    []replayView
	// EndpointsError is true when the endpoints could not be listed.
	EndpointsError bool
}

func (c *Console) replayFormPage(w http.ResponseWriter, r *http.Request) {
	c.showReplayForm(w, r, http.StatusOK, readReplayForm(r.URL.Query()), nil)
}

// showReplayForm renders the replay form f with status; refusal, when
// not nil, is shown beside its field.
func (c *Console) showReplayForm(w http.ResponseWriter, r *http.Request, status int, f replayForm, refusal *replayRefusal) {
	p := replayPage{Form: f, Off: c.replayOff()}
	if refusal != nil {
		if refusal.Field == "" {
			p.Error = refusal.Message
		} else {
			p.Errors = map[string]string{refusal.Field: refusal.Message}
		}
	}
	if c.hasArchive() {
		p.Archive = c.cfg.Replay.Archive.String()
		p.Froms = []endpointOption{{Value: replayFromBoth, Label: "the outbox's table and the archive"},
			{Value: replayFromTable, Label: "the outbox's table only"}, {Value: replayFromArchive, Label: "the archive only"}}
		for i := range p.Froms {
			p.Froms[i].Selected = p.Froms[i].Value == f.From || f.From == "" && i == 0
		}
	}
	if c.cfg.Replay.Endpoints != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
		defer cancel()
		eps, err := c.cfg.Store.EndpointList(ctx)
		if err != nil {
			c.log.Error("console: listing the webhook endpoints", "error", err)
			p.EndpointsError = true
		}
		p.Endpoints = []endpointOption{{Value: "", Label: "the outbox's queue: every endpoint that wants them (or the relays' sink)", Selected: f.Endpoint == ""}}
		for _, e := range eps {
			p.Endpoints = append(p.Endpoints, endpointOption{Value: e.ID.String(), Label: "endpoint " + show(e.Name, cellMax) + " alone",
				Selected: e.ID.String() == f.Endpoint})
		}
	}
	for _, st := range c.replays.list() {
		v := replayViewOf(st)
		if st.State == replayRunning {
			p.Running = &v
		}
		p.Runs = append(p.Runs, v)
	}
	c.render(w, r, status, "replay", p)
}

// replayConfirmPage asks before a replay, with its dry run's count.
type replayConfirmPage struct {
	// Form is the plan's, carried by the confirmation.
	Form     replayForm
	Describe string
	// Count is how many events it sends (Read of them read); with More,
	// at least that many (the count stopped at its time bound).
	Count, Read int
	More        bool
	// Endpoint is true for a replay to one endpoint.
	Endpoint bool
	Name     string
	// Back is the form, filled as it was.
	Back string
}

// replayPost checks the replay form; without "confirm" it counts what the
// replay sends (a dry run) and asks; with it, it starts the replay and
// shows its progress.
func (c *Console) replayPost(w http.ResponseWriter, r *http.Request) {
	if off := c.replayOff(); off != "" {
		http.Error(w, "console: "+off, http.StatusForbidden)
		return
	}
	f := readReplayForm(r.PostForm)
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	plan, err := c.planReplay(ctx, f.request(), formTime(time.Now()))
	var refusal *replayRefusal
	switch {
	case errors.As(err, &refusal):
		c.showReplayForm(w, r, http.StatusUnprocessableEntity, f, refusal)
		return
	case errors.Is(err, apiNotFound):
		c.showReplayForm(w, r, http.StatusUnprocessableEntity, f, &replayRefusal{Field: "endpoint", Message: "no such endpoint (removed?)"})
		return
	case err != nil:
		c.fail(w, "listing the endpoints", err)
		return
	}
	if r.PostFormValue("confirm") != "1" {
		if plan.Params.Name == "" {
			plan.Params.Name = replay.DefaultName(time.Now())
		}
		got, complete, err := c.countReplay(r.Context(), plan)
		if err != nil {
			c.fail(w, "counting what the replay sends", err)
			return
		}
		p := replayConfirmPage{Form: replayFormOf(plan), Describe: plan.describe(), Count: got.Matched, Read: got.Read, More: !complete,
			Endpoint: plan.Params.Endpoint != uuid.Nil, Name: plan.Params.Name, Back: "/replay?" + f.query().Encode()}
		p.Form.Expected = strconv.Itoa(got.Matched)
		c.render(w, r, http.StatusOK, "replay_confirm", p)
		return
	}
	expected, _ := strconv.Atoi(f.Expected)
	run, err := c.replays.start(c.cfg.Replay, plan, max(expected, 0), c.clientAddr(r).String(), c.logReplayEnd)
	if errors.Is(err, errReplayRunning) {
		c.showReplayForm(w, r, http.StatusConflict, f, &replayRefusal{Message: "A replay is running (" + run.ID.String() + "): one at a time. Cancel it, or wait for its end."})
		return
	}
	if err != nil {
		http.Error(w, "console: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	c.log.Info("console: replay started", "replay", run.ID, "name", run.Plan.Params.Name, "what", run.Plan.describe(), "client", run.Client)
	http.Redirect(w, r, "/replay/"+run.ID.String(), http.StatusSeeOther)
}

// replayRunPage is one replay's progress.
type replayRunPage struct {
	replayView
	// Notice says what a cancel did.
	Notice string
}

// refreshSeconds makes a running replay's page refresh itself.
func (p replayRunPage) refreshSeconds() int {
	if p.State == replayRunning {
		return replayRefreshSeconds
	}
	return 0
}

// replayOf reads the replay id of the path, or answers 400 or 404.
func (c *Console) replayOf(w http.ResponseWriter, r *http.Request) (*replayRun, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.Error(w, "console: replay id is not a UUID", http.StatusBadRequest)
		return nil, false
	}
	run, ok := c.replays.get(id)
	if !ok {
		http.Error(w, fmt.Sprintf("console: replay %s: no such replay (the console remembers its last %d, until it restarts)", id, replaysKept), http.StatusNotFound)
		return nil, false
	}
	return run, true
}

func (c *Console) replayShow(w http.ResponseWriter, r *http.Request) {
	run, ok := c.replayOf(w, r)
	if !ok {
		return
	}
	p := replayRunPage{replayView: replayViewOf(run.snapshot())}
	if r.URL.Query().Get("done") == "cancel" {
		p.Notice = "Cancel asked: the replay stops after the batch in flight."
	}
	c.render(w, r, http.StatusOK, "replay_run", p)
}

// replayCancel stops the replay of the path after its batch in flight,
// waits a little for it, and shows it.
func (c *Console) replayCancel(w http.ResponseWriter, r *http.Request) {
	run, ok := c.replayOf(w, r)
	if !ok {
		return
	}
	if c.replays.cancel(r.Context(), run, replayCancelWait) {
		c.log.Info("console: replay cancel asked", "replay", run.ID, "client", c.clientAddr(r).String())
	}
	http.Redirect(w, r, "/replay/"+run.ID.String()+"?done=cancel", http.StatusSeeOther)
}

// Header is the header a replay marks its events with.
func (replayConfirmPage) Header() string { return postbox.HeaderReplay }

// Header is the header a replay marks its events with.
func (replayView) Header() string { return postbox.HeaderReplay }
