package console_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/nats"
	"github.com/postbox-go/postbox/store"
)

// noDNS is a resolver that resolves nothing: the tests' endpoints are on
// 127.0.0.1, and a host name does not resolve, wherever they run.
var noDNS = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("no name server in this test")
}}

// newAdmin is the endpoints' admin of s, with a fresh secrets key unless
// keyless; its endpoints may reach private addresses (the tests'
// receivers are on 127.0.0.1).
func newAdmin(t *testing.T, s console.Store, keyless bool) *admin.Admin {
	t.Helper()
	cfg := admin.Config{Store: driverOf(t, s), Resolver: noDNS, PrivateEndpoints: true}
	if !keyless {
		k, err := keyring.Parse(keyring.GenerateKey())
		if err != nil {
			t.Fatal(err)
		}
		cfg.Keyring = k
	}
	a, err := admin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// endpointForm is the add form's fields for a webhook endpoint at url,
// on a private address (the tests' receivers listen on 127.0.0.1).
func endpointForm(csrf, name, target string) url.Values {
	return url.Values{"csrf": {csrf}, "name": {name}, "url": {target}, "types": {"order.*"}, "concurrency": {"2"}, "allow_private": {"1"}}
}

// holds reports whether a page holds text, as it is or escaped.
func holds(page, text string) bool {
	return strings.Contains(page, text) || strings.Contains(html.UnescapeString(page), text)
}

var (
	secretShown      = regexp.MustCompile(`<code class="secret-value" id="secret">([^<]+)</code>`)
	fingerprintShown = regexp.MustCompile(`id="fingerprint">([^<]+)<`)
)

// addEndpoint adds an endpoint through the add form and returns its id
// and the page that answered.
func addEndpoint(t *testing.T, c *client, form url.Values) (uuid.UUID, string) {
	t.Helper()
	res, body := c.post("/endpoints/new", form)
	wantStatus(t, res, body, http.StatusOK)
	m := regexp.MustCompile(`href="/endpoints/([0-9a-f-]+)" id="endpoint-link"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the add form's answer names no endpoint:\n%s", body)
	}
	return uuid.MustParse(m[1]), body
}

// The add form adds the endpoint and shows its generated secret once: the
// secret signs what the endpoint receives, and no later page, nor the
// log, holds it.
func TestEndpointAddShowsTheSecretOnce(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		var log logbuf.Buffer
		a := newAdmin(t, s, false)
		c := serve(t, console.Config{Store: s, Endpoints: a, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		res, body := c.get("/endpoints")
		wantStatus(t, res, body, http.StatusOK)
		if !strings.Contains(body, `href="/endpoints/new" id="new-endpoint"`) || !strings.Contains(body, `id="no-endpoints"`) {
			t.Fatalf("the empty list offers no new endpoint:\n%s", body)
		}
		if !strings.Contains(body, `<a href="/endpoints" aria-current="page">Endpoints</a>`) {
			t.Fatal("the navigation does not mark Endpoints")
		}

		// The receiver is reached through a door opened once the secret is
		// known, so that it verifies with the secret the page showed.
		var door atomic.Pointer[http.Handler]
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h := door.Load(); h != nil {
				(*h).ServeHTTP(w, r)
				return
			}
			http.NotFound(w, r)
		}))
		t.Cleanup(srv.Close)
		id, body := addEndpoint(t, c, endpointForm(c.csrf("/endpoints/new"), "warehouse", srv.URL+"/hook"))
		m := secretShown.FindStringSubmatch(body)
		if m == nil || !strings.HasPrefix(m[1], "whsec_") || !strings.Contains(body, "shown this once and never again") {
			t.Fatalf("the added endpoint's page shows no generated secret, or no warning:\n%s", body)
		}
		secret := html.UnescapeString(m[1])
		if fp := fingerprintShown.FindStringSubmatch(body); fp == nil || fp[1] != endpoint.Fingerprint(secret) {
			t.Fatalf("fingerprint shown %q, want the secret's %s", fp, endpoint.Fingerprint(secret))
		}
		rcv := receiver.New(t, secret, nil)
		door.Store(&rcv.Server.Config.Handler)
		res, body = c.post("/endpoints/"+id.String()+"/test", url.Values{"csrf": {c.csrf("/endpoints/" + id.String())}})
		wantStatus(t, res, body, http.StatusOK)
		if !regexp.MustCompile(`id="test-result">Test event <span class="mono">[0-9a-f-]+</span> delivered in (\d+ ms|\d+\.\d s)\.`).MatchString(body) {
			t.Fatalf("the test event's result:\n%s", body)
		}
		if got := rcv.Accepted(); len(got) != 1 || got[0].EventType != "postbox.test" {
			t.Fatalf("the receiver accepted %v, want one postbox.test signed with the secret shown", got)
		}

		e, err := s.EndpointGet(ctxFor(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Name != "warehouse" || fmt.Sprint(e.Types) != "[order.*]" || e.Concurrency != 2 || !e.AllowPrivate || e.State != store.EndpointEnabled {
			t.Fatalf("stored endpoint %+v: not what the form said", e)
		}
		for _, path := range []string{"/endpoints", "/endpoints/" + id.String(), "/endpoints/" + id.String() + "/edit", "/", "/failed?endpoint=all"} {
			res, body := c.get(path)
			wantStatus(t, res, body, http.StatusOK)
			if holds(body, secret) || strings.Contains(body, `id="secret"`) {
				t.Fatalf("%s shows the secret again", path)
			}
		}
		if _, body := c.get("/endpoints/" + id.String()); !strings.Contains(body, endpoint.Fingerprint(secret)) {
			t.Fatal("the endpoint's page does not name its secret by its fingerprint")
		}
		if strings.Contains(log.String(), secret) || !strings.Contains(log.String(), "endpoint added") {
			t.Fatalf("the log holds the secret, or says nothing of the add:\n%s", log.String())
		}

		// A secret given is not shown back.
		form := endpointForm(c.csrf("/endpoints/new"), "crm", srv.URL+"/crm")
		form.Set("secret", webhookSecret)
		_, body = addEndpoint(t, c, form)
		if holds(body, webhookSecret) || strings.Contains(body, `id="secret"`) {
			t.Fatal("the answer to an add with a secret given shows it")
		}
		if !strings.Contains(body, endpoint.Fingerprint(webhookSecret)) {
			t.Fatal("the answer to an add with a secret given does not name it by its fingerprint")
		}
		// What is accepted with a warning is added, and the warning shown.
		_, body = addEndpoint(t, c, endpointForm(c.csrf("/endpoints/new"), "far", "https://nowhere.invalid/hook"))
		if !strings.Contains(body, `<p class="warning">url: host nowhere.invalid does not resolve now`) || !secretShown.MatchString(body) {
			t.Fatalf("an endpoint whose host does not resolve: no warning, or no secret:\n%s", body)
		}
	})
}

var (
	formLabel  = regexp.MustCompile(`(?s)<label[^>]*>(.*?)</label>`)
	fieldName  = regexp.MustCompile(`name="([a-z_]+)"`)
	fieldError = regexp.MustCompile(`<span class="field-error" role="alert">([^<]*)</span>`)
)

// fieldErrors are the refusals shown beside the form's fields, by field:
// in the label of the field.
func fieldErrors(body string) map[string]string {
	out := map[string]string{}
	for _, label := range formLabel.FindAllStringSubmatch(body, -1) {
		name, refusal := fieldName.FindStringSubmatch(label[1]), fieldError.FindStringSubmatch(label[1])
		if name != nil && refusal != nil {
			out[name[1]] = refusal[1]
		}
	}
	return out
}

// Refused settings show beside their fields, the form keeps what was
// typed but the secrets, and nothing is added.
func TestEndpointFormRefusalsShowBesideTheField(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		c := serve(t, console.Config{Store: s, Endpoints: newAdmin(t, s, false)})
		csrf := c.csrf("/endpoints/new")
		for _, tc := range []struct {
			name  string
			set   url.Values
			field string
		}{
			{"rate not a number", url.Values{"rate_per_second": {"fast"}}, "rate_per_second"},
			{"concurrency not a number", url.Values{"concurrency": {"many"}}, "concurrency"},
			{"filter", url.Values{"filter": {"payload.total >"}}, "filter"},
			{"url", url.Values{"url": {"ftp://files.example/drop"}}, "url"},
			{"header line", url.Values{"headers": {"X-Api-Key"}}, "headers"},
			{"envelope", url.Values{"envelope": {"soap"}}, "envelope"},
		} {
			form := endpointForm(csrf, "refused-"+tc.field, "http://127.0.0.1:9/hook")
			form.Set("secret", webhookSecret)
			form.Set("bearer", "bearer-token-not-shown")
			for k, v := range tc.set {
				form[k] = v
			}
			res, body := c.post("/endpoints/new", form)
			wantStatus(t, res, body, http.StatusUnprocessableEntity)
			errs := fieldErrors(body)
			if errs[tc.field] == "" || len(errs) != 1 {
				t.Fatalf("%s: refusals %q, want one beside %s:\n%s", tc.name, errs, tc.field, body)
			}
			if !strings.Contains(body, `name="name" value="refused-`+tc.field+`"`) || !strings.Contains(body, `id="secrets-cleared"`) {
				t.Fatalf("%s: the form lost the name typed, or does not say the secrets must be given again", tc.name)
			}
			for _, secret := range []string{webhookSecret, "bearer-token-not-shown"} {
				if holds(body, secret) {
					t.Fatalf("%s: the refused form shows a secret", tc.name)
				}
			}
		}
		if eps, err := s.EndpointList(ctxFor(t)); err != nil || len(eps) != 0 {
			t.Fatalf("refused adds wrote %d endpoints (%v)", len(eps), err)
		}
	})
}

// The edit form shows the settings, changes them, and shows a refusal
// beside its field with the form as typed.
func TestEndpointEdit(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		c := serve(t, console.Config{Store: s, Endpoints: newAdmin(t, s, false)})
		id, _ := addEndpoint(t, c, endpointForm(c.csrf("/endpoints/new"), "warehouse", "http://127.0.0.1:9/hook"))
		edit := "/endpoints/" + id.String() + "/edit"
		res, body := c.get(edit)
		wantStatus(t, res, body, http.StatusOK)
		for _, want := range []string{`name="name" value="warehouse"`, `name="types" value="order.*"`, `name="concurrency" value="2"`} {
			if !strings.Contains(body, want) {
				t.Fatalf("the edit form lacks %q:\n%s", want, body)
			}
		}
		csrf := c.csrf(edit)
		form := url.Values{"csrf": {csrf}, "name": {"warehouse-eu"}, "types": {"order.paid, invoice.*"},
			"filter": {`payload.total > 100`}, "rate_per_second": {"2.5"}, "concurrency": {"4"}, "shadow": {"1"}}
		res, body = c.post(edit, form)
		wantStatus(t, res, body, http.StatusSeeOther)
		if loc := res.Header.Get("Location"); loc != "/endpoints/"+id.String()+"?done=save" {
			t.Fatalf("after the edit: to %q", loc)
		}
		e, err := s.EndpointGet(ctxFor(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Name != "warehouse-eu" || fmt.Sprint(e.Types) != "[order.paid invoice.*]" || e.Filter != "payload.total > 100" ||
			e.RatePerSecond != 2.5 || e.Concurrency != 4 || !e.Shadow {
			t.Fatalf("edited endpoint %+v: not what the form said", e)
		}
		_, body = c.get(res.Header.Get("Location"))
		for _, want := range []string{`id="notice">Settings saved.`, `id="endpoint-filter">payload.total &gt; 100<`, `id="endpoint-rate">2.5 deliveries a second<`, `id="endpoint-shadow"`} {
			if !strings.Contains(body, want) {
				t.Fatalf("the endpoint's page after the edit lacks %q", want)
			}
		}

		form.Set("filter", "payload.total >")
		form.Set("name", "typed-again")
		res, body = c.post(edit, form)
		wantStatus(t, res, body, http.StatusUnprocessableEntity)
		if errs := fieldErrors(body); errs["filter"] == "" || len(errs) != 1 {
			t.Fatalf("a bad filter: refusals %q, want one beside the filter:\n%s", errs, body)
		}
		if !strings.Contains(body, `name="name" value="typed-again"`) || !strings.Contains(body, `>payload.total &gt;</textarea>`) {
			t.Fatal("the refused edit form lost what was typed")
		}
		if e, _ := s.EndpointGet(ctxFor(t), id); e.Name != "warehouse-eu" {
			t.Fatalf("a refused edit changed the name to %q", e.Name)
		}
	})
}

// Disable, enable, rotate, a failed test, remove: each from the
// endpoint's page, each as the store then says.
func TestEndpointStateRotateTestAndRemove(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		var log logbuf.Buffer
		c := serve(t, console.Config{Store: s, Endpoints: newAdmin(t, s, false), Logger: slog.New(slog.NewTextHandler(&log, nil))})
		closed := httptest.NewServer(http.NotFoundHandler())
		closed.Close() // nothing listens there any more
		id, _ := addEndpoint(t, c, endpointForm(c.csrf("/endpoints/new"), "warehouse", closed.URL+"/hook"))
		page := "/endpoints/" + id.String()
		stateOf := func() string {
			e, err := s.EndpointGet(ctxFor(t), id)
			if err != nil {
				t.Fatal(err)
			}
			return e.State
		}
		csrf := c.csrf(page)
		res, body := c.post(page+"/disable", url.Values{"csrf": {csrf}})
		wantStatus(t, res, body, http.StatusSeeOther)
		if stateOf() != store.EndpointDisabled {
			t.Fatal("disable: the endpoint is still enabled")
		}
		_, body = c.get(res.Header.Get("Location"))
		if !strings.Contains(body, `id="endpoint-state">disabled<`) || !strings.Contains(body, `<button id="state-button">Enable</button>`) {
			t.Fatal("the disabled endpoint's page does not say so, or offers no enable")
		}
		res, body = c.post(page+"/enable", url.Values{"csrf": {csrf}, "return": {"list"}})
		wantStatus(t, res, body, http.StatusSeeOther)
		if stateOf() != store.EndpointEnabled || res.Header.Get("Location") != "/endpoints?done=enable" {
			t.Fatalf("enable from the list: state %s, to %q", stateOf(), res.Header.Get("Location"))
		}

		before, _ := s.EndpointGet(ctxFor(t), id)
		res, body = c.post(page+"/rotate", url.Values{"csrf": {csrf}, "grace": {"2h"}})
		wantStatus(t, res, body, http.StatusOK)
		m := secretShown.FindStringSubmatch(body)
		if m == nil || !strings.Contains(body, "Secret rotated") || !strings.Contains(body, `id="previous-until"`) {
			t.Fatalf("the rotation's answer shows no new secret, or not until when the old one signs:\n%s", body)
		}
		rotated := html.UnescapeString(m[1])
		after, _ := s.EndpointGet(ctxFor(t), id)
		if d := time.Until(after.PreviousSecretUntil); d < time.Hour || d > 2*time.Hour {
			t.Fatalf("the previous secret signs for %v more, want about the 2h grace", d)
		}
		if after.Sealed.Fingerprint == before.Sealed.Fingerprint || !strings.HasPrefix(after.Sealed.Fingerprint, endpoint.Fingerprint(rotated)) {
			t.Fatalf("fingerprints %q then %q: want the new secret's first", before.Sealed.Fingerprint, after.Sealed.Fingerprint)
		}
		if _, body := c.get(page); holds(body, rotated) {
			t.Fatal("the endpoint's page shows the rotated secret")
		}
		// A secret given is not shown back, only its fingerprint.
		res, body = c.post(page+"/rotate", url.Values{"csrf": {csrf}, "grace": {"0s"}, "secret": {webhookSecret}})
		wantStatus(t, res, body, http.StatusOK)
		if holds(body, webhookSecret) || strings.Contains(body, `id="secret"`) || !strings.Contains(body, `id="fingerprint">`+endpoint.Fingerprint(webhookSecret)+`<`) {
			t.Fatalf("the rotation to a secret given: shown back, or not named by its fingerprint:\n%s", body)
		}
		res, body = c.post(page+"/rotate", url.Values{"csrf": {csrf}, "grace": {"soon"}})
		wantStatus(t, res, body, http.StatusUnprocessableEntity)
		if !strings.Contains(body, `<span class="field-error" role="alert">Grace period: `) || !strings.Contains(body, `value="soon"`) {
			t.Fatalf("a bad grace period: no refusal beside the rotation's field:\n%s", body)
		}
		res, body = c.post(page+"/rotate", url.Values{"csrf": {csrf}, "grace": {"1e300d"}})
		wantStatus(t, res, body, http.StatusUnprocessableEntity)
		if !strings.Contains(body, `<span class="field-error" role="alert">Grace period: &#34;1e300d&#34;: want a duration of at most 100 years`) {
			t.Fatalf("a grace period past any bound: no refusal that gives the bound:\n%s", body)
		}

		res, body = c.post(page+"/test", url.Values{"csrf": {csrf}})
		wantStatus(t, res, body, http.StatusBadGateway)
		if !regexp.MustCompile(`id="test-result">Test event .*failed.*: [^<]+`).MatchString(body) {
			t.Fatalf("a test event to a closed port: no failure shown:\n%s", body)
		}

		res, body = c.post(page+"/remove", url.Values{"csrf": {csrf}})
		wantStatus(t, res, body, http.StatusOK)
		if !strings.Contains(body, `id="remove-title">Remove the endpoint “warehouse”?`) || stateOf() != store.EndpointEnabled {
			t.Fatal("remove without confirmation: want the question and nothing removed")
		}
		res, body = c.post(page+"/remove", url.Values{"csrf": {csrf}, "confirm": {"1"}})
		wantStatus(t, res, body, http.StatusSeeOther)
		if _, err := s.EndpointGet(ctxFor(t), id); err == nil {
			t.Fatal("the removed endpoint is still there")
		}
		if _, body := c.get(res.Header.Get("Location")); !strings.Contains(body, "Endpoint removed") {
			t.Fatal("no notice after the removal")
		}
		res, body = c.get(page)
		wantStatus(t, res, body, http.StatusNotFound)
		for _, want := range []string{"endpoint disabled", "endpoint enabled", "endpoint's secret rotated", "test event sent", "endpoint removed"} {
			if !strings.Contains(log.String(), "console: "+want) {
				t.Errorf("the log does not say %q", want)
			}
		}
	})
}

// The list and the endpoint's page show what the store holds: states,
// the URL described (without credentials, path or query), types and filter, counts, failing since,
// the breaker, the success rate of the last hour, the attempts and the
// dead letters.
func TestEndpointPagesShowTheStore(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		d := driverOf(t, s)
		ctx := ctxFor(t)
		billing := newEndpoint(t, s, "billing", store.EndpointEnabled)
		billing.URL, billing.Types, billing.Filter = "https://svc:hunter2-not-shown@billing.example/hook", []string{"order.*", "invoice.paid"}, `payload.total > 100`
		if _, err := d.EndpointUpdate(ctx, billing); err != nil {
			t.Fatal(err)
		}
		crm := newEndpoint(t, s, "crm", store.EndpointAutoDisabled)
		shadow := newEndpoint(t, s, "mirror", store.EndpointEnabled)
		shadow.Shadow = true
		if _, err := d.EndpointUpdate(ctx, shadow); err != nil {
			t.Fatal(err)
		}
		failing := time.Now().Add(-10 * time.Minute)
		if _, err := d.EndpointFailing(ctx, crm.ID, failing); err != nil {
			t.Fatal(err)
		}
		if err := d.EndpointBreaker(ctx, crm.ID, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		dead := orderEvent(1)
		failDeliveries(t, s, billing, []postbox.Event{dead}, []string{"status 503: billing busy"})
		routeEvents(t, s, billing, orderEvent(2), orderEvent(3))
		now := time.Now()
		attempts := []store.Attempt{
			{EndpointID: billing.ID, EventID: dead.ID, EventType: "order.paid", Attempt: 1, StatusCode: 503, Duration: 1500 * time.Millisecond,
				Response: `{"error": "busy"}`, Error: "status 503: billing busy", At: now.Add(-time.Minute)},
			{EndpointID: billing.ID, EventID: uuid.New(), EventType: "order.paid", Attempt: 1, StatusCode: 200, Duration: 42 * time.Millisecond, At: now.Add(-2 * time.Minute)},
			{EndpointID: billing.ID, EventID: uuid.New(), EventType: "order.paid", Attempt: 1, StatusCode: 200, Duration: 40 * time.Millisecond, At: now.Add(-3 * time.Minute)},
			{EndpointID: billing.ID, EventID: uuid.New(), EventType: "order.paid", Attempt: 1, StatusCode: 200, Duration: 40 * time.Millisecond, At: now.Add(-2 * time.Hour)},
			{EndpointID: crm.ID, EventID: uuid.New(), EventType: "order.paid", Attempt: 3, Error: "dial tcp 10.0.0.7:443: connection refused", At: now.Add(-time.Minute)},
		}
		if err := d.AttemptInsert(ctx, attempts); err != nil {
			t.Fatal(err)
		}
		c := serve(t, console.Config{Store: s, Endpoints: newAdmin(t, s, false)})

		res, body := c.get("/endpoints")
		wantStatus(t, res, body, http.StatusOK)
		rows := regexp.MustCompile(`(?s)<tr data-endpoint="([0-9a-f-]+)">(.*?)</tr>`).FindAllStringSubmatch(body, -1)
		if len(rows) != 3 || rows[0][1] != billing.ID.String() || rows[1][1] != crm.ID.String() || rows[2][1] != shadow.ID.String() {
			t.Fatalf("list rows %q: want billing, crm, mirror", rows)
		}
		for i, wants := range [][]string{
			{`href="/endpoints/` + billing.ID.String() + `">billing</a>`, `>enabled</span>`, `<td class="mono url">webhook https://billing.example/…</td>`,
				`order.*, invoice.paid`, `<code class="filter">payload.total &gt; 100</code>`, `<td class="num pending">2</td>`,
				`href="/failed?endpoint=` + billing.ID.String() + `">1</a>`, `66.6% of 3 attempts`, `<td class="breaker">closed</td>`},
			{`>auto-disabled</span>`, `every type`, `<td class="rate bad-text">0% of 1 attempt</td>`, `ago</span></td>`, `>enable</button>`},
			{`<span class="badge">shadow</span>`, `<td class="rate">–</td>`, `>disable</button>`},
		} {
			for _, want := range wants {
				if !strings.Contains(rows[i][2], want) {
					t.Errorf("list row %d lacks %q:\n%s", i, want, rows[i][2])
				}
			}
		}
		if strings.Contains(body, "hunter2") || strings.Contains(body, "secret-not-shown") {
			t.Fatal("the list shows a credential")
		}

		res, body = c.get("/endpoints/" + billing.ID.String())
		wantStatus(t, res, body, http.StatusOK)
		for _, want := range []string{
			`id="endpoint-url">webhook https://billing.example/…<`, `id="deliveries-pending">2<`, `id="deliveries-failed">1<`,
			`id="success-rate">66.6% of 3 attempts<`, `<td class="num">503</td>`, `<td class="num">1.5 s</td>`,
			`<td class="mono response">{&#34;error&#34;: &#34;busy&#34;}</td>`, `<td class="error-text">status 503: billing busy</td>`,
			`<tr data-id="` + dead.ID.String() + `">`, `name="return" value="endpoint"`, `name="endpoint" value="` + billing.ID.String() + `"`,
			`href="/failed?endpoint=` + billing.ID.String() + `" id="all-dead-letters">All 1 failed delivery, with filters`,
			`id="attempts-shown">The 4 most recent attempts.`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("billing's page lacks %q", want)
			}
		}
		if strings.Contains(body, "hunter2") {
			t.Fatal("the endpoint's page shows the URL's password")
		}
		_, body = c.get("/endpoints/" + crm.ID.String())
		for _, want := range []string{`id="failing-since"><span class="bad-text">`, `id="breaker">open until`, `connection refused`, `id="no-dead-letters"`} {
			if !strings.Contains(body, want) {
				t.Errorf("crm's page lacks %q", want)
			}
		}
		for path, want := range map[string]int{"/endpoints/nonsense": http.StatusBadRequest, "/endpoints/" + uuid.NewString(): http.StatusNotFound,
			"/endpoints/" + uuid.NewString() + "/edit": http.StatusNotFound} {
			res, body := c.get(path)
			wantStatus(t, res, body, want)
		}
	})
}

// A dead letter retried from the endpoint's page goes through the failed
// page's confirmation, and back to the endpoint's page.
func TestEndpointPageRetriesADeadLetter(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		billing := newEndpoint(t, s, "billing", store.EndpointEnabled)
		ev := orderEvent(1)
		failDeliveries(t, s, billing, []postbox.Event{ev, orderEvent(2)}, []string{"status 503", "status 410"})
		c := serve(t, console.Config{Store: s}) // no admin: dead letters are the failed page's
		page := "/endpoints/" + billing.ID.String()
		form := url.Values{"csrf": {c.csrf(page)}, "action": {"retry"}, "endpoint": {billing.ID.String()}, "return": {"endpoint"}, "id": {ev.ID.String()}}
		res, body := c.post("/failed/action", form)
		wantStatus(t, res, body, http.StatusOK)
		if m := confirmTitle.FindStringSubmatch(body); m == nil || m[1] != "Retry 1 failed delivery?" {
			t.Fatalf("confirmation title %q", m)
		}
		if !strings.Contains(body, `href="`+page+`" id="confirm-cancel"`) || !strings.Contains(body, `name="return" value="endpoint"`) {
			t.Fatalf("the confirmation does not lead back to the endpoint's page:\n%s", body)
		}
		form.Set("confirm", "1")
		res, body = c.post("/failed/action", form)
		wantStatus(t, res, body, http.StatusSeeOther)
		if loc := res.Header.Get("Location"); loc != page+"?done=retry&n=1" {
			t.Fatalf("after the retry: to %q", loc)
		}
		if got := deliveryStatus(t, s, billing, ev.ID); got != store.StatusPending {
			t.Fatalf("the retried delivery: %q", got)
		}
		_, body = c.get(res.Header.Get("Location"))
		if !strings.Contains(body, `id="notice">Sent 1 failed delivery back to the queue.`) || strings.Contains(body, `<tr data-id="`+ev.ID.String()+`"`) {
			t.Fatal("the endpoint's page after the retry: no notice, or the delivery still listed")
		}
		// Without "return", the failed page's flow is unchanged.
		form.Del("return")
		form.Set("action", "purge")
		form.Set("all", "1")
		res, body = c.post("/failed/action", form)
		wantStatus(t, res, body, http.StatusSeeOther)
		if loc := res.Header.Get("Location"); !strings.HasPrefix(loc, "/failed?") || !strings.Contains(loc, "done=purge") {
			t.Fatalf("a purge from the failed page: to %q", loc)
		}
	})
}

// Every action route of the endpoint pages, with the form it needs.
func endpointActions(id uuid.UUID) map[string]url.Values {
	p := "/endpoints/" + id.String()
	return map[string]url.Values{
		"/endpoints/new": {"name": {"x"}, "url": {"http://127.0.0.1:9/"}, "allow_private": {"1"}},
		p + "/edit":      {"name": {"renamed"}, "concurrency": {"3"}},
		p + "/disable":   {},
		p + "/enable":    {},
		p + "/rotate":    {"grace": {"1h"}},
		p + "/test":      {},
		p + "/remove":    {"confirm": {"1"}},
	}
}

// A read-only console shows the endpoints without a form, and refuses
// every action; any console refuses an action without the CSRF token.
func TestEndpointActionsReadOnlyAndCSRF(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		e := newEndpoint(t, s, "billing", store.EndpointEnabled)
		failDeliveries(t, s, e, []postbox.Event{orderEvent(1)}, []string{"status 503"})
		a := newAdmin(t, s, false)
		const token = "a-token-of-enough-length"
		ro := serve(t, console.Config{Store: s, ReadOnly: true, Token: token, Endpoints: a})
		res, body := ro.post("/login", url.Values{"token": {token}, "csrf": {ro.csrf("/login")}})
		wantStatus(t, res, body, http.StatusSeeOther)
		for _, path := range []string{"/endpoints", "/endpoints/" + e.ID.String()} {
			res, body := ro.get(path)
			wantStatus(t, res, body, http.StatusOK)
			if strings.Contains(body, `action="/endpoints`) || strings.Contains(body, `action="/failed/action"`) || strings.Contains(body, `name="id"`) ||
				strings.Contains(body, `href="/endpoints/new"`) || strings.Contains(body, "/edit") {
				t.Fatalf("read-only %s offers an action:\n%s", path, body)
			}
			if !strings.Contains(body, `id="actions-off">This console is read-only`) {
				t.Fatalf("read-only %s does not say why there is no action", path)
			}
		}
		for _, path := range []string{"/endpoints/new", "/endpoints/" + e.ID.String() + "/edit"} {
			res, body := ro.get(path)
			wantStatus(t, res, body, http.StatusForbidden)
			if strings.Contains(body, `<form method="post" action="/endpoints`) || !strings.Contains(body, "read-only") {
				t.Fatalf("read-only %s: a form, or no word of why not", path)
			}
		}
		csrf := ro.csrf("/endpoints")
		for path, form := range endpointActions(e.ID) {
			form.Set("csrf", csrf)
			res, body := ro.post(path, form)
			wantStatus(t, res, body, http.StatusForbidden)
			if !strings.Contains(body, "read-only") {
				t.Fatalf("read-only POST %s: refusal %q does not say read-only", path, body)
			}
		}

		c := serve(t, console.Config{Store: s, Endpoints: a})
		before, err := s.EndpointGet(ctxFor(t), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		for path, form := range endpointActions(e.ID) {
			res, body := c.post(path, form)
			wantStatus(t, res, body, http.StatusForbidden)
			if !strings.Contains(body, "CSRF") {
				t.Fatalf("POST %s without the CSRF token: refusal %q", path, body)
			}
		}
		after, err := s.EndpointGet(ctxFor(t), e.ID)
		if err != nil || after.Name != "billing" || after.State != store.EndpointEnabled || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Fatalf("refused POSTs changed the endpoint: %+v (%v)", after, err)
		}
		if eps, _ := s.EndpointList(ctxFor(t)); len(eps) != 1 {
			t.Fatalf("refused POSTs: %d endpoints, want 1", len(eps))
		}
	})
}

// Without an admin, the pages show the endpoints and say why nothing can
// be changed; without a secrets key, what needs it is refused with a
// word of why.
func TestEndpointPagesWithoutAdminOrKey(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		e := newEndpoint(t, s, "billing", store.EndpointEnabled)
		failDeliveries(t, s, e, []postbox.Event{orderEvent(1)}, []string{"status 503"})
		c := serve(t, console.Config{Store: s})
		for _, path := range []string{"/endpoints", "/endpoints/" + e.ID.String()} {
			res, body := c.get(path)
			wantStatus(t, res, body, http.StatusOK)
			if !strings.Contains(body, `id="actions-off">This console was started without managing endpoints`) || strings.Contains(body, `action="/endpoints`) {
				t.Fatalf("%s without an admin: no word of why, or an action:\n%s", path, body)
			}
			if !strings.Contains(body, "billing") || !strings.Contains(body, "webhook https://billing.example/…") {
				t.Fatalf("%s without an admin does not show the endpoint", path)
			}
		}
		if _, body := c.get("/endpoints/" + e.ID.String()); !strings.Contains(body, `id="retry-selected"`) {
			t.Fatal("without an admin, the endpoint's dead letters cannot be retried (they are the failed page's)")
		}
		csrf := c.csrf("/failed") // no endpoint page has a form: the token of the failed page's
		for path, form := range endpointActions(e.ID) {
			form.Set("csrf", csrf)
			res, body := c.post(path, form)
			wantStatus(t, res, body, http.StatusForbidden)
			if !strings.Contains(body, "without managing endpoints") {
				t.Fatalf("POST %s without an admin: refusal %q", path, body)
			}
		}

		// Without a secrets key, the pages say up front what is refused,
		// and offer no add, no rotation, and no test of a sealed
		// endpoint; the POSTs refuse them too.
		created, err := newAdmin(t, s, false).Create(ctxFor(t), admin.Settings{Name: "sealed", URL: "https://93.184.215.14/hook"}, endpoint.Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		sealed := created.Endpoint.ID.String()
		keyless := serve(t, console.Config{Store: s, Endpoints: newAdmin(t, s, true)})
		for path, offered := range map[string][]string{
			"/endpoints":                  {`action="/endpoints/` + sealed + `/disable"`},
			"/endpoints/new":              nil,
			"/endpoints/" + sealed:        {`id="state-form"`, `id="edit"`},
			"/endpoints/" + e.ID.String(): {`id="test-form"`}, // in clear: it needs no key
		} {
			res, body := keyless.get(path)
			wantStatus(t, res, body, http.StatusOK)
			if !strings.Contains(body, `id="key-off">This console has no secrets key: adding endpoints, rotating their secrets and sending test events to sealed endpoints are refused`) {
				t.Fatalf("%s without a secrets key does not say so up front:\n%s", path, body)
			}
			for _, refused := range []string{`id="new-endpoint"`, `id="endpoint-form"`, `id="rotate-form"`, `action="/endpoints/` + sealed + `/test"`} {
				if strings.Contains(body, refused) {
					t.Errorf("%s without a secrets key offers %s", path, refused)
				}
			}
			for _, want := range offered {
				if !strings.Contains(body, want) {
					t.Errorf("%s without a secrets key lacks %s, which needs none", path, want)
				}
			}
		}
		if _, body := serve(t, console.Config{Store: s, Endpoints: newAdmin(t, s, false)}).get("/endpoints"); strings.Contains(body, `id="key-off"`) {
			t.Error("a console with a secrets key says it has none")
		}
		csrf = keyless.csrf("/endpoints/" + sealed)
		res, body := keyless.post("/endpoints/new", endpointForm(csrf, "added", "http://127.0.0.1:9/hook"))
		wantStatus(t, res, body, http.StatusUnprocessableEntity)
		if !strings.Contains(body, `id="form-error">Refused: this console has no secrets key`) {
			t.Fatalf("an add without a secrets key: no word of why:\n%s", body)
		}
		for _, action := range []string{"rotate", "test"} {
			res, body = keyless.post("/endpoints/"+sealed+"/"+action, url.Values{"csrf": {csrf}, "grace": {"1h"}})
			wantStatus(t, res, body, http.StatusUnprocessableEntity)
			if !strings.Contains(body, "Refused: this console has no secrets key") {
				t.Fatalf("%s without a secrets key: no word of why:\n%s", action, body)
			}
		}
		res, body = keyless.post("/endpoints/"+e.ID.String()+"/disable", url.Values{"csrf": {csrf}})
		wantStatus(t, res, body, http.StatusSeeOther) // needs no secret
		if got, _ := s.EndpointGet(ctxFor(t), e.ID); got.State != store.EndpointDisabled {
			t.Fatalf("disable without a secrets key: %s", got.State)
		}
	})
}

// hostileEndpoint is an endpoint whose every text would be markup, or
// would move the terminal, if shown as it is.
func hostileEndpoint(t *testing.T, s console.Store) store.Endpoint {
	t.Helper()
	d := driverOf(t, s)
	e, err := d.EndpointCreate(ctxFor(t), store.Endpoint{Name: `<script>alert('name')</script>` + "\x1b[2J", URL: `https://x.example/hook?q="><img src=x onerror=alert('url')>`,
		Types: []string{`order.<b>paid</b>`}, Filter: `payload.note == "<i>x</i>"`, Secret: webhookSecret, Concurrency: 1, State: store.EndpointEnabled})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.AttemptInsert(ctxFor(t), []store.Attempt{{EndpointID: e.ID, EventID: uuid.New(), EventType: `<b>t</b>`, Attempt: 1, StatusCode: 500,
		Response: `<script>alert('response')</script>`, Error: xssError + "\r\n\x1b]0;title\x07", At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	failDeliveries(t, s, e, []postbox.Event{orderEvent(1)}, []string{xssError})
	return e
}

// Names, URLs, types, filters, responses and errors are text on every
// endpoint page, their control characters escaped.
func TestEndpointPagesEscapeHostileValues(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		e := hostileEndpoint(t, s)
		c := serve(t, console.Config{Store: s, Endpoints: newAdmin(t, s, false)})
		p := "/endpoints/" + e.ID.String()
		pages := map[string]string{}
		for _, path := range []string{"/endpoints", p, p + "/edit"} {
			res, body := c.get(path)
			wantStatus(t, res, body, http.StatusOK)
			pages[path] = body
		}
		res, body := c.post(p+"/remove", url.Values{"csrf": {c.csrf(p)}})
		wantStatus(t, res, body, http.StatusOK)
		pages["remove"] = body
		for path, body := range pages {
			for _, bad := range []string{"<script>alert", "<img src=x", "<b>", "<i>x", "\x1b", "\x07"} {
				// The edit form's fields hold the values as they are, to
				// save them as they are: a browser shows no control
				// character.
				if strings.Contains(body, bad) && !(path == p+"/edit" && (bad == "\x1b" || bad == "\x07")) {
					t.Fatalf("%s holds %q as it is", path, bad)
				}
			}
		}
		for _, want := range []string{`&lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt;\x1b[2J`, `id="endpoint-url">webhook https://x.example/…<`,
			`order.&lt;b&gt;paid&lt;/b&gt;`, `payload.note == &#34;&lt;i&gt;x&lt;/i&gt;&#34;`, `&lt;script&gt;alert(&#39;response&#39;)&lt;/script&gt;`, `\r\n\x1b]0;title\x07`} {
			if !strings.Contains(pages[p], want) {
				t.Errorf("the endpoint's page lacks the escaped text %q", want)
			}
		}
	})
}

// A refused add form gives the URL typed back without its user
// information, which is a secret the form never shows: it says the
// secrets must be given again.
func TestEndpointFormRefusalDropsTheURLsPassword(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		c := serve(t, console.Config{Store: s, Endpoints: newAdmin(t, s, false)})
		csrf := c.csrf("/endpoints/new")
		for _, target := range []string{
			"https://svc:url-password-not-shown@billing.example/hook",
			"https://url-password-not-shown@billing.example/hook",
			"nats://svc:url-password-not-shown@nats.example:4222?subject=orders",
			"https://svc:url-password-not-shown@bill ing.example/%zz",
			"svc:url-password-not-shown@billing.example/hook",
		} {
			form := endpointForm(csrf, "refused", target)
			form.Set("filter", "payload.total >")
			res, body := c.post("/endpoints/new", form)
			wantStatus(t, res, body, http.StatusUnprocessableEntity)
			if holds(body, "url-password-not-shown") {
				t.Fatalf("%s: the refused form shows the URL's user information:\n%s", target, body)
			}
			if !strings.Contains(body, `id="secrets-cleared"`) {
				t.Fatalf("%s: the refused form does not say the secrets must be given again", target)
			}
		}
		form := endpointForm(csrf, "refused", "https://billing.example/hook?v=2")
		form.Set("filter", "payload.total >")
		_, body := c.post("/endpoints/new", form)
		if !strings.Contains(body, `name="url" value="https://billing.example/hook?v=2"`) || strings.Contains(body, `id="secrets-cleared"`) {
			t.Fatalf("a URL without user information is not given back as typed, or secrets are said cleared:\n%s", body)
		}
	})
}

// The pages show an endpoint's URL by its kind, scheme and host, never
// its path nor its query, where a chat service keeps its token: the list,
// the endpoint's page (a read-only console's too), the removal's
// confirmation, the page of the secret after an add or a rotation, and a
// test event's failure.
func TestEndpointPagesDescribeTheURL(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		d := driverOf(t, s)
		ctx := ctxFor(t)
		const token = "token-in-the-url-not-shown"
		urls := map[string]string{
			"slack": "https://hooks.slack.com/services/T000/B000/" + token,
			"query": "https://93.184.215.14/hook?token=" + token,
			"nats":  "nats://nats.example:4222?subject=orders&token=" + token,
			"other": "mqtt://broker.example:1883/" + token,
		}
		wants := map[string]string{
			"slack": "webhook https://hooks.slack.com/…",
			"query": "webhook https://93.184.215.14/…",
			"nats":  "nats nats://nats.example:4222 subject=orders",
			"other": "mqtt://broker.example:1883/…",
		}
		ids := map[string]uuid.UUID{}
		for name, u := range urls {
			e := newEndpoint(t, s, name, store.EndpointEnabled)
			e.URL = u
			if name == "nats" || name == "other" {
				e.Secret = ""
			}
			if _, err := d.EndpointUpdate(ctx, e); err != nil {
				t.Fatal(err)
			}
			ids[name] = e.ID
		}
		c := serve(t, console.Config{Store: s, Endpoints: newAdmin(t, s, false), Kinds: []sink.URLKind{nats.URL}})
		ro := serve(t, console.Config{Store: s, ReadOnly: true, Endpoints: newAdmin(t, s, false), Kinds: []sink.URLKind{nats.URL}})
		noToken := func(what, body string) {
			t.Helper()
			if holds(body, token) || holds(body, "/services/") {
				t.Fatalf("%s shows the URL's path or query:\n%s", what, body)
			}
		}
		for _, cl := range []*client{c, ro} {
			_, body := cl.get("/endpoints")
			noToken("the list", body)
			for name, want := range wants {
				if !strings.Contains(body, `<td class="mono url">`+want+`</td>`) {
					t.Errorf("the list does not describe %s's URL as %q", name, want)
				}
				_, body := cl.get("/endpoints/" + ids[name].String())
				noToken(name+"'s page", body)
				if !strings.Contains(body, `id="endpoint-url">`+want+`<`) {
					t.Errorf("%s's page does not describe its URL as %q", name, want)
				}
			}
		}
		slack := "/endpoints/" + ids["slack"].String()
		res, body := c.post(slack+"/remove", url.Values{"csrf": {c.csrf(slack)}})
		wantStatus(t, res, body, http.StatusOK)
		noToken("the removal's confirmation", body)
		if !strings.Contains(body, wants["slack"]) {
			t.Errorf("the removal's confirmation does not describe the URL:\n%s", body)
		}
		res, body = c.post(slack+"/rotate", url.Values{"csrf": {c.csrf(slack)}, "grace": {"1h"}})
		wantStatus(t, res, body, http.StatusOK)
		noToken("the rotated secret's page", body)
		if !strings.Contains(body, `id="endpoint-url">`+wants["slack"]+`<`) {
			t.Errorf("the rotated secret's page does not describe the URL:\n%s", body)
		}

		closed := httptest.NewServer(http.NotFoundHandler())
		closed.Close() // nothing listens there any more
		id, body := addEndpoint(t, c, endpointForm(c.csrf("/endpoints/new"), "closed", closed.URL+"/services/T/B/"+token))
		noToken("the added endpoint's secret page", body)
		if !strings.Contains(body, `id="endpoint-url">webhook `+closed.URL+`/…<`) {
			t.Errorf("the added endpoint's secret page does not describe the URL:\n%s", body)
		}
		page := "/endpoints/" + id.String()
		res, body = c.post(page+"/test", url.Values{"csrf": {c.csrf(page)}})
		wantStatus(t, res, body, http.StatusBadGateway)
		noToken("a test event's failure", body)
		if !strings.Contains(body, "webhook "+closed.URL+"/…") {
			t.Errorf("a test event's failure does not describe the URL:\n%s", body)
		}
	})
}
