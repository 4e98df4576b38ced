package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
)

// apiReplayBody is the body of POST /api/replays: the replay page's
// fields, times in RFC 3339, and dry_run.
type apiReplayBody struct {
	Since         string   `json:"since"`
	Until         string   `json:"until"`
	Types         []string `json:"types"`
	AggregateType string   `json:"aggregate_type"`
	AggregateID   string   `json:"aggregate_id"`
	Endpoint      string   `json:"endpoint"`
	From          string   `json:"from"`
	Name          string   `json:"name"`
	After         string   `json:"after"`
	DryRun        bool     `json:"dry_run"`
}

// apiReplay is a replay as the API answers it.
type apiReplay struct {
	ID            uuid.UUID  `json:"id"`
	Name          string     `json:"name"`
	State         string     `json:"state"`
	Canceling     bool       `json:"canceling,omitempty"`
	Since         *time.Time `json:"since,omitempty"`
	Until         *time.Time `json:"until,omitempty"`
	Types         []string   `json:"types"`
	AggregateType string     `json:"aggregate_type,omitempty"`
	AggregateID   string     `json:"aggregate_id,omitempty"`
	Endpoint      *uuid.UUID `json:"endpoint,omitempty"`
	EndpointName  string     `json:"endpoint_name,omitempty"`
	From          string     `json:"from"`
	After         *uuid.UUID `json:"after,omitempty"`
	Read          int        `json:"read"`
	Matched       int        `json:"matched"`
	Requeued      int        `json:"requeued"`
	Inserted      int        `json:"inserted"`
	Skipped       int        `json:"skipped"`
	// Last is the last event handled; ResumeAfter, for a replay that did
	// not finish, the after that resumes it.
	Last        *uuid.UUID `json:"last,omitempty"`
	ResumeAfter *uuid.UUID `json:"resume_after,omitempty"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	Error       string     `json:"error,omitempty"`
}

func apiReplayOf(st replayState) apiReplay {
	f, p := st.Plan.Params.Filter, st.Progress
	out := apiReplay{ID: st.ID, Name: p.Name, State: st.State, Canceling: st.Canceling, Types: nonNil(f.EventTypes),
		AggregateType: f.AggregateType, AggregateID: f.AggregateID, EndpointName: st.Plan.EndpointName, From: st.Plan.From,
		Read: p.Read, Matched: p.Matched, Requeued: p.Requeued, Inserted: p.Inserted, Skipped: p.Skipped, StartedAt: st.Started.UTC()}
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	id := func(u uuid.UUID) *uuid.UUID {
		if u == uuid.Nil {
			return nil
		}
		return &u
	}
	out.Since, out.Until, out.FinishedAt = at(f.Since), at(f.Until), at(st.Finished)
	out.Endpoint, out.After, out.Last = id(st.Plan.Params.Endpoint), id(st.Plan.Params.After), id(p.Last)
	switch st.State {
	case replayCanceled, replayFailed:
		out.ResumeAfter = id(resumeAfter(st))
	}
	if st.State == replayFailed {
		out.Error = "the replay failed: see the console's log"
	}
	return out
}

// apiReplayCount is the answer of a dry run.
type apiReplayCount struct {
	// Read is how many events it read, Matched how many of them it would
	// send (those the endpoint wants; all of them to the outbox's queue).
	Read    int `json:"read"`
	Matched int `json:"matched"`
	// Complete is false when the count stopped at its time bound: at
	// least that many.
	Complete bool `json:"complete"`
}

// apiReplayList is the answer of GET /api/replays.
type apiReplayList struct {
	Replays []apiReplay `json:"replays"`
}

// apiReplayOff answers the 403 of a console that runs no replay, and
// reports true, or reports false.
func (c *Console) apiReplayOff(w http.ResponseWriter) bool {
	if c.cfg.Replay.Outbox == nil {
		c.apiProblem(w, http.StatusForbidden, problemReplayOff, "replay is off: this console was started without the outbox's history")
		return true
	}
	return false
}

func (c *Console) apiReplayCreate(w http.ResponseWriter, r *http.Request) {
	if c.apiReplayOff(w) {
		return
	}
	var body apiReplayBody
	if !c.apiRead(w, r, &body, false) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	req := replayRequest{Since: body.Since, Until: body.Until, Types: body.Types, AggregateType: body.AggregateType,
		AggregateID: body.AggregateID, Endpoint: body.Endpoint, From: body.From, Name: body.Name, After: body.After}
	plan, err := c.planReplay(ctx, req, func(s string) (time.Time, error) {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return t, errors.New("want an RFC 3339 time, such as 2026-12-01T10:00:00Z")
		}
		return t, nil
	})
	var refusal *replayRefusal
	switch {
	case errors.As(err, &refusal):
		c.apiProblemSetting(w, http.StatusUnprocessableEntity, problemInvalid, refusal.Error(), refusal.Field)
		return
	case err != nil:
		c.apiPlaceFail(w, err)
		return
	}
	if body.DryRun {
		got, complete, err := c.countReplay(r.Context(), plan)
		if err != nil {
			c.apiFail(w, "counting what the replay sends", err)
			return
		}
		c.apiJSON(w, http.StatusOK, apiReplayCount{Read: got.Read, Matched: got.Matched, Complete: complete})
		return
	}
	run, err := c.replays.start(c.cfg.Replay, plan, 0, c.clientAddr(r).String(), c.logReplayEnd)
	if errors.Is(err, errReplayRunning) {
		c.apiProblem(w, http.StatusConflict, problemReplayRunning, fmt.Sprintf("replay %s is running: one at a time per console (cancel it, or wait for its end)", run.ID))
		return
	}
	if err != nil {
		c.apiProblem(w, http.StatusServiceUnavailable, problemInternal, err.Error())
		return
	}
	c.log.Info("console: API: replay started", "replay", run.ID, "name", run.Plan.Params.Name, "what", run.Plan.describe(), "client", run.Client)
	w.Header().Set("Location", "/api/replays/"+run.ID.String())
	c.apiJSON(w, http.StatusAccepted, apiReplayOf(run.snapshot()))
}

func (c *Console) apiReplayList(w http.ResponseWriter, r *http.Request) {
	out := apiReplayList{Replays: []apiReplay{}}
	for _, st := range c.replays.list() {
		out.Replays = append(out.Replays, apiReplayOf(st))
	}
	c.apiJSON(w, http.StatusOK, out)
}

// apiReplayOfPath reads the replay of the path, or answers 404.
func (c *Console) apiReplayOfPath(w http.ResponseWriter, r *http.Request) (*replayRun, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	run, ok := c.replays.get(id)
	if err != nil || !ok {
		c.apiProblem(w, http.StatusNotFound, problemNotFound, fmt.Sprintf("no such replay (the console remembers its last %d, until it restarts)", replaysKept))
		return nil, false
	}
	return run, true
}

func (c *Console) apiReplayGet(w http.ResponseWriter, r *http.Request) {
	if run, ok := c.apiReplayOfPath(w, r); ok {
		c.apiJSON(w, http.StatusOK, apiReplayOf(run.snapshot()))
	}
}

func (c *Console) apiReplayCancel(w http.ResponseWriter, r *http.Request) {
	run, ok := c.apiReplayOfPath(w, r)
	if !ok {
		return
	}
	if c.replays.cancel(r.Context(), run, replayCancelWait) {
		c.log.Info("console: API: replay cancel asked", "replay", run.ID, "client", c.clientAddr(r).String())
	}
	c.apiJSON(w, http.StatusOK, apiReplayOf(run.snapshot()))
}
