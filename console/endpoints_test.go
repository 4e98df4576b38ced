package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/store"
)

// newEndpoint registers a webhook endpoint named name, in state state.
func newEndpoint(t *testing.T, s console.Store, name, state string) store.Endpoint {
	t.Helper()
	es := driverOf(t, s)
	e, err := es.EndpointCreate(ctxFor(t), store.Endpoint{Name: name, URL: "https://" + name + ".example/hook",
		Secret: "whsec_" + name + "-secret-not-shown", Concurrency: 1, State: store.EndpointEnabled})
	if err != nil {
		t.Fatal(err)
	}
	if state != store.EndpointEnabled {
		if err := es.EndpointSetState(ctxFor(t), e.ID, state); err != nil {
			t.Fatal(err)
		}
		e.State = state
	}
	return e
}

// routeEvents writes a pending delivery of each event to e.
func routeEvents(t *testing.T, s console.Store, e store.Endpoint, events ...postbox.Event) {
	t.Helper()
	routes := make([]store.Route, len(events))
	for i, ev := range events {
		routes[i] = store.Route{Event: ev, Endpoints: []uuid.UUID{e.ID}}
	}
	if n, err := driverOf(t, s).DeliveryInsert(ctxFor(t), routes); err != nil || n != len(events) {
		t.Fatalf("DeliveryInsert: %d, %v; want %d", n, err, len(events))
	}
}

// laneOf is e's lane. A store without lanes yet (EndpointLane nil: the
// SQLite store while package endpoint's lanes are being built) skips the
// test, saying so.
func laneOf(t *testing.T, s console.Store, e store.Endpoint) store.Source {
	t.Helper()
	lane := driverOf(t, s).EndpointLane(e)
	if lane == nil {
		t.Skipf("%s has no endpoint lane (EndpointLane returns nil)", s)
	}
	return lane
}

// failDeliveries writes a delivery of each event to e and dead-letters
// them through e's lane, each with its error, as the endpoint's relay
// does.
func failDeliveries(t *testing.T, s console.Store, e store.Endpoint, events []postbox.Event, errs []string) {
	t.Helper()
	lane := laneOf(t, s, e)
	routeEvents(t, s, e, events...)
	ctx := ctxFor(t)
	got, err := lane.Claim(ctx, store.ClaimParams{Owner: "lane-test", Limit: len(events), Lease: time.Minute})
	if err != nil || len(got) != len(events) {
		t.Fatalf("lane claim: %d, %v", len(got), err)
	}
	failures := make([]store.Failure, len(events))
	for i, ev := range events {
		failures[i] = store.Failure{ID: ev.ID, LastError: errs[i]}
	}
	if err := lane.Settle(ctx, store.SettleParams{Owner: "lane-test", Failed: failures}); err != nil {
		t.Fatal(err)
	}
}

// deliveryStatus is the status of e's delivery of event id ("" when none).
func deliveryStatus(t *testing.T, s console.Store, e store.Endpoint, id uuid.UUID) string {
	t.Helper()
	all, err := driverOf(t, s).DeliveryList(ctxFor(t), e.ID, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range all {
		if d.ID == id {
			return d.Status
		}
	}
	return ""
}

// The overview sums the endpoints' deliveries beside the outbox's counts
// and shows each endpoint's; without endpoints it shows neither.
func TestOverviewShowsEndpointDeliveries(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		c := serve(t, console.Config{Store: s})
		if _, body := c.get("/"); strings.Contains(body, `id="endpoint-deliveries"`) {
			t.Fatal("the overview shows endpoints' deliveries with no endpoint")
		}
		billing := newEndpoint(t, s, "billing", store.EndpointEnabled)
		crm := newEndpoint(t, s, "crm", store.EndpointDisabled)
		failDeliveries(t, s, billing, []postbox.Event{orderEvent(1), orderEvent(2)}, []string{"status 503", "status 410"})
		// One more claimed (processing), one pending, at billing; two
		// pending at crm.
		routeEvents(t, s, billing, orderEvent(3))
		if got, err := laneOf(t, s, billing).Claim(ctxFor(t), store.ClaimParams{Owner: "lane-test", Limit: 1, Lease: time.Minute}); err != nil || len(got) != 1 {
			t.Fatalf("lane claim: %d, %v", len(got), err)
		}
		routeEvents(t, s, billing, orderEvent(4))
		routeEvents(t, s, crm, orderEvent(5), orderEvent(6))

		res, body := c.get("/")
		wantStatus(t, res, body, http.StatusOK)
		for _, want := range []string{
			`id="endpoints-pending">3<`, `id="endpoints-processing">1<`, `id="endpoints-failed">2<`,
			`href="/failed?endpoint=all"`, `href="/failed?endpoint=` + billing.ID.String() + `">2</a>`,
			`<td><a href="/endpoints/` + billing.ID.String() + `" class="endpoint-name">billing</a></td>`,
			`<td><a href="/endpoints/` + crm.ID.String() + `" class="endpoint-name">crm</a></td>`, `>disabled</span>`, `>enabled</span>`,
			// The outbox's own counts stay apart.
			`id="count-failed">0<`, `id="count-pending">0<`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("overview lacks %q", want)
			}
		}
		rows := regexp.MustCompile(`(?s)<tr data-endpoint="([0-9a-f-]+)">.*?</tr>`).FindAllStringSubmatch(body, -1)
		if len(rows) != 2 || rows[0][1] != billing.ID.String() || rows[1][1] != crm.ID.String() {
			t.Fatalf("endpoint rows %q: want billing then crm", rows)
		}
		cells := regexp.MustCompile(`<td class="num">(?:<a [^>]*>)?(\d+)`)
		for i, want := range [][]string{{"1", "2"}, {"2", "0"}} { // pending, failed
			got := cells.FindAllStringSubmatch(rows[i][0], -1)
			if len(got) != 2 || got[0][1] != want[0] || got[1][1] != want[1] {
				t.Errorf("endpoint row %d: pending and failed %q, want %q", i, got, want)
			}
			if strings.Contains(rows[i][0], "<td>–</td>") {
				t.Errorf("endpoint row %d shows no oldest pending age, with deliveries pending", i)
			}
		}
		if strings.Contains(body, "secret-not-shown") || strings.Contains(body, ".example/hook") {
			t.Fatal("the overview shows an endpoint's secret or URL")
		}
	})
}

// failedRows are the data-id of the failed page's rows, and their
// checkboxes' values.
func failedRows(body string) (ids, keys []string) {
	for _, m := range regexp.MustCompile(`<tr data-id="([0-9a-f-]+)"`).FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	for _, m := range regexp.MustCompile(`name="id" value="([0-9a-f/-]+)"`).FindAllStringSubmatch(body, -1) {
		keys = append(keys, m[1])
	}
	return ids, keys
}

// The failed page reads the outbox, one endpoint or every endpoint, as
// its selector says; endpoint rows name their endpoint; retry and purge
// move that selection only, after the same confirmation counts, with the
// CSRF token, never in read-only mode.
func TestFailedPageShowsEndpointDeadLetters(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		outboxIDs := failEvents(t, s, []postbox.Event{orderEvent(1)}, []string{"status 500 from the outbox's sink"})
		billing := newEndpoint(t, s, "billing", store.EndpointEnabled)
		crm := newEndpoint(t, s, "crm", store.EndpointEnabled)
		shared, second := orderEvent(2), orderEvent(3)
		failDeliveries(t, s, billing, []postbox.Event{shared, second}, []string{"status 503 from billing", "status 410 from billing"})
		failDeliveries(t, s, crm, []postbox.Event{shared}, []string{"status 503 from crm"})
		c := serve(t, console.Config{Store: s})

		res, body := c.get("/failed")
		wantStatus(t, res, body, http.StatusOK)
		if ids, _ := failedRows(body); len(ids) != 1 || ids[0] != outboxIDs[0].String() {
			t.Fatalf("outbox view: rows %q, want the outbox's failed event only", ids)
		}
		for _, want := range []string{`id="endpoint-select"`, `<option value="" selected>the outbox</option>`,
			`<option value="all">every endpoint</option>`, `<option value="` + crm.ID.String() + `">endpoint crm</option>`} {
			if !strings.Contains(body, want) {
				t.Errorf("outbox view lacks %q", want)
			}
		}

		res, body = c.get("/failed?endpoint=" + billing.ID.String())
		wantStatus(t, res, body, http.StatusOK)
		ids, keys := failedRows(body)
		if len(ids) != 2 || strings.Count(body, `<td><a href="/endpoints/`+billing.ID.String()+`" class="endpoint-name">billing</a></td>`) != 2 || strings.Contains(body, "from crm") {
			t.Fatalf("billing view: rows %q, want billing's 2 deliveries, each named billing", ids)
		}
		if keys[0] != ids[0] || !strings.Contains(body, `<h1>Failed deliveries</h1>`) {
			t.Fatalf("billing view: checkbox values %q, want the event ids", keys)
		}

		res, body = c.get("/failed?endpoint=all")
		wantStatus(t, res, body, http.StatusOK)
		ids, keys = failedRows(body)
		if len(ids) != 3 || strings.Count(body, `endpoint-name">billing<`) != 2 || strings.Count(body, `endpoint-name">crm<`) != 1 {
			t.Fatalf("every endpoint view: rows %q, want 3, named billing twice and crm once", ids)
		}
		crmKey := crm.ID.String() + "/" + shared.ID.String()
		if !strings.Contains(strings.Join(keys, " "), crmKey) {
			t.Fatalf("every endpoint view: checkbox values %q lack %q (endpoint/event)", keys, crmKey)
		}
		if _, body := c.get("/failed?endpoint=all&error=" + url.QueryEscape("503")); strings.Count(body, `<tr data-id=`) != 2 {
			t.Fatal("every endpoint view filtered by error 503: want 2 rows")
		}
		for _, bad := range []string{"nonsense", uuid.NewString(), uuid.Nil.String()} {
			res, body := c.get("/failed?endpoint=" + url.QueryEscape(bad))
			wantStatus(t, res, body, http.StatusBadRequest)
			if !strings.Contains(body, `id="bad-input"`) {
				t.Fatalf("endpoint %q: no error shown", bad)
			}
		}

		csrf := c.csrf("/failed")
		for _, tc := range []struct {
			form url.Values
			want string
		}{
			{url.Values{"action": {"retry"}, "all": {"1"}, "endpoint": {"all"}}, "Retry 3 failed deliveries?"},
			{url.Values{"action": {"purge"}, "all": {"1"}, "endpoint": {billing.ID.String()}}, "Purge 2 failed deliveries?"},
			{url.Values{"action": {"retry"}, "all": {"1"}, "endpoint": {"all"}, "error": {"503"}}, "Retry 2 failed deliveries?"},
			{url.Values{"action": {"retry"}, "all": {"1"}}, "Retry 1 failed event?"},
			{url.Values{"action": {"retry"}, "endpoint": {"all"}, "id": {crmKey, crmKey}}, "Retry 1 failed delivery?"},
		} {
			tc.form.Set("csrf", csrf)
			res, body := c.post("/failed/action", tc.form)
			wantStatus(t, res, body, http.StatusOK)
			if m := confirmTitle.FindStringSubmatch(body); m == nil || m[1] != tc.want {
				t.Fatalf("confirmation of %v: title %q, want %q", tc.form, m, tc.want)
			}
		}
		res, body = c.post("/failed/action", url.Values{"action": {"purge"}, "all": {"1"}, "endpoint": {billing.ID.String()}, "csrf": {csrf}})
		wantStatus(t, res, body, http.StatusOK)
		if !strings.Contains(body, `every failed delivery to the endpoint &#34;billing&#34;`) {
			t.Fatalf("the confirmation of billing's purge does not name billing:\n%s", body)
		}

		// Without the CSRF token, nothing moves.
		res, body = c.post("/failed/action", url.Values{"action": {"purge"}, "all": {"1"}, "endpoint": {"all"}, "confirm": {"1"}})
		wantStatus(t, res, body, http.StatusForbidden)
		// Retry crm's delivery of the shared event, ticked in the view of
		// every endpoint: billing's delivery of it stays failed.
		res, body = c.post("/failed/action", url.Values{"action": {"retry"}, "endpoint": {"all"}, "id": {crmKey}, "csrf": {csrf}, "confirm": {"1"}})
		wantStatus(t, res, body, http.StatusSeeOther)
		if got := deliveryStatus(t, s, crm, shared.ID); got != store.StatusPending {
			t.Fatalf("crm's retried delivery: %q, want pending", got)
		}
		if got := deliveryStatus(t, s, billing, shared.ID); got != store.StatusFailed {
			t.Fatalf("billing's delivery of the same event: %q, want still failed", got)
		}
		if _, body := c.get(res.Header.Get("Location")); !strings.Contains(body, "Sent 1 failed delivery back to the queue.") ||
			!strings.Contains(body, `<option value="all" selected>`) {
			t.Fatal("after the retry: no notice, or the page left the view of every endpoint")
		}
		// Purge billing's deliveries whose error says 410.
		res, body = c.post("/failed/action", url.Values{"action": {"purge"}, "all": {"1"}, "endpoint": {billing.ID.String()}, "error": {"410"}, "csrf": {csrf}, "confirm": {"1"}})
		wantStatus(t, res, body, http.StatusSeeOther)
		if got := deliveryStatus(t, s, billing, second.ID); got != "" {
			t.Fatalf("billing's purged delivery: %q, want gone", got)
		}
		if got := deliveryStatus(t, s, billing, shared.ID); got != store.StatusFailed {
			t.Fatalf("billing's delivery outside the filter: %q, want failed", got)
		}
		if got := status(t, s, outboxIDs[0]); got != store.StatusFailed {
			t.Fatalf("the outbox's failed event after endpoints' actions: %q", got)
		}

		// Read-only, with a token: the logout form carries a valid CSRF
		// token, so the refusal below is the read-only one.
		const token = "a-token-of-enough-length"
		ro := serve(t, console.Config{Store: s, ReadOnly: true, Token: token})
		res, body = ro.post("/login", url.Values{"token": {token}, "csrf": {ro.csrf("/login")}})
		wantStatus(t, res, body, http.StatusSeeOther)
		res, body = ro.get("/failed?endpoint=all")
		wantStatus(t, res, body, http.StatusOK)
		if strings.Contains(body, `action="/failed/action"`) || strings.Contains(body, `name="id"`) {
			t.Fatal("read-only view of every endpoint shows an action")
		}
		res, body = ro.post("/failed/action", url.Values{"action": {"retry"}, "all": {"1"}, "endpoint": {"all"}, "csrf": {ro.csrf("/failed")}, "confirm": {"1"}})
		wantStatus(t, res, body, http.StatusForbidden)
		if !strings.Contains(body, "read-only") {
			t.Fatalf("refusal does not say read-only: %s", body)
		}
		if got := deliveryStatus(t, s, billing, shared.ID); got != store.StatusFailed {
			t.Fatalf("read-only retry moved billing's delivery: %q", got)
		}
	})
}
