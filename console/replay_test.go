package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"gocloud.dev/blob/memblob"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/replay"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// deliverKept writes events and delivers them, kept marked done (as a
// relay with a --retention does): the history a replay reads.
func deliverKept(t *testing.T, s console.Store, events ...postbox.Event) {
	t.Helper()
	o := driverOf(t, s)
	ctx := ctxFor(t)
	if err := o.Enqueue(ctx, events...); err != nil {
		t.Fatal(err)
	}
	got, err := o.Claim(ctx, store.ClaimParams{Owner: "test", Limit: len(events), Lease: time.Minute})
	if err != nil || len(got) != len(events) {
		t.Fatalf("claim: %d, %v", len(got), err)
	}
	done := make([]uuid.UUID, len(events))
	var ended []int64
	for i, e := range got {
		done[i] = e.ID
		if !slices.Contains(ended, e.Lease) {
			ended = append(ended, e.Lease)
		}
	}
	if err := o.Settle(ctx, store.SettleParams{Owner: "test", Done: done, Ended: ended, KeepDone: true}); err != nil {
		t.Fatal(err)
	}
}

// invoiceEvent is an event of another type than orderEvent's.
func invoiceEvent(n int) postbox.Event {
	return postbox.Event{ID: postbox.NewID(), AggregateType: "invoice", AggregateID: fmt.Sprint(n), EventType: "invoice.paid",
		Payload: fmt.Appendf(nil, `{"invoice": %d}`, n)}
}

// replayConfig is what the console replays with on s: its outbox and
// endpoints, and a, when not nil, as the archive.
func replayConfig(t *testing.T, s console.Store, a *archive.Archive) replay.Config {
	d := driverOf(t, s)
	return replay.Config{Outbox: d, Endpoints: d, Archive: a}
}

// memArchive is an archive in memory.
func memArchive(t *testing.T) *archive.Archive {
	t.Helper()
	a := archive.New(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// replayed checks that event id is pending again, marked as a replay
// named name.
func replayed(t *testing.T, s console.Store, id uuid.UUID, name string) {
	t.Helper()
	r, err := s.Get(ctxFor(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != store.StatusPending || r.Headers[postbox.HeaderReplay] != name {
		t.Fatalf("event %s: %s with headers %v; want pending again, %s: %s", id, r.Status, r.Headers, postbox.HeaderReplay, name)
	}
}

var replayPath = regexp.MustCompile(`^/replay/([0-9a-f-]{36})$`)

// The replay pages: the form (types order.*), its confirmation counting
// what it sends (the dry run: the 3 order events, not the invoice),
// then the replay in the background and its page, until done: the order
// events are pending again, each marked with the replay's name, the
// invoice is left delivered; the form lists the replay.
func TestReplayPagesReplayDeliveredEvents(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		orders := []postbox.Event{orderEvent(1), orderEvent(2), orderEvent(3)}
		invoice := invoiceEvent(1)
		deliverKept(t, s, append(orders, invoice)...)
		c := serve(t, console.Config{Store: s, Replay: replayConfig(t, s, nil)})

		res, body := c.get("/replay")
		wantStatus(t, res, body, http.StatusOK)
		if !strings.Contains(body, `id="replay-form"`) || !strings.Contains(body, `id="no-archive"`) {
			t.Fatalf("the replay page shows no form, or does not say it has no archive:\n%s", body)
		}
		form := url.Values{"csrf": {c.csrf("/replay")}, "types": {"order.*"}, "since": {"1h"}, "name": {"replay-incident-42"}}
		res, body = c.post("/replay", form)
		wantStatus(t, res, body, http.StatusOK)
		if !strings.Contains(body, "Replay 3 events?") || !strings.Contains(body, "Postbox-Replay: replay-incident-42") {
			t.Fatalf("the confirmation does not count the 3 order events:\n%s", body)
		}
		confirm := url.Values{"confirm": {"1"}}
		for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`).FindAllStringSubmatch(body, -1) {
			confirm.Set(m[1], strings.ReplaceAll(m[2], "&#43;", "+"))
		}
		if _, err := time.Parse(time.RFC3339Nano, confirm.Get("since")); err != nil {
			t.Fatalf("the confirmation carries since %q, want the time the age meant: %v", confirm.Get("since"), err)
		}
		res, body = c.post("/replay", confirm)
		wantStatus(t, res, body, http.StatusSeeOther)
		m := replayPath.FindStringSubmatch(res.Header.Get("Location"))
		if m == nil {
			t.Fatalf("after the confirmation: redirected to %q, want the replay's page", res.Header.Get("Location"))
		}
		waitUntil(t, 20*time.Second, "the replay's end", func() bool {
			_, body := c.get(m[0])
			return strings.Contains(body, `id="replay-done"`)
		})
		_, body = c.get(m[0])
		if !strings.Contains(body, "Done: 3 events sent again.") || strings.Contains(body, "data-refresh") {
			t.Fatalf("the replay's page, done:\n%s", body)
		}
		for _, e := range orders {
			replayed(t, s, e.ID, "replay-incident-42")
		}
		if got := status(t, s, invoice.ID); got != store.StatusDone {
			t.Fatalf("the invoice event is %s, want left done", got)
		}
		_, body = c.get("/replay")
		if !strings.Contains(body, `<tr data-id="`+m[1]+`">`) {
			t.Fatalf("the replay page does not list the replay:\n%s", body)
		}
	})
}

// The replay form refuses what it cannot run beside the field (422), and
// a console that is read-only, or without the outbox's history, offers
// no form and refuses the POST.
func TestReplayPagesRefuse(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	c := serve(t, console.Config{Store: s, Replay: replayConfig(t, s, nil)})
	csrf := c.csrf("/replay")
	for _, f := range []struct {
		field, value, want string
	}{
		{"since", "yesterday-ish", "want a time"},
		{"types", "order.[", "syntax error in pattern"},
		{"from", "archive", "no archive"},
		{"after", "not-an-id", "(a UUID)"},
		{"endpoint", uuid.NewString(), "no such endpoint"},
	} {
		res, body := c.post("/replay", url.Values{"csrf": {csrf}, f.field: {f.value}})
		wantStatus(t, res, body, http.StatusUnprocessableEntity)
		if !strings.Contains(body, f.want) || !strings.Contains(body, `class="field-error"`) {
			t.Errorf("%s %q: the form does not say %q beside the field:\n%s", f.field, f.value, f.want, body)
		}
	}
	res, body := c.post("/replay", url.Values{"csrf": {csrf}, "since": {"2026-12-02 10:00"}, "until": {"2026-12-01"}})
	wantStatus(t, res, body, http.StatusUnprocessableEntity)
	res, body = c.post("/replay", url.Values{"types": {"order.*"}})
	wantStatus(t, res, body, http.StatusForbidden)

	for name, cfg := range map[string]console.Config{
		"read-only": {Store: s, ReadOnly: true, Replay: replayConfig(t, s, nil)},
		"off":       {Store: s},
	} {
		c := serve(t, cfg)
		res, body := c.get("/replay")
		wantStatus(t, res, body, http.StatusOK)
		if strings.Contains(body, `id="replay-form"`) || !strings.Contains(body, `id="replay-off"`) {
			t.Errorf("%s: the page offers the form, or does not say why not:\n%s", name, body)
		}
		form := url.Values{"types": {"order.*"}}
		if !cfg.ReadOnly { // the failed page's form carries the token
			form.Set("csrf", c.csrf("/failed"))
		}
		res, body = c.post("/replay", form)
		wantStatus(t, res, body, http.StatusForbidden)
		if !strings.Contains(body, map[bool]string{true: "read-only", false: "Replay is off"}[cfg.ReadOnly]) {
			t.Errorf("%s: the refusal does not say why: %s", name, body)
		}
	}
}

// apiReplay is a replay as the API answers it.
type apiReplay struct {
	ID                                         uuid.UUID
	Name, State, From                          string
	Canceling                                  bool
	Read, Matched, Requeued, Inserted, Skipped int
	Last                                       uuid.UUID
	ResumeAfter                                uuid.UUID `json:"resume_after"`
	Endpoint                                   uuid.UUID
	Types                                      []string
}

// waitReplay polls the replay id until it is no longer running.
func (a *apiAPI) waitReplay(t *testing.T, id uuid.UUID) apiReplay {
	t.Helper()
	var r apiReplay
	waitUntil(t, 20*time.Second, "the replay's end", func() bool {
		_, body := a.call(t, apiCall{method: http.MethodGet, path: "/api/replays/" + id.String()}, http.StatusOK)
		decode(t, body, &r)
		return r.State != "running"
	})
	return r
}

// The replay API: a dry run counts and sends nothing; a replay starts
// (202, Location), runs in the background and GET follows it to its end;
// it reads the table, the archive (events whose rows are gone are written
// again), or both, each event once; to one endpoint it writes the
// deliveries of the events the endpoint's types want; GET /api/replays
// lists them, newest first. Every request and answer follows
// openapi.json, and every replay operation is exercised.
func TestAPIReplays(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		ctx := ctxFor(t)
		orders := []postbox.Event{orderEvent(1), orderEvent(2)}
		invoice := invoiceEvent(1)
		deliverKept(t, s, append(orders, invoice)...)
		// Two events only the archive holds: delivered, archived, and
		// their rows gone.
		gone := []postbox.Event{orderEvent(3), orderEvent(4)}
		a := memArchive(t)
		kept := make([]store.HistoryEvent, len(gone))
		for i, e := range gone {
			kept[i] = store.HistoryEvent{Event: e, CreatedAt: time.Now().Add(-time.Minute), ProcessedAt: time.Now()}
		}
		if err := a.Keep(ctx, kept); err != nil {
			t.Fatal(err)
		}
		billing := newEndpoint(t, s, "billing", store.EndpointEnabled)
		billing.Types = []string{"invoice.*"}
		if _, err := driverOf(t, s).EndpointUpdate(ctx, billing); err != nil {
			t.Fatal(err)
		}
		api := newAPI(t, console.Config{Store: s, Token: testToken, Replay: replayConfig(t, s, a)})

		var count struct {
			Read, Matched int
			Complete      bool
		}
		_, body := api.call(t, apiCall{method: http.MethodPost, path: "/api/replays", body: map[string]any{"types": []string{"order.*"}, "dry_run": true}}, http.StatusOK)
		if decode(t, body, &count); count.Matched != 4 || count.Read != 4 || !count.Complete {
			t.Fatalf("dry run of order.* from the table and the archive: %+v, want 4", count)
		}
		if got := status(t, s, orders[0].ID); got != store.StatusDone {
			t.Fatalf("the dry run changed an event: %s", got)
		}

		res, body := api.call(t, apiCall{method: http.MethodPost, path: "/api/replays", body: map[string]any{"types": []string{"order.*"}, "name": "replay-api"}}, http.StatusAccepted)
		var started apiReplay
		decode(t, body, &started)
		if res.Header.Get("Location") != "/api/replays/"+started.ID.String() || started.Name != "replay-api" || started.From != "both" {
			t.Fatalf("started: %+v, Location %q", started, res.Header.Get("Location"))
		}
		done := api.waitReplay(t, started.ID)
		if done.State != "done" || done.Requeued != 2 || done.Inserted != 2 || done.Skipped != 0 {
			t.Fatalf("the replay of order.*: %+v, want done, 2 requeued and 2 written again from the archive", done)
		}
		for _, e := range append(orders, gone...) {
			replayed(t, s, e.ID, "replay-api")
		}

		// Again, from the table only: the order events are pending now,
		// left alone.
		_, body = api.call(t, apiCall{method: http.MethodPost, path: "/api/replays", body: map[string]any{"types": []string{"order.*"}, "from": "table"}}, http.StatusAccepted)
		var again apiReplay
		decode(t, body, &again)
		if again = api.waitReplay(t, again.ID); again.State != "done" || again.Requeued+again.Inserted != 0 || !strings.HasPrefix(again.Name, "replay-") {
			t.Fatalf("a replay of pending events: %+v, want nothing sent", again)
		}

		// To one endpoint, by name: the invoice (its type), as a delivery.
		_, body = api.call(t, apiCall{method: http.MethodPost, path: "/api/replays", body: map[string]any{"endpoint": "billing", "from": "table"}}, http.StatusAccepted)
		var backfill apiReplay
		decode(t, body, &backfill)
		if backfill = api.waitReplay(t, backfill.ID); backfill.State != "done" || backfill.Matched != 1 || backfill.Endpoint != billing.ID {
			t.Fatalf("the backfill of billing: %+v, want the invoice alone", backfill)
		}
		if got := deliveryStatus(t, s, billing, invoice.ID); got != store.StatusPending {
			t.Fatalf("billing's delivery of the invoice: %q, want pending", got)
		}
		if got := status(t, s, invoice.ID); got != store.StatusDone {
			t.Fatalf("the backfill requeued the outbox's invoice event: %s", got)
		}

		var list struct{ Replays []apiReplay }
		_, body = api.call(t, apiCall{method: http.MethodGet, path: "/api/replays"}, http.StatusOK)
		if decode(t, body, &list); len(list.Replays) != 3 || list.Replays[0].ID != backfill.ID || list.Replays[2].ID != started.ID {
			t.Fatalf("the list: %+v, want the 3 replays, newest first", list)
		}
		// Cancelling a replay that ended answers it as it is.
		_, body = api.call(t, apiCall{method: http.MethodPost, path: "/api/replays/" + started.ID.String() + "/cancel"}, http.StatusOK)
		var after apiReplay
		if decode(t, body, &after); after.State != "done" {
			t.Fatalf("cancel of a replay that ended: %+v", after)
		}
		for _, op := range apiOperations(t) {
			if strings.Contains(op, "/api/replays") && !api.covered[op] {
				t.Errorf("openapi.json's %s was not exercised", op)
			}
		}
		if !strings.Contains(api.log.String(), "console: replay done") || !strings.Contains(api.log.String(), "console: API: replay started") {
			t.Errorf("the console's log does not say the replays started and ended:\n%s", api.log)
		}
	})
}

// One replay at a time: while one runs (its batch held up by a row lock
// the test holds), another is refused (409, naming it); a cancel stops it
// after its batch in flight (canceled, with where to resume), and the
// next replay starts.
func TestAPIReplayOneAtATimeAndCancel(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	events := []postbox.Event{orderEvent(1), orderEvent(2)}
	deliverKept(t, s, events...)
	api := newAPI(t, console.Config{Store: s, Token: testToken, Replay: replayConfig(t, s, nil)})

	lock := holdRow(t, s, events[1].ID)
	_, body := api.call(t, apiCall{method: http.MethodPost, path: "/api/replays", body: map[string]any{}}, http.StatusAccepted)
	var held apiReplay
	decode(t, body, &held)
	waitUntil(t, 20*time.Second, "the replay's batch waiting for the row lock", func() bool {
		return lock.blocking(t)
	})
	p := api.wantProblem(t, apiCall{method: http.MethodPost, path: "/api/replays", body: map[string]any{}}, http.StatusConflict, "replay-running")
	if !strings.Contains(p.Detail, held.ID.String()) {
		t.Fatalf("the 409 does not name the replay running: %+v", p)
	}
	canceled := make(chan apiReplay, 1)
	go func() {
		_, body := api.call(t, apiCall{method: http.MethodPost, path: "/api/replays/" + held.ID.String() + "/cancel"}, http.StatusOK)
		var r apiReplay
		_ = json.Unmarshal(body, &r)
		canceled <- r
	}()
	waitUntil(t, 20*time.Second, "the cancel asked", func() bool {
		_, body := api.call(t, apiCall{method: http.MethodGet, path: "/api/replays/" + held.ID.String()}, http.StatusOK)
		var r apiReplay
		decode(t, body, &r)
		if r.State != "running" {
			t.Fatalf("the replay held up by the lock: %s", body)
		}
		return r.Canceling
	})
	lock.release(t)
	r := <-canceled
	if r.State != "canceled" || r.ResumeAfter != events[1].ID || r.Requeued != 2 {
		t.Fatalf("after the cancel: %+v, want canceled after its batch (both events), resuming after the last", r)
	}
	_, body = api.call(t, apiCall{method: http.MethodPost, path: "/api/replays", body: map[string]any{"after": r.ResumeAfter.String()}}, http.StatusAccepted)
	var next apiReplay
	decode(t, body, &next)
	if next = api.waitReplay(t, next.ID); next.State != "done" || next.Read != 0 {
		t.Fatalf("the replay resumed after the last event: %+v, want done, nothing left", next)
	}
	if !strings.Contains(api.log.String(), "resume_after="+events[1].ID.String()) {
		t.Errorf("the log does not say where to resume the canceled replay:\n%s", api.log)
	}
}

// The replay API refuses, as RFC 9457 problems: a field it cannot run
// (422 naming it), an unknown endpoint (404), a replay it does not know
// (404), a body of the wrong shape (400); a read-only console and one
// without the outbox's history refuse to start one (403), and a session
// without the CSRF token is refused (403).
func TestAPIReplayRefusals(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	api := newAPI(t, console.Config{Store: s, Token: testToken, Replay: replayConfig(t, s, nil)})
	post := func(body any) apiCall { return apiCall{method: http.MethodPost, path: "/api/replays", body: body} }
	for _, c := range []struct {
		body    map[string]any
		setting string
	}{
		{map[string]any{"since": "yesterday"}, "since"},
		{map[string]any{"since": "2026-12-02T10:00:00Z", "until": "2026-12-01T10:00:00Z"}, "until"},
		{map[string]any{"types": []string{"order.["}}, "types"},
		{map[string]any{"from": "archive"}, "from"},
		{map[string]any{"from": "tape"}, "from"},
		{map[string]any{"endpoint": "all"}, "endpoint"},
		{map[string]any{"after": "not-a-uuid"}, "after"},
		{map[string]any{"name": "two\nlines"}, "name"},
		{map[string]any{"name": strings.Repeat("n", 101)}, "name"},
	} {
		if p := api.wantProblem(t, post(c.body), http.StatusUnprocessableEntity, "invalid-setting"); p.Setting != c.setting {
			t.Errorf("%v: refused setting %q, want %q (%s)", c.body, p.Setting, c.setting, p.Detail)
		}
	}
	api.wantProblem(t, post(map[string]any{"endpoint": "nowhere"}), http.StatusNotFound, "not-found")
	api.wantProblem(t, post(`{"types": "order.*"}`), http.StatusBadRequest, "bad-request")
	api.wantProblem(t, post(`{"dry_run": true, "extra": 1}`), http.StatusBadRequest, "bad-request")
	api.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/replays/" + uuid.NewString()}, http.StatusNotFound, "not-found")
	api.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/replays/not-an-id"}, http.StatusNotFound, "not-found")
	api.wantProblem(t, apiCall{method: http.MethodPost, path: "/api/replays/" + uuid.NewString() + "/cancel"}, http.StatusNotFound, "not-found")
	api.login(t)
	api.wantProblem(t, apiCall{method: http.MethodPost, path: "/api/replays", body: map[string]any{}, noBearer: true}, http.StatusForbidden, "csrf")

	readOnly := newAPI(t, console.Config{Store: s, Token: testToken, ReadOnly: true, Replay: replayConfig(t, s, nil)})
	readOnly.wantProblem(t, post(map[string]any{"dry_run": true}), http.StatusForbidden, "read-only")
	off := newAPI(t, console.Config{Store: s, Token: testToken})
	off.wantProblem(t, post(map[string]any{"dry_run": true}), http.StatusForbidden, "replay-off")
	if _, err := s.Get(ctxFor(t), uuid.New()); err == nil {
		t.Fatal("a replay wrote an event")
	}
}

// A canceled replay's page links to the form filled in to resume it: the
// same types and name, after the last event it handled (an empty form
// would replay everything).
func TestReplayPageResumeLink(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	events := []postbox.Event{orderEvent(1), orderEvent(2)}
	deliverKept(t, s, events...)
	c := serve(t, console.Config{Store: s, Replay: replayConfig(t, s, nil)})

	lock := holdRow(t, s, events[1].ID)
	csrf := c.csrf("/replay")
	res, body := c.post("/replay", url.Values{"csrf": {csrf}, "confirm": {"1"}, "types": {"order.*"}, "name": {"replay-resume-1"}})
	wantStatus(t, res, body, http.StatusSeeOther)
	m := replayPath.FindStringSubmatch(res.Header.Get("Location"))
	if m == nil {
		t.Fatalf("after the confirmation: redirected to %q, want the replay's page", res.Header.Get("Location"))
	}
	waitUntil(t, 20*time.Second, "the replay's batch waiting for the row lock", func() bool {
		return lock.blocking(t)
	})
	canceled := make(chan struct{})
	go func() {
		defer close(canceled)
		c.post(m[0]+"/cancel", url.Values{"csrf": {csrf}})
	}()
	waitUntil(t, 20*time.Second, "the cancel asked", func() bool {
		_, body := c.get(m[0])
		return strings.Contains(body, `id="replay-state">stopping<`)
	})
	lock.release(t)
	<-canceled
	waitUntil(t, 20*time.Second, "the replay stopped", func() bool {
		_, body := c.get(m[0])
		return strings.Contains(body, `id="replay-stopped"`)
	})
	_, body = c.get(m[0])
	link := regexp.MustCompile(`<a href="([^"]*)" id="resume">`).FindStringSubmatch(body)
	if link == nil {
		t.Fatalf("the canceled replay's page has no resume link:\n%s", body)
	}
	href := strings.ReplaceAll(link[1], "&amp;", "&")
	u, err := url.Parse(href)
	if err != nil || u.Path != "/replay" {
		t.Fatalf("resume link %q: %v", href, err)
	}
	want := url.Values{"types": {"order.*"}, "name": {"replay-resume-1"}, "after": {events[1].ID.String()}, "from": {"table"}}
	for field, v := range want {
		if got := u.Query().Get(field); got != v[0] {
			t.Errorf("resume link %q: %s = %q, want %q", href, field, got, v[0])
		}
	}
	_, form := c.get(href)
	for _, v := range []string{`value="order.*"`, `value="replay-resume-1"`, `value="` + events[1].ID.String() + `"`} {
		if !strings.Contains(form, v) {
			t.Errorf("the form the resume link opens lacks %s", v)
		}
	}
}

// A window ending later than the replay's start ends at the start, as
// one left open: events written while it runs are having their first
// delivery, and a resume reads the same window.
func TestAPIReplayCapsAFutureUntil(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	deliverKept(t, s, orderEvent(1))
	api := newAPI(t, console.Config{Store: s, Token: testToken, Replay: replayConfig(t, s, nil)})
	before := time.Now()
	future := before.Add(time.Hour).UTC().Format(time.RFC3339)
	_, body := api.call(t, apiCall{method: http.MethodPost, path: "/api/replays", body: map[string]any{"until": future}}, http.StatusAccepted)
	var r struct {
		ID    uuid.UUID  `json:"id"`
		Until *time.Time `json:"until"`
	}
	decode(t, body, &r)
	if r.Until == nil || r.Until.Before(before) || r.Until.After(time.Now()) {
		t.Fatalf("a replay until %s: its window ends at %v, want when it began", future, r.Until)
	}
	if got := api.waitReplay(t, r.ID); got.State != "done" || got.Requeued != 1 {
		t.Fatalf("the replay: %+v, want done, 1 event", got)
	}
}

// rowLock is a row of the outbox locked by a transaction of the test's,
// which holds up a replay's batch that reaches it.
type rowLock struct {
	s      *postgres.Store
	tx     pgx.Tx
	holder int // the backend's pid
}

// holdRow locks the outbox row of id until release (or the test's end).
func holdRow(t *testing.T, s *postgres.Store, id uuid.UUID) *rowLock {
	t.Helper()
	tx, err := s.Pool().Begin(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctxFor(t), "select id from "+s.Table("outbox_events")+" where id = $1 for update", id); err != nil {
		t.Fatal(err)
	}
	l := &rowLock{s: s, tx: tx}
	must(t, tx.QueryRow(ctxFor(t), "select pg_backend_pid()").Scan(&l.holder))
	return l
}

// blocking reports whether a statement waits for the lock.
func (l *rowLock) blocking(t *testing.T) bool {
	var waiting int
	must(t, l.s.Pool().QueryRow(ctxFor(t), "select count(*) from pg_stat_activity where $1::int = any(pg_blocking_pids(pid))", l.holder).Scan(&waiting))
	return waiting > 0
}

// release ends the lock's transaction.
func (l *rowLock) release(t *testing.T) {
	t.Helper()
	must(t, l.tx.Rollback(ctxFor(t)))
}
