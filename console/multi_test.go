package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// multiPassword is the password of every source's database URL: no page,
// no answer, no header of a Multi may hold it.
const multiPassword = "multi-pw-never-shown"

// multiDB is a source's database URL, with multiPassword.
func multiDB(db string) string {
	return "postgres://postgres:" + multiPassword + "@127.0.0.1:5432/" + db + "?sslmode=disable"
}

// multiFixture is a Multi over PostgreSQL stores of the test's own
// schemas, served over HTTP.
type multiFixture struct {
	*client
	multi  *console.Multi
	pool   *pgxpool.Pool
	stores map[string]*postgres.Store // the sources that open

	mu     sync.Mutex
	list   []console.MultiSource
	opened map[string]*atomic.Int32
	closed map[string]*atomic.Int32

	answers *bytes.Buffer // every answer's headers and body
}

// newMulti serves a Multi (token testToken, logged in) over the sources
// of list; a source named in stores opens it, another fails as Open
// says: "unreachable" connects to a port nobody listens on, any other
// name is a schema never migrated.
func newMulti(t *testing.T, pool *pgxpool.Pool, stores map[string]*postgres.Store, list []console.MultiSource, tune func(*console.MultiConfig)) *multiFixture {
	t.Helper()
	f := &multiFixture{pool: pool, stores: stores, list: list, opened: map[string]*atomic.Int32{}, closed: map[string]*atomic.Int32{}, answers: &bytes.Buffer{}}
	for _, src := range list {
		f.opened[src.Name], f.closed[src.Name] = &atomic.Int32{}, &atomic.Int32{}
	}
	cfg := console.MultiConfig{
		Console: console.Config{Token: testToken, Logger: testlog.Discard()},
		List: func(context.Context) ([]console.MultiSource, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return append([]console.MultiSource(nil), f.list...), nil
		},
		Open: f.open,
	}
	if tune != nil {
		tune(&cfg)
	}
	m, err := console.NewMulti(ctxFor(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.multi = m
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	f.client = serveHandler(t, f.tee(m))
	res, body := f.loginAs("", testToken)
	wantStatus(t, res, body, http.StatusSeeOther)
	t.Cleanup(func() {
		if strings.Contains(f.answers.String(), multiPassword) {
			t.Errorf("an answer holds a source's password:\n%s", f.answers)
		}
	})
	return f
}

// open is the Multi's Open.
func (f *multiFixture) open(ctx context.Context, src console.MultiSource) (console.SourceConsole, error) {
	f.opened[src.Name].Add(1)
	closed := func() { f.closed[src.Name].Add(1) }
	if s, ok := f.stores[src.Name]; ok {
		return console.SourceConsole{Store: s, Close: closed}, nil
	}
	if src.Name == "unreachable" {
		pool, err := pgxpool.New(ctx, "postgres://postgres:"+multiPassword+"@127.0.0.1:1/nowhere?connect_timeout=2")
		if err == nil {
			defer pool.Close()
			err = pool.Ping(ctx)
		}
		// As a careless driver might: the URL in the error.
		return console.SourceConsole{}, fmt.Errorf("cannot reach %s: %w", src.DB, err)
	}
	s, err := postgres.New(f.pool, postgres.Config{Schema: src.Schema})
	if err != nil {
		return console.SourceConsole{}, err
	}
	if err := s.Driver().CheckSchema(ctx, store.SchemaParams{}); err != nil {
		return console.SourceConsole{}, err
	}
	return console.SourceConsole{Store: s, Close: closed}, nil
}

// setList replaces the list the Multi reads again.
func (f *multiFixture) setList(list []console.MultiSource) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = list
}

// tee records every answer of h in f.answers.
func (f *multiFixture) tee(h http.Handler) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &teeWriter{ResponseWriter: w, buf: &bytes.Buffer{}}
		h.ServeHTTP(rec, r)
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(f.answers, "%s %s\n%v\n%s\n", r.Method, r.URL, w.Header(), rec.buf)
	})
}

type teeWriter struct {
	http.ResponseWriter
	buf *bytes.Buffer
}

func (w *teeWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

// serveHandler serves h to a browser-like client.
func serveHandler(t *testing.T, h http.Handler) *client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: srv.URL, http: &http.Client{
		Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// formCSRF is the CSRF token of the form of body posting to action.
func formCSRF(t *testing.T, body, action string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<form[^>]*action="` + regexp.QuoteMeta(action) + `"[^>]*>\s*<input type="hidden" name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form to %s with a CSRF token in:\n%s", action, body)
	}
	return m[1]
}

// switchTo posts the switcher's form of page path for source name.
func (f *multiFixture) switchTo(t *testing.T, path, name string) (*http.Response, string) {
	t.Helper()
	_, page := f.get(path)
	return f.post("/sources/select", url.Values{"csrf": {formCSRF(t, page, "/sources/select")}, "source": {name}, "next": {path}})
}

// sources is GET /api/sources.
func (f *multiFixture) sources(t *testing.T) sourceList {
	t.Helper()
	res, body := f.get("/api/sources")
	wantStatus(t, res, body, http.StatusOK)
	var l sourceList
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

type sourceList struct {
	Current string `json:"current"`
	Sources []struct {
		Name, Schema, Database, State, Error string
	} `json:"sources"`
}

func (l sourceList) state(name string) string {
	for _, s := range l.Sources {
		if s.Name == name {
			return s.State
		}
	}
	return "unlisted"
}

// twoSources are two migrated stores, a and b, of fresh schemas of the
// test database, with a failed event each.
func twoSources(t *testing.T) (*pgxpool.Pool, map[string]*postgres.Store, []console.MultiSource, map[string]postbox.Event) {
	t.Helper()
	pool := pgtest.Pool(t)
	stores := map[string]*postgres.Store{"a": pgtest.StoreIn(t, pool), "b": pgtest.StoreIn(t, pool)}
	events := map[string]postbox.Event{}
	var list []console.MultiSource
	for _, name := range []string{"a", "b"} {
		e := orderEvent(1)
		e.EventType = "only." + name
		failEvents(t, stores[name], []postbox.Event{e}, []string{"error of " + name})
		events[name] = e
		list = append(list, console.MultiSource{Name: name, DB: multiDB("postgres"), Schema: stores[name].Schema()})
	}
	return pool, stores, list, events
}

// Switching the source shows each one's events, keeps the choice in an
// HttpOnly, SameSite=Strict cookie, and the switcher says which is shown.
func TestMultiSwitchShowsEachSourcesEvents(t *testing.T) {
	t.Parallel()
	pool, stores, list, events := twoSources(t)
	f := newMulti(t, pool, stores, list, nil)

	// The first source by default.
	res, body := f.get("/failed")
	wantStatus(t, res, body, http.StatusOK)
	if !strings.Contains(body, events["a"].ID.String()) || strings.Contains(body, events["b"].ID.String()) {
		t.Fatalf("the first source's failed page:\n%s", body)
	}
	if !strings.Contains(body, `<option value="a" selected>a</option>`) || !strings.Contains(body, `<option value="b">b</option>`) {
		t.Fatalf("the switcher of a:\n%s", body)
	}
	res, body = f.switchTo(t, "/failed", "b")
	wantStatus(t, res, body, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/failed" {
		t.Fatalf("the switch leads to %q, want /failed", loc)
	}
	ck := res.Header.Get("Set-Cookie")
	if !strings.Contains(ck, "postbox_console_source=") || !strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Strict") {
		t.Fatalf("the source's cookie: %s", ck)
	}
	res, body = f.get("/failed")
	wantStatus(t, res, body, http.StatusOK)
	if !strings.Contains(body, events["b"].ID.String()) || strings.Contains(body, events["a"].ID.String()) {
		t.Fatalf("b's failed page:\n%s", body)
	}
	if !strings.Contains(body, `<option value="b" selected>b</option>`) || !strings.Contains(body, `id="current-source">b<`) {
		t.Fatalf("the switcher of b:\n%s", body)
	}
	// One event's page, the overview, the API's counts: b's.
	if res, body = f.get("/events/" + events["b"].ID.String()); res.StatusCode != http.StatusOK || !strings.Contains(body, "only.b") {
		t.Fatalf("b's event: %d\n%s", res.StatusCode, body)
	}
	if res, _ = f.get("/events/" + events["a"].ID.String()); res.StatusCode != http.StatusNotFound {
		t.Fatalf("a's event shown with b chosen: %d", res.StatusCode)
	}
	if _, body = f.get("/api/stats"); !strings.Contains(body, "only.b") || strings.Contains(body, "only.a") {
		t.Fatalf("b's stats: %s", body)
	}
	// A program names the source in X-Postbox-Source, whatever the cookie.
	req, _ := http.NewRequest(http.MethodGet, f.base+"/api/stats", nil)
	req.Header.Set("X-Postbox-Source", "a")
	if _, body = f.do(req); !strings.Contains(body, "only.a") || strings.Contains(body, "only.b") {
		t.Fatalf("a's stats by X-Postbox-Source: %s", body)
	}

	l := f.sources(t)
	if l.Current != "b" || len(l.Sources) != 2 || l.state("a") != "open" || l.state("b") != "open" {
		t.Fatalf("GET /api/sources: %+v", l)
	}
	for _, s := range l.Sources {
		if s.Schema != stores[s.Name].Schema() || !strings.Contains(s.Database, "postgres:xxxxx@127.0.0.1:5432/postgres") {
			t.Fatalf("source %+v", s)
		}
	}
	// Back to a.
	res, body = f.switchTo(t, "/", "a")
	wantStatus(t, res, body, http.StatusSeeOther)
	if _, body = f.get("/failed"); !strings.Contains(body, events["a"].ID.String()) {
		t.Fatal("back to a: a's event not shown")
	}
	// Logging out ends the session for every source.
	_, page := f.get("/")
	res, body = f.post("/logout", url.Values{"csrf": {formCSRF(t, page, "/logout")}})
	wantStatus(t, res, body, http.StatusSeeOther)
	if res, _ = f.get("/failed"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after logout: %d", res.StatusCode)
	}
	if res, _ = f.get("/api/sources"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /api/sources after logout: %d", res.StatusCode)
	}
}

// A source not listed is refused (400), its name never repeated; a form
// without the CSRF token is refused (403).
func TestMultiUnknownSource(t *testing.T) {
	t.Parallel()
	pool, stores, list, _ := twoSources(t)
	f := newMulti(t, pool, stores, list, nil)
	const hostile = `<script>alert("x")</script>`
	res, body := f.switchTo(t, "/", hostile)
	wantStatus(t, res, body, http.StatusBadRequest)
	if strings.Contains(body, "<script>") || strings.Contains(body, "alert") {
		t.Fatalf("the refusal repeats the name: %s", body)
	}
	if res.Header.Get("Set-Cookie") != "" {
		t.Fatal("a refused switch set a cookie")
	}
	res, body = f.post("/sources/select", url.Values{"source": {"b"}})
	wantStatus(t, res, body, http.StatusForbidden)
	// The API's header too.
	req, _ := http.NewRequest(http.MethodGet, f.base+"/api/stats", nil)
	req.Header.Set("X-Postbox-Source", hostile)
	res, body = f.do(req)
	wantStatus(t, res, body, http.StatusBadRequest)
	if !strings.Contains(body, "urn:postbox:problem:source-unknown") || strings.Contains(body, "alert") {
		t.Fatalf("unknown X-Postbox-Source: %s", body)
	}
	// A cookie naming no source (removed since, or forged) shows the
	// first.
	u, _ := url.Parse(f.base)
	f.http.Jar.SetCookies(u, []*http.Cookie{{Name: "postbox_console_source", Value: "bm9wZQ", Path: "/"}})
	if res, body = f.get("/"); res.StatusCode != http.StatusOK || !strings.Contains(body, `id="current-source">a<`) {
		t.Fatalf("with a cookie of no source: %d\n%s", res.StatusCode, body)
	}
}

// The CSRF token of a form rendered for one source is refused by
// another: a retry form of a, posted once b is chosen, changes nothing;
// b's own works. The API's session token likewise.
func TestMultiCSRFTokenIsTheSources(t *testing.T) {
	t.Parallel()
	pool, stores, list, events := twoSources(t)
	// b gets an event of a's id too: the same form could retry it.
	failEvents(t, stores["b"], []postbox.Event{{ID: events["a"].ID, AggregateType: "order", AggregateID: "2", EventType: "twin", Payload: []byte(`{}`)}}, []string{"twin"})
	f := newMulti(t, pool, stores, list, nil)

	_, page := f.get("/failed")
	tokenA := formCSRF(t, page, "/failed/action")
	res, body := f.switchTo(t, "/failed", "b")
	wantStatus(t, res, body, http.StatusSeeOther)
	_, page = f.get("/failed")
	tokenB := formCSRF(t, page, "/failed/action")
	if tokenA == tokenB {
		t.Fatal("a and b have the same CSRF token")
	}
	retry := func(token string) (*http.Response, string) {
		return f.post("/failed/action", url.Values{"action": {"retry"}, "id": {events["a"].ID.String()}, "csrf": {token}, "confirm": {"1"}})
	}
	res, body = retry(tokenA)
	wantStatus(t, res, body, http.StatusForbidden)
	if got := status(t, stores["b"], events["a"].ID); got != store.StatusFailed {
		t.Fatalf("b's event after a's form: %s", got)
	}
	res, body = retry(tokenB)
	wantStatus(t, res, body, http.StatusSeeOther)
	if got := status(t, stores["b"], events["a"].ID); got != store.StatusPending {
		t.Fatalf("b's event after b's form: %s", got)
	}
	if got := status(t, stores["a"], events["a"].ID); got != store.StatusFailed {
		t.Fatalf("a's event after b's form: %s", got)
	}

	// The API: a's X-CSRF-Token refused on b.
	session := func(name string) string {
		req, _ := http.NewRequest(http.MethodGet, f.base+"/api/session", nil)
		req.Header.Set("X-Postbox-Source", name)
		res, body := f.do(req)
		wantStatus(t, res, body, http.StatusOK)
		var s struct {
			CSRF string `json:"csrf_token"`
		}
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		return s.CSRF
	}
	apiA, apiB := session("a"), session("b")
	purge := func(token string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, f.base+"/api/dead-letters/purge", strings.NewReader(`{"all": true}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Postbox-Source", "b")
		req.Header.Set("X-CSRF-Token", token)
		return f.do(req)
	}
	res, body = purge(apiA)
	wantStatus(t, res, body, http.StatusForbidden)
	if !strings.Contains(body, "urn:postbox:problem:csrf") {
		t.Fatalf("a's API token on b: %s", body)
	}
	if _, err := stores["b"].Get(ctxFor(t), events["b"].ID); err != nil {
		t.Fatalf("b's event after a refused purge: %v", err)
	}
	res, body = purge(apiB)
	wantStatus(t, res, body, http.StatusOK)
	if _, err := stores["a"].Get(ctxFor(t), events["a"].ID); err != nil {
		t.Fatalf("a's event after b's purge: %v", err)
	}
}

// A source that cannot be opened (unreachable, not migrated) shows an
// error page of its own, without its password; the others work, before
// and after.
func TestMultiBrokenSourceIsIsolated(t *testing.T) {
	t.Parallel()
	pool, stores, list, events := twoSources(t)
	list = append(list,
		console.MultiSource{Name: "unreachable", DB: "postgres://postgres:" + multiPassword + "@127.0.0.1:1/nowhere", Schema: "postbox"},
		console.MultiSource{Name: "unmigrated", DB: multiDB("postgres"), Schema: pgtest.Schema(t, pool)},
	)
	f := newMulti(t, pool, stores, list, nil)
	for _, broken := range []string{"unreachable", "unmigrated"} {
		res, body := f.switchTo(t, "/", broken)
		wantStatus(t, res, body, http.StatusSeeOther)
		res, body = f.get("/")
		wantStatus(t, res, body, http.StatusServiceUnavailable)
		if !strings.Contains(body, `id="source-error"`) || !strings.Contains(body, "Source "+broken) ||
			!strings.Contains(body, `<option value="`+broken+`" selected>`) || !strings.Contains(body, `<option value="a">`) {
			t.Fatalf("%s's page:\n%s", broken, body)
		}
		if broken == "unreachable" && !strings.Contains(body, "postgres:xxxxx@127.0.0.1:1") {
			t.Fatalf("unreachable's error does not name its database, masked:\n%s", body)
		}
		// Its API answers a problem.
		res, body = f.get("/api/stats")
		wantStatus(t, res, body, http.StatusServiceUnavailable)
		if !strings.Contains(body, "urn:postbox:problem:source-unavailable") {
			t.Fatalf("%s's API: %s", broken, body)
		}
		// The others work.
		req, _ := http.NewRequest(http.MethodGet, f.base+"/api/stats", nil)
		req.Header.Set("X-Postbox-Source", "b")
		if res, body = f.do(req); res.StatusCode != http.StatusOK || !strings.Contains(body, "only.b") {
			t.Fatalf("b beside %s: %d %s", broken, res.StatusCode, body)
		}
		res, body = f.switchTo(t, "/", "a")
		wantStatus(t, res, body, http.StatusSeeOther)
		if res, body = f.get("/failed"); res.StatusCode != http.StatusOK || !strings.Contains(body, events["a"].ID.String()) {
			t.Fatalf("a after %s: %d\n%s", broken, res.StatusCode, body)
		}
	}
	l := f.sources(t)
	for name, want := range map[string]string{"a": "open", "b": "open", "unreachable": "failed", "unmigrated": "failed"} {
		if got := l.state(name); got != want {
			t.Fatalf("%s: state %s, want %s (%+v)", name, got, want, l)
		}
	}
	for _, s := range l.Sources {
		if s.State == "failed" && s.Error == "" {
			t.Fatalf("%s failed without an error", s.Name)
		}
		if s.Name == "unreachable" && !strings.Contains(s.Database, "xxxxx") {
			t.Fatalf("unreachable's database: %q", s.Database)
		}
	}
	// newMulti's cleanup checks that no answer held the password.
}

// A source unused for Idle is closed (its store released), and opened
// again at its next request; one removed from the list is closed, and
// its cookie then shows the first source.
func TestMultiClosesIdleAndRemovedSources(t *testing.T) {
	t.Parallel()
	pool, stores, list, events := twoSources(t)
	f := newMulti(t, pool, stores, list, func(cfg *console.MultiConfig) {
		cfg.Idle = 200 * time.Millisecond
		cfg.Every = 50 * time.Millisecond
	})
	if got := f.opened["a"].Load() + f.opened["b"].Load(); got != 0 {
		t.Fatalf("%d sources opened before any request", got)
	}
	f.get("/")
	if f.opened["a"].Load() != 1 || f.opened["b"].Load() != 0 {
		t.Fatal("the first request did not open a alone")
	}
	waitUntil(t, 10*time.Second, "a closed once idle", func() bool { return f.closed["a"].Load() == 1 })
	if got := f.sources(t).state("a"); got != "closed" {
		t.Fatalf("a idle: state %s", got)
	}
	if res, body := f.get("/failed"); res.StatusCode != http.StatusOK || !strings.Contains(body, events["a"].ID.String()) {
		t.Fatalf("a opened again: %d", res.StatusCode)
	}
	if f.opened["a"].Load() != 2 {
		t.Fatalf("a opened %d times", f.opened["a"].Load())
	}

	// b chosen, then removed from the list.
	f.setList(list[:1])
	waitUntil(t, 10*time.Second, "b unlisted", func() bool { return f.sources(t).state("b") == "unlisted" })
	res, body := f.switchTo(t, "/", "b")
	wantStatus(t, res, body, http.StatusBadRequest)
	f.setList(list)
	waitUntil(t, 10*time.Second, "b listed again", func() bool { return f.sources(t).state("b") == "closed" })
	res, body = f.switchTo(t, "/", "b")
	wantStatus(t, res, body, http.StatusSeeOther)
	f.get("/")
	if f.sources(t).state("b") != "open" {
		t.Fatal("b not open after its request")
	}
	f.setList(list[:1])
	waitUntil(t, 10*time.Second, "b closed once removed", func() bool { return f.closed["b"].Load() == 1 })
	if res, body := f.get("/"); res.StatusCode != http.StatusOK || !strings.Contains(body, `id="current-source">a<`) {
		t.Fatalf("with b's cookie, b removed: %d\n%s", res.StatusCode, body)
	}
}

// GET /api/sources and the problems of a Multi follow openapi.json.
func TestMultiAPI(t *testing.T) {
	t.Parallel()
	pool, stores, list, _ := twoSources(t)
	list = append(list, console.MultiSource{Name: "unmigrated", DB: multiDB("postgres"), Schema: pgtest.Schema(t, pool)})
	f := newMulti(t, pool, stores, list, nil)
	a := newAPIOf(t, f.multi, testToken)
	_, body := a.call(t, apiCall{method: http.MethodGet, path: "/api/sources"}, http.StatusOK)
	var l sourceList
	if err := json.Unmarshal(body, &l); err != nil || l.Current != "a" || len(l.Sources) != 3 {
		t.Fatalf("GET /api/sources: %s (%v)", body, err)
	}
	a.call(t, apiCall{method: http.MethodGet, path: "/api/stats", header: http.Header{"X-Postbox-Source": {"b"}}}, http.StatusOK)
	a.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/stats", header: http.Header{"X-Postbox-Source": {"nope"}}}, http.StatusBadRequest, "source-unknown")
	a.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/stats", header: http.Header{"X-Postbox-Source": {"unmigrated"}}}, http.StatusServiceUnavailable, "source-unavailable")
	a.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/sources", noBearer: true}, http.StatusUnauthorized, "unauthorized")
	if !a.covered["GET /api/sources"] {
		t.Fatal("GET /api/sources not covered")
	}
	for _, ans := range a.answers {
		if strings.Contains(ans, multiPassword) {
			t.Fatalf("an answer holds the password: %s", ans)
		}
	}
}

// The source's cookie is Secure when the session's is: behind a trusted
// proxy that says the client came over TLS.
func TestMultiSourceCookieIsSecureBehindTLS(t *testing.T) {
	t.Parallel()
	pool, stores, list, _ := twoSources(t)
	f := newMulti(t, pool, stores, list, func(cfg *console.MultiConfig) {
		cfg.Console.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	_, page := f.get("/")
	form := url.Values{"csrf": {formCSRF(t, page, "/sources/select")}, "source": {"b"}}
	req, _ := http.NewRequest(http.MethodPost, f.base+"/sources/select", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	res, body := f.do(req)
	wantStatus(t, res, body, http.StatusSeeOther)
	if ck := res.Header.Get("Set-Cookie"); !strings.Contains(ck, "postbox_console_source=") || !strings.Contains(ck, "; Secure") {
		t.Fatalf("over TLS: %s", ck)
	}
	res, body = f.switchTo(t, "/", "a")
	wantStatus(t, res, body, http.StatusSeeOther)
	if ck := res.Header.Get("Set-Cookie"); strings.Contains(ck, "Secure") {
		t.Fatalf("over plain HTTP: %s", ck)
	}
}
