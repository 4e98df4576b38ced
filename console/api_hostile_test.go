package console_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/store"
)

// login starts a session of the console's login form: the client's
// cookie jar holds its cookie, which call sends.
func (a *apiAPI) login(t *testing.T) {
	t.Helper()
	res, err := a.http.Get(a.base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	page.ReadFrom(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page.String())
	if m == nil {
		t.Fatal("no CSRF token on the login page")
	}
	res, err = a.http.PostForm(a.base+"/login", url.Values{"token": {a.token}, "csrf": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", res.StatusCode)
	}
}

// csrf is the CSRF token GET /api/session answers the client.
func (a *apiAPI) csrf(t *testing.T, c apiCall) string {
	t.Helper()
	c.method, c.path = http.MethodGet, "/api/session"
	_, body := a.call(t, c, http.StatusOK)
	var s struct {
		CSRFToken string `json:"csrf_token"`
	}
	decode(t, body, &s)
	return s.CSRFToken
}

// newWebhook adds a webhook endpoint named name through the API and
// returns its id.
func (a *apiAPI) newWebhook(t *testing.T, name string) string {
	t.Helper()
	_, body := a.call(t, apiCall{method: http.MethodPost, path: "/api/endpoints", body: map[string]any{"name": name, "url": "https://93.184.215.14/" + name}}, http.StatusCreated)
	var created struct {
		Endpoint apiView `json:"endpoint"`
	}
	decode(t, body, &created)
	return created.Endpoint.ID.String()
}

// Without the token: 401 problems (never the login page), for reads and
// changes alike, and unknown routes do not show. Wrong bearer tokens back
// the client off (429 with Retry-After).
func TestAPIHostileAuthentication(t *testing.T) {
	t.Parallel()
	a := newAPI(t, console.Config{Store: sqliteStore(t), Token: testToken})
	for _, c := range []apiCall{
		{method: http.MethodGet, path: "/api/endpoints"},
		{method: http.MethodGet, path: "/api/openapi.json"},
		{method: http.MethodPost, path: "/api/dead-letters/retry", body: `{"all":true}`},
		{method: http.MethodGet, path: "/api/no-such-route", undocumented: true},
	} {
		res, body := a.call(t, apiCall{method: c.method, path: c.path, body: c.body, noBearer: true, hostile: true, undocumented: c.undocumented}, http.StatusUnauthorized)
		if p := problemOf(t, res, body); p.Type != "urn:postbox:problem:unauthorized" || res.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("%s %s: %+v, WWW-Authenticate %q", c.method, c.path, p, res.Header.Get("WWW-Authenticate"))
		}
	}
	wrong := apiCall{method: http.MethodGet, path: "/api/stats", noBearer: true, header: http.Header{"Authorization": {"Bearer wrong-token-wrong-token"}}}
	for range console.LoginFreeFailures {
		a.wantProblem(t, wrong, http.StatusUnauthorized, "unauthorized")
	}
	a.wantProblem(t, wrong, http.StatusTooManyRequests, "too-many-wrong-tokens")
	res, body := a.call(t, apiCall{method: http.MethodGet, path: "/api/stats", hostile: true}, http.StatusTooManyRequests)
	if res.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %s", body)
	}
	a.wantNoSecret(t, []string{testToken, "wrong-token-wrong-token"}, nil)
}

// A login session's cookie reads, but changes only with the session's
// CSRF token in X-CSRF-Token, from the console's own origin.
func TestAPIHostileSessionNeedsCSRFAndOrigin(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	a := newAPI(t, console.Config{Store: s, Token: testToken, Endpoints: apiAdmin(t, s, false)})
	id := a.newWebhook(t, "warehouse")
	a.login(t)
	cookie := apiCall{noBearer: true}
	a.call(t, apiCall{method: http.MethodGet, path: "/api/endpoints", noBearer: true}, http.StatusOK)
	token := a.csrf(t, cookie)
	disable := func(h http.Header) apiCall {
		return apiCall{method: http.MethodPost, path: "/api/endpoints/" + id + "/disable", noBearer: true, header: h}
	}
	a.wantProblem(t, disable(nil), http.StatusForbidden, "csrf")
	a.wantProblem(t, disable(http.Header{"X-Csrf-Token": {strings.Repeat("0", len(token))}}), http.StatusForbidden, "csrf")
	a.wantProblem(t, disable(http.Header{"X-Csrf-Token": {token}, "Origin": {"https://evil.example"}}), http.StatusForbidden, "cross-origin")
	a.wantProblem(t, disable(http.Header{"X-Csrf-Token": {token}, "Sec-Fetch-Site": {"cross-site"}}), http.StatusForbidden, "cross-origin")
	a.wantProblem(t, disable(http.Header{"X-Csrf-Token": {token}, "Sec-Fetch-Site": {"same-site"}}), http.StatusForbidden, "cross-origin")
	// A form another site posts (no custom header possible) is refused
	// whatever its content type.
	a.wantProblem(t, apiCall{method: http.MethodPost, path: "/api/endpoints/" + id + "/disable", noBearer: true, body: "csrf=x", contentType: "text/plain"},
		http.StatusForbidden, "csrf")
	if st := endpointState(t, s, id); st != store.EndpointEnabled {
		t.Fatalf("state %s after refused requests", st)
	}
	a.call(t, disable(http.Header{"X-Csrf-Token": {token}, "Origin": {a.base}, "Sec-Fetch-Site": {"same-origin"}}), http.StatusOK)
	if endpointState(t, s, id) != store.EndpointDisabled {
		t.Fatal("the request with the session's CSRF token did not disable the endpoint")
	}
}

// endpointState is the state of the endpoint id in s.
func endpointState(t *testing.T, s console.Store, id string) string {
	t.Helper()
	eps, err := s.EndpointList(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eps {
		if e.ID.String() == id {
			return e.State
		}
	}
	t.Fatalf("no endpoint %s", id)
	return ""
}

// Bodies: too large 413, not JSON 415, malformed 400, unknown members 400
// (create and patch), nested too deep 400, two values 400; refused
// settings 422 naming the setting by its canonical name; unknown ids and
// names 404, a name two endpoints have 409; unknown routes 404, a wrong
// method 405 with Allow; bad parameters 400.
func TestAPIHostileRequests(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	a := newAPI(t, console.Config{Store: s, Token: testToken, Endpoints: apiAdmin(t, s, false)})
	id := a.newWebhook(t, "twin")
	a.newWebhook(t, "twin")
	create := func(body any, contentType string) apiCall {
		return apiCall{method: http.MethodPost, path: "/api/endpoints", body: body, contentType: contentType}
	}
	huge := `{"name":"` + strings.Repeat("a", 1<<20) + `","url":"https://93.184.215.14/"}`
	a.wantProblem(t, create(huge, ""), http.StatusRequestEntityTooLarge, "body-too-large")
	a.wantProblem(t, create(`{"url":"https://93.184.215.14/"}`, "text/plain"), http.StatusUnsupportedMediaType, "unsupported-media-type")
	a.wantProblem(t, create(`url=https://93.184.215.14/`, "application/x-www-form-urlencoded"), http.StatusUnsupportedMediaType, "unsupported-media-type")
	for _, bad := range []string{`{"url": `, `{"url": "https://93.184.215.14/"`, `nonsense`, `[1,2]`, `{"url": 7}`,
		`{"url":"https://93.184.215.14/"} {"url":"https://93.184.215.14/"}`, strings.Repeat("[", 100) + strings.Repeat("]", 100), ``} {
		a.wantProblem(t, create(bad, ""), http.StatusBadRequest, "bad-request")
	}
	p := a.wantProblem(t, create(`{"url":"https://93.184.215.14/","secret_key":"whsec_x"}`, ""), http.StatusBadRequest, "bad-request")
	if !strings.Contains(p.Detail, `unknown field "secret_key"`) {
		t.Fatalf("unknown field: %q", p.Detail)
	}
	patch := func(body string) apiCall {
		return apiCall{method: http.MethodPatch, path: "/api/endpoints/" + id, body: body, contentType: "application/merge-patch+json"}
	}
	a.wantProblem(t, patch(`{"state":"enabled"}`), http.StatusBadRequest, "bad-request")
	a.wantProblem(t, patch(`{"basic":{"user":"u","password":"p","realm":"x"}}`), http.StatusBadRequest, "bad-request")
	a.wantProblem(t, patch(`{"concurrency":"eight"}`), http.StatusBadRequest, "bad-request")

	for _, c := range []struct {
		call    apiCall
		setting string
	}{
		{create(`{"url":"ftp://93.184.215.14/x"}`, ""), "url"},
		{create(`{"url":"https://93.184.215.14/","filter":"payload.("}`, ""), "filter"},
		{create(`{"url":"https://93.184.215.14/","secret":"short"}`, ""), "secret"},
		{create(`{"url":"https://127.0.0.1/hook"}`, ""), "url"},
		{patch(`{"envelope":"soap"}`), "envelope"},
		{patch(`{"secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`), "secret"},
		{patch(`{"basic":{"user":"u","password":"p"},"bearer":"t"}`), "auth"},
		{apiCall{method: http.MethodPost, path: "/api/endpoints/" + id + "/rotate-secret", body: `{"grace_seconds":-1}`}, "grace"},
	} {
		c.call.hostile = true
		p := a.wantProblem(t, c.call, http.StatusUnprocessableEntity, "invalid-setting")
		if p.Setting != c.setting || p.Detail == "" || strings.Contains(p.Detail, "--") {
			t.Errorf("%s %s %v: setting %q (%q), want %q named canonically", c.call.method, c.call.path, c.call.body, p.Setting, p.Detail, c.setting)
		}
	}

	a.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/endpoints/01900000-0000-7000-8000-000000000000"}, http.StatusNotFound, "not-found")
	a.wantProblem(t, apiCall{method: http.MethodPost, path: "/api/endpoints/nobody/enable"}, http.StatusNotFound, "not-found")
	a.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/endpoints/twin"}, http.StatusConflict, "ambiguous")
	a.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/dead-letters?endpoint=twin"}, http.StatusConflict, "ambiguous")
	a.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/dead-letters?endpoint=nobody"}, http.StatusNotFound, "not-found")
	a.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/no-such-route", undocumented: true}, http.StatusNotFound, "not-found")
	a.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/endpoints/", undocumented: true}, http.StatusNotFound, "not-found")
	res, body := a.call(t, apiCall{method: http.MethodPut, path: "/api/endpoints/" + id, body: `{}`, hostile: true, undocumented: true}, http.StatusMethodNotAllowed)
	if allow := res.Header.Get("Allow"); allow != "GET, PATCH, DELETE" {
		t.Fatalf("Allow %q: %s", allow, body)
	}
	for _, path := range []string{"/api/dead-letters?limit=0", "/api/dead-letters?limit=x", "/api/dead-letters?after=yesterday",
		"/api/dead-letters?failed_since=yesterday", "/api/dead-letters/groups?scan=0", "/api/endpoints/" + id + "/attempts?limit=100000"} {
		a.wantProblem(t, apiCall{method: http.MethodGet, path: path}, http.StatusBadRequest, "bad-request")
	}
	for _, body := range []string{`{}`, `{"ids":["not-a-uuid"]}`, `{"group":"nonsense group"}`, `{"all":"yes"}`} {
		a.wantProblem(t, apiCall{method: http.MethodPost, path: "/api/dead-letters/purge", body: body}, http.StatusBadRequest, "bad-request")
	}
	a.wantProblem(t, apiCall{method: http.MethodPost, path: "/api/endpoints/" + id + "/test", body: `{"timeout_seconds":0}`}, http.StatusBadRequest, "bad-request")
	a.wantNoSecret(t, []string{testToken, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, nil)
}

// A read-only console reads, and refuses every change (403), even with
// the token; a console without the endpoints' engine refuses the
// endpoints' routes and still serves the dead letters; without a secrets
// key, what needs secrets is refused (403) and the rest works; a test
// event that does not get through is a 502 that says why.
func TestAPIHostileRefusals(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	ids := failEvents(t, s, []postbox.Event{orderEvent(1)}, []string{"HTTP 500"})
	ro := newAPI(t, console.Config{Store: s, Token: testToken, ReadOnly: true, Endpoints: apiAdmin(t, s, false)})
	ro.call(t, apiCall{method: http.MethodGet, path: "/api/endpoints"}, http.StatusOK)
	ro.call(t, apiCall{method: http.MethodGet, path: "/api/dead-letters"}, http.StatusOK)
	for _, c := range []apiCall{
		{method: http.MethodPost, path: "/api/endpoints", body: `{"url":"https://93.184.215.14/"}`},
		{method: http.MethodPost, path: "/api/dead-letters/purge", body: `{"all":true}`},
		{method: http.MethodDelete, path: "/api/endpoints/x"},
	} {
		ro.wantProblem(t, c, http.StatusForbidden, "read-only")
	}
	if status(t, s, ids[0]) != store.StatusFailed {
		t.Fatal("a read-only console changed an event")
	}

	off := newAPI(t, console.Config{Store: s, Token: testToken})
	off.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/endpoints"}, http.StatusForbidden, "endpoints-off")
	off.wantProblem(t, apiCall{method: http.MethodPost, path: "/api/endpoints", body: `{"url":"https://93.184.215.14/"}`}, http.StatusForbidden, "endpoints-off")
	off.call(t, apiCall{method: http.MethodPost, path: "/api/dead-letters/retry", body: map[string]any{"ids": []string{ids[0].String()}}}, http.StatusOK)

	keyed := newAPI(t, console.Config{Store: s, Token: testToken, Endpoints: apiAdmin(t, s, false)})
	id := keyed.newWebhook(t, "sealed")
	unreachable := keyed.newWebhookAt(t, "unreachable", "http://127.0.0.1:1/hook")
	p := keyed.wantProblem(t, apiCall{method: http.MethodPost, path: "/api/endpoints/" + unreachable + "/test", body: `{"timeout_seconds":5}`}, http.StatusBadGateway, "test-failed")
	if !strings.Contains(p.Detail, "127.0.0.1:1") {
		t.Fatalf("test failed: %q", p.Detail)
	}
	nokey := newAPI(t, console.Config{Store: s, Token: testToken, Endpoints: apiAdmin(t, s, true)})
	nokey.wantProblem(t, apiCall{method: http.MethodPost, path: "/api/endpoints", body: `{"url":"https://93.184.215.14/"}`}, http.StatusForbidden, "no-secrets-key")
	nokey.wantProblem(t, apiCall{method: http.MethodPost, path: "/api/endpoints/" + id + "/rotate-secret"}, http.StatusForbidden, "no-secrets-key")
	nokey.wantProblem(t, apiCall{method: http.MethodPost, path: "/api/endpoints/" + id + "/test"}, http.StatusForbidden, "no-secrets-key")
	nokey.call(t, apiCall{method: http.MethodPost, path: "/api/endpoints/" + id + "/disable"}, http.StatusOK)
	nokey.call(t, apiCall{method: http.MethodPatch, path: "/api/endpoints/" + id, body: `{"filter":"payload.total > 1"}`}, http.StatusOK)
}

// newWebhookAt adds a webhook endpoint with private addresses allowed.
func (a *apiAPI) newWebhookAt(t *testing.T, name, rawURL string) string {
	t.Helper()
	_, body := a.call(t, apiCall{method: http.MethodPost, path: "/api/endpoints", body: map[string]any{"name": name, "url": rawURL, "allow_private": true}}, http.StatusCreated)
	var created struct {
		Endpoint apiView `json:"endpoint"`
	}
	decode(t, body, &created)
	return created.Endpoint.ID.String()
}

// A console without a token (loopback only) asks no token, and a change
// still needs X-CSRF-Token: a bearer header of anything does not stand in
// for it, and another site cannot read it from GET /api/session. A
// request addressed to another host (DNS rebinding) is refused.
func TestAPIWithoutTokenChangesNeedCSRF(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	a := newAPI(t, console.Config{Store: s, Endpoints: apiAdmin(t, s, false)})
	// The document describes a console with a token: the requests here
	// send none, so only the answers are held against it.
	a.call(t, apiCall{method: http.MethodGet, path: "/api/endpoints", hostile: true}, http.StatusOK)
	add := apiCall{method: http.MethodPost, path: "/api/endpoints", body: `{"name":"x","url":"https://93.184.215.14/"}`}
	a.wantProblem(t, add, http.StatusForbidden, "csrf")
	add.header = http.Header{"Authorization": {"Bearer anything-at-all-long-enough"}}
	a.wantProblem(t, add, http.StatusForbidden, "csrf")
	_, body := a.call(t, apiCall{method: http.MethodGet, path: "/api/session", hostile: true}, http.StatusOK)
	var session struct {
		Auth      string `json:"auth"`
		CSRFToken string `json:"csrf_token"`
	}
	decode(t, body, &session)
	if session.Auth != "none" || session.CSRFToken == "" {
		t.Fatalf("session: %s", body)
	}
	add.header = http.Header{"X-Csrf-Token": {session.CSRFToken}, "Origin": {"http://evil.example"}}
	a.wantProblem(t, add, http.StatusForbidden, "cross-origin")
	add.header, add.hostile = http.Header{"X-Csrf-Token": {session.CSRFToken}}, true
	a.call(t, add, http.StatusCreated)

	req, _ := http.NewRequest(http.MethodGet, a.base+"/api/session", nil)
	req.Host = "rebound.example"
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a request to another host: %d, want 403", res.StatusCode)
	}
}

// GET /api/session says what the console does with the endpoints:
// "manage", "read-only" on a read-only console (as its start line says),
// "off" without the endpoints' engine.
func TestAPISessionSaysWhatTheConsoleDoesWithEndpoints(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	for _, tc := range []struct {
		cfg  console.Config
		want string
	}{
		{console.Config{Store: s, Token: testToken, Endpoints: apiAdmin(t, s, false)}, "manage"},
		{console.Config{Store: s, Token: testToken, ReadOnly: true, Endpoints: apiAdmin(t, s, false)}, "read-only"},
		{console.Config{Store: s, Token: testToken, ReadOnly: true}, "off"},
		{console.Config{Store: s, Token: testToken}, "off"},
	} {
		a := newAPI(t, tc.cfg)
		_, body := a.call(t, apiCall{method: http.MethodGet, path: "/api/session"}, http.StatusOK)
		var session struct {
			Endpoints string `json:"endpoints"`
			ReadOnly  bool   `json:"read_only"`
		}
		decode(t, body, &session)
		if session.Endpoints != tc.want || session.ReadOnly != tc.cfg.ReadOnly {
			t.Errorf("read-only %v, engine %v: session %s, want endpoints %q", tc.cfg.ReadOnly, tc.cfg.Endpoints != nil, body, tc.want)
		}
	}
}

// A read-only console's API describes an endpoint's URL as its pages do
// (its kind, scheme and host): the path and the query may hold a token,
// which only a console that manages the endpoints answers.
func TestAPIReadOnlyDescribesTheURL(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	const target = "https://93.184.215.14/services/T000/B000/token-in-the-url-not-shown?token=query-token-not-shown"
	manage := newAPI(t, console.Config{Store: s, Token: testToken, Endpoints: apiAdmin(t, s, false)})
	id := manage.newWebhookAt(t, "slack", target)
	ro := newAPI(t, console.Config{Store: s, Token: testToken, ReadOnly: true, Endpoints: apiAdmin(t, s, false)})
	for _, tc := range []struct {
		a    *apiAPI
		want string
	}{{manage, target}, {ro, "webhook https://93.184.215.14/…"}} {
		var list []apiView
		_, body := tc.a.call(t, apiCall{method: http.MethodGet, path: "/api/endpoints"}, http.StatusOK)
		if decode(t, body, &list); len(list) != 1 || list[0].URL != tc.want {
			t.Errorf("read-only %v: GET /api/endpoints: %s, want the URL %q", tc.a == ro, body, tc.want)
		}
		var one apiView
		_, body = tc.a.call(t, apiCall{method: http.MethodGet, path: "/api/endpoints/" + id}, http.StatusOK)
		if decode(t, body, &one); one.URL != tc.want {
			t.Errorf("read-only %v: GET /api/endpoints/{id}: %s, want the URL %q", tc.a == ro, body, tc.want)
		}
	}
	ro.wantNoSecret(t, []string{"token-in-the-url-not-shown", "query-token-not-shown"}, nil)
}

// DELETE /api/endpoints/{id} reads no body: whatever one it is sent (not
// JSON, broken, past the bodies' bound), it removes the endpoint, and the
// document lists the statuses it answers, no 400, 413 nor 415.
func TestAPIDeleteReadsNoBody(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	a := newAPI(t, console.Config{Store: s, Token: testToken, Endpoints: apiAdmin(t, s, false)})
	for _, c := range []apiCall{
		{body: "not JSON", contentType: "text/plain"},
		{body: `{"broken":`},
		{body: strings.Repeat("x", 2<<20), contentType: "application/octet-stream"},
	} {
		id := a.newWebhookAt(t, "removed", "https://93.184.215.14/hook")
		c.method, c.path, c.hostile = http.MethodDelete, "/api/endpoints/"+id, true
		a.call(t, c, http.StatusNoContent)
		if eps, err := s.EndpointList(ctxFor(t)); err != nil || len(eps) != 0 {
			t.Fatalf("after DELETE with a body %.20q: %d endpoints (%v)", c.body, len(eps), err)
		}
	}
	var doc struct {
		Paths map[string]struct {
			Delete struct {
				Responses map[string]json.RawMessage `json:"responses"`
			} `json:"delete"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(apiDocument(t), &doc); err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(doc.Paths["/api/endpoints/{id}"].Delete.Responses))
	// Its 400 is a console over many sources' only (an X-Postbox-Source
	// that names no source, problem source-unknown), as its 503: never
	// the body's.
	if want := []string{"204", "400", "401", "403", "404", "409", "429", "500", "503"}; !slices.Equal(got, want) {
		t.Fatalf("DELETE /api/endpoints/{id} documents %v, want %v", got, want)
	}
}

// A PATCH replaces headers whole, as the document says: a header given
// null is refused (422, setting headers), and removes nothing; headers
// given without one removes it.
func TestAPIPatchReplacesHeadersWhole(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	adm := apiAdmin(t, s, false)
	a := newAPI(t, console.Config{Store: s, Token: testToken, Endpoints: adm})
	_, body := a.call(t, apiCall{method: http.MethodPost, path: "/api/endpoints", body: map[string]any{"name": "partner", "url": "https://93.184.215.14/hook",
		"headers": map[string]string{"X-A": "header-a-not-shown", "X-B": "header-b-not-shown"}}}, http.StatusCreated)
	var created struct {
		Endpoint apiView `json:"endpoint"`
	}
	decode(t, body, &created)
	headers := func() map[string]string {
		t.Helper()
		e, err := s.EndpointGet(ctxFor(t), created.Endpoint.ID)
		if err != nil {
			t.Fatal(err)
		}
		c, err := adm.Open(e)
		if err != nil {
			t.Fatal(err)
		}
		return c.Headers
	}
	p := a.wantProblem(t, apiCall{method: http.MethodPatch, path: "/api/endpoints/partner", body: `{"headers":{"X-A":null}}`}, http.StatusUnprocessableEntity, "invalid-setting")
	if p.Setting != "headers" {
		t.Fatalf("a header given null: problem %+v, want setting headers", p)
	}
	if h := headers(); len(h) != 2 {
		t.Fatalf("a refused patch changed the headers: %d left", len(h))
	}
	a.call(t, apiCall{method: http.MethodPatch, path: "/api/endpoints/partner", body: `{"headers":{"X-B":"header-b2-not-shown"}}`, contentType: "application/merge-patch+json"}, http.StatusOK)
	if h := headers(); len(h) != 1 || h["X-B"] != "header-b2-not-shown" {
		t.Fatalf("headers after a patch that gives X-B only: %d, want X-B alone", len(h))
	}
	var doc struct {
		Components struct {
			Schemas struct {
				EndpointPatch struct {
					Description string `json:"description"`
				} `json:"EndpointPatch"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(apiDocument(t), &doc); err != nil {
		t.Fatal(err)
	}
	if d := doc.Components.Schemas.EndpointPatch.Description; !strings.Contains(d, "top level only") || !strings.Contains(d, "one given null is refused") {
		t.Fatalf("EndpointPatch's description does not say a patch replaces headers whole: %q", d)
	}
}
