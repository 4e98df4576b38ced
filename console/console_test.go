package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
	"github.com/postbox-go/postbox/store/sqlite"
)

// forEachStore runs test on a fresh PostgreSQL store and a fresh SQLite one.
func forEachStore(t *testing.T, test func(t *testing.T, s console.Store)) {
	t.Run("postgres", func(t *testing.T) { test(t, pgtest.Store(t)) })
	t.Run("sqlite", func(t *testing.T) { test(t, sqliteStore(t)) })
}

func sqliteStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "console.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// engine is a store's driver: the engine's side, through which the tests
// write what the console shows (claims, settles, deliveries, heartbeats,
// the inbox's steps).
type engine interface {
	store.Outbox
	store.Endpoints
	store.Presence
	inboxWriter
}

// driverOf is s's driver.
func driverOf(t *testing.T, s console.Store) engine {
	t.Helper()
	switch s := s.(type) {
	case *postgres.Store:
		return s.Driver()
	case *sqlite.Store:
		return s.Driver()
	}
	t.Fatalf("store %T", s)
	return nil
}

// inboxWriter is the part of the inbox stores the tests write with.
type inboxWriter interface {
	InboxClaim(ctx context.Context, p *store.InboxClaimParams) (store.InboxResult, error)
	InboxFail(ctx context.Context, p *store.InboxFailParams) (store.InboxResult, error)
}

// claimInbox writes a pending inbox row; with errText, makes it failed.
func claimInbox(t *testing.T, s console.Store, id uuid.UUID, errText string) {
	t.Helper()
	w := driverOf(t, s)
	if _, err := w.InboxClaim(ctxFor(t), &store.InboxClaimParams{Event: store.InboxEvent{ID: id, EventType: "order.paid"}, Owner: "w", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if errText == "" {
		return
	}
	if _, err := w.InboxFail(ctxFor(t), &store.InboxFailParams{ID: id, Owner: "w", Error: errText}); err != nil {
		t.Fatal(err)
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// failEvents writes events and dead-letters them, each with its error;
// it returns their ids.
func failEvents(t *testing.T, s console.Store, events []postbox.Event, errs []string) []uuid.UUID {
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
	failures := make([]store.Failure, len(events))
	ids := make([]uuid.UUID, len(events))
	for i, e := range events {
		failures[i] = store.Failure{ID: e.ID, LastError: errs[i]}
		ids[i] = e.ID
	}
	if err := o.Settle(ctx, store.SettleParams{Owner: "test", Failed: failures}); err != nil {
		t.Fatal(err)
	}
	return ids
}

func orderEvent(n int) postbox.Event {
	return postbox.Event{
		ID: postbox.NewID(), AggregateType: "order", AggregateID: fmt.Sprint(n), EventType: "order.paid",
		Payload: fmt.Appendf(nil, `{"order_id": %d}`, n), DedupKey: fmt.Sprintf("order.paid:%d", n),
	}
}

// client is a browser-like client of one console: cookies, no redirects
// followed.
type client struct {
	t    *testing.T
	base string
	http *http.Client
}

func serve(t *testing.T, cfg console.Config) *client {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testlog.Discard()
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: srv.URL, http: &http.Client{
		Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// do sends a request and returns the response with its body read.
func (c *client) do(req *http.Request) (*http.Response, string) {
	c.t.Helper()
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return res, string(body)
}

func (c *client) get(path string) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	return c.do(req)
}

func (c *client) post(path string, form url.Values) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf reads the CSRF token of a page's forms.
func (c *client) csrf(path string) string {
	c.t.Helper()
	_, body := c.get(path)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		c.t.Fatalf("no CSRF token on %s", path)
	}
	return m[1]
}

func wantStatus(t *testing.T, res *http.Response, body string, want int) {
	t.Helper()
	if res.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d; body:\n%s", res.Request.Method, res.Request.URL.Path, res.StatusCode, want, body)
	}
}

func status(t *testing.T, s console.Store, id uuid.UUID) string {
	t.Helper()
	r, err := s.Get(ctxFor(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

func TestOverviewShowsCountsTypesAndRelays(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		failEvents(t, s, []postbox.Event{orderEvent(1), orderEvent(2)}, []string{"status 503", "status 410"})
		o := driverOf(t, s)
		pending := orderEvent(3)
		pending.EventType = "order.shipped"
		if err := o.Enqueue(ctxFor(t), pending, orderEvent(4)); err != nil {
			t.Fatal(err)
		}
		if _, err := o.Claim(ctxFor(t), store.ClaimParams{Owner: "relay-on-host-7", Limit: 1, Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		ps := driverOf(t, s)
		down := store.RelayPresence{ID: "relay-on-host-8", Mode: "listening", Sink: "webhook https://partner.example",
			HeartbeatEvery: time.Minute, SinkDownSince: time.Now().Add(-time.Minute), SinkError: "connection refused"}
		if err := ps.PresenceBeat(ctxFor(t), down); err != nil {
			t.Fatal(err)
		}
		c := serve(t, console.Config{Store: s})
		res, body := c.get("/")
		wantStatus(t, res, body, http.StatusOK)
		for _, want := range []string{
			`id="count-failed">2<`, `id="count-pending">1<`, `id="count-processing">1<`,
			`<td>order.paid</td>`, `<td>order.shipped</td>`, `relay-on-host-7`, `<svg class="chart"`, `data-refresh="5"`,
			`id="sink-down">Sink down: relay relay-on-host-8 finds webhook https://partner.example unreachable`,
			`connection refused`, `<td>listening</td>`, `sink down since`, `no presence row`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("overview lacks %q", want)
			}
		}
		h := res.Header
		for name, want := range map[string]string{
			"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
		} {
			if h.Get(name) != want {
				t.Errorf("header %s: %q, want %q", name, h.Get(name), want)
			}
		}
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "default-src 'none'"} {
			if !strings.Contains(csp, want) || strings.Contains(csp, "unsafe-inline") {
				t.Errorf("Content-Security-Policy %q: want %q and no unsafe-inline", csp, want)
			}
		}
		if res, body := c.get("/static/console.js"); res.StatusCode != http.StatusOK || !strings.Contains(body, "startRefresh") {
			t.Fatalf("console.js: %d", res.StatusCode)
		}
	})
}

func TestFailedPagesFiltersAndKeysetPagination(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		var events []postbox.Event
		var errs []string
		for i := range 5 {
			events = append(events, orderEvent(i))
			errs = append(errs, fmt.Sprintf("status %d from the receiver", 500+i))
		}
		ids := failEvents(t, s, events, errs)
		c := serve(t, console.Config{Store: s, PageSize: 2})
		seen := map[string]bool{}
		path := "/failed"
		for pages := 0; path != ""; pages++ {
			if pages > 3 {
				t.Fatal("more than 3 pages of 2 for 5 events")
			}
			res, body := c.get(path)
			wantStatus(t, res, body, http.StatusOK)
			for _, m := range regexp.MustCompile(`<tr data-id="([0-9a-f-]+)"`).FindAllStringSubmatch(body, -1) {
				if seen[m[1]] {
					t.Fatalf("event %s on two pages", m[1])
				}
				seen[m[1]] = true
			}
			path = ""
			if m := regexp.MustCompile(`href="(/failed\?[^"]*after=[^"]+)" id="next-page"`).FindStringSubmatch(body); m != nil {
				path = strings.ReplaceAll(m[1], "&amp;", "&")
			}
		}
		if len(seen) != 5 {
			t.Fatalf("pages showed %d events, want 5", len(seen))
		}
		res, body := c.get("/failed?error=" + url.QueryEscape("status 503"))
		wantStatus(t, res, body, http.StatusOK)
		if !strings.Contains(body, ids[3].String()) || strings.Count(body, `<tr data-id=`) != 1 {
			t.Fatalf("filter by error text: want only %s", ids[3])
		}
		if _, body := c.get("/failed?aggregate_type=order&aggregate_id=2"); !strings.Contains(body, ids[2].String()) || strings.Count(body, `<tr data-id=`) != 1 {
			t.Fatalf("filter by aggregate: want only %s", ids[2])
		}
		if _, body := c.get("/failed?older=1h"); !strings.Contains(body, `id="no-failed"`) {
			t.Fatal("filter failed more than 1h ago: want none")
		}
		res, body = c.get("/failed?older=yesterday")
		wantStatus(t, res, body, http.StatusBadRequest)
		if !strings.Contains(body, `id="bad-input"`) {
			t.Fatal("a bad age: no error shown")
		}
	})
}

func TestActionsNeedCSRFAndConfirmation(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		ids := failEvents(t, s, []postbox.Event{orderEvent(1), orderEvent(2), orderEvent(3)}, []string{"a", "b", "c"})
		c := serve(t, console.Config{Store: s})
		res, body := c.post("/failed/action", url.Values{"action": {"retry"}, "id": {ids[0].String()}, "confirm": {"1"}})
		wantStatus(t, res, body, http.StatusForbidden)
		res, body = c.post("/failed/action", url.Values{"action": {"retry"}, "id": {ids[0].String()}, "confirm": {"1"}, "csrf": {strings.Repeat("ab", 32)}})
		wantStatus(t, res, body, http.StatusForbidden)
		if got := status(t, s, ids[0]); got != store.StatusFailed {
			t.Fatalf("after POSTs without the CSRF token: status %q", got)
		}
		token := c.csrf("/failed")
		form := url.Values{"action": {"retry"}, "id": {ids[0].String()}, "csrf": {token}}
		// Another site's form carries its own Origin.
		req, _ := http.NewRequest(http.MethodPost, c.base+"/failed/action", strings.NewReader(url.Values{
			"action": {"retry"}, "id": {ids[0].String()}, "csrf": {token}, "confirm": {"1"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://evil.example")
		res, body = c.do(req)
		wantStatus(t, res, body, http.StatusForbidden)
		res, body = c.post("/failed/action", form)
		wantStatus(t, res, body, http.StatusOK)
		if !strings.Contains(body, `id="confirm-button"`) || status(t, s, ids[0]) != store.StatusFailed {
			t.Fatal("a retry without confirmation: want the confirmation page and nothing done")
		}
		form.Set("confirm", "1")
		res, body = c.post("/failed/action", form)
		wantStatus(t, res, body, http.StatusSeeOther)
		if got := status(t, s, ids[0]); got != store.StatusPending {
			t.Fatalf("retried event: status %q, want pending", got)
		}
		if loc := res.Header.Get("Location"); !strings.Contains(loc, "done=retry") || !strings.Contains(loc, "n=1") {
			t.Fatalf("after the retry: redirect to %q", loc)
		}
		// Purge every failed event whose error contains "b".
		res, body = c.post("/failed/action", url.Values{"action": {"purge"}, "all": {"1"}, "error": {"b"}, "csrf": {token}, "confirm": {"1"}})
		wantStatus(t, res, body, http.StatusSeeOther)
		if _, err := s.Get(ctxFor(t), ids[1]); err == nil {
			t.Fatal("purged event still there")
		}
		if got := status(t, s, ids[2]); got != store.StatusFailed {
			t.Fatalf("event outside the filter: status %q", got)
		}
		if _, body := c.get(res.Header.Get("Location")); !strings.Contains(body, "Purged 1 failed event.") {
			t.Fatal("no notice after the purge")
		}
	})
}

func TestReadOnlyHidesAndRefusesActions(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		ids := failEvents(t, s, []postbox.Event{orderEvent(1)}, []string{"status 500"})
		// With a token: the logout form carries a valid CSRF token, so the
		// refusal below is the read-only one.
		const token = "a-token-of-enough-length"
		c := serve(t, console.Config{Store: s, ReadOnly: true, Token: token})
		res, body := c.post("/login", url.Values{"token": {token}, "csrf": {c.csrf("/login")}})
		wantStatus(t, res, body, http.StatusSeeOther)
		for _, path := range []string{"/", "/failed", "/failed?type=order.paid&error=500", "/events/" + ids[0].String()} {
			res, body := c.get(path)
			wantStatus(t, res, body, http.StatusOK)
			if strings.Contains(body, `action="/failed/action"`) || strings.Contains(body, "Retry") || strings.Contains(body, "Purge") {
				t.Fatalf("read-only %s shows an action", path)
			}
			if !strings.Contains(body, `id="read-only"`) {
				t.Fatalf("read-only %s does not say so", path)
			}
		}
		res, body = c.post("/failed/action", url.Values{"action": {"retry"}, "id": {ids[0].String()}, "csrf": {c.csrf("/failed")}, "confirm": {"1"}})
		wantStatus(t, res, body, http.StatusForbidden)
		if !strings.Contains(body, "read-only") {
			t.Fatalf("refusal does not say read-only: %s", body)
		}
		// Nor does it count for a confirmation.
		res, body = c.post("/failed/action", url.Values{"action": {"purge"}, "all": {"1"}, "csrf": {c.csrf("/failed")}})
		wantStatus(t, res, body, http.StatusForbidden)
		if got := status(t, s, ids[0]); got != store.StatusFailed {
			t.Fatalf("read-only retry changed the event: %q", got)
		}
	})
}

// xssPayload and xssError would run script if a page inserted them as
// markup.
const (
	xssPayload = `{"note": "<script>alert('payload')</script>", "name": "\"><img src=x onerror=alert('attr')>"}`
	xssError   = `status 500: <img src=x onerror=alert('error')><script>alert('error')</script>`
)

func TestPayloadsAndErrorsAreText(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		e := orderEvent(1)
		e.Payload = []byte(xssPayload)
		e.EventType = `order.<b>paid</b>`
		e.Headers = map[string]string{"x-note": `"><script>alert('header')</script>`}
		ids := failEvents(t, s, []postbox.Event{e}, []string{xssError})
		c := serve(t, console.Config{Store: s})
		for _, path := range []string{"/", "/failed", "/events/" + ids[0].String(), "/search?q=" + url.QueryEscape(`"><script>alert(1)</script>`)} {
			_, body := c.get(path)
			for _, bad := range []string{"<script>alert", "<img src=x", "<b>paid</b>"} {
				if strings.Contains(body, bad) {
					t.Fatalf("%s holds %q as markup", path, bad)
				}
			}
		}
		_, body := c.get("/events/" + ids[0].String())
		for _, want := range []string{"&lt;script&gt;alert(", "&lt;img src=x onerror=alert(", "&#34;note&#34;: "} {
			if !strings.Contains(body, want) {
				t.Fatalf("event page lacks the escaped text %q:\n%s", want, body)
			}
		}
	})
}

func TestTokenLoginAndBearer(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	const token = "a-token-of-enough-length"
	c := serve(t, console.Config{Store: s, Token: token})
	res, body := c.get("/failed")
	wantStatus(t, res, body, http.StatusUnauthorized)
	if !strings.Contains(body, `id="login"`) || res.Header.Get("WWW-Authenticate") == "" {
		t.Fatal("401 without the login form or WWW-Authenticate")
	}
	req, _ := http.NewRequest(http.MethodGet, c.base+"/", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, body = c.do(req)
	wantStatus(t, res, body, http.StatusOK)
	req.Header.Set("Authorization", "Bearer "+token+"x")
	res, body = c.do(req)
	wantStatus(t, res, body, http.StatusUnauthorized)

	csrf := c.csrf("/login")
	res, body = c.post("/login", url.Values{"token": {token}, "next": {"/failed"}})
	wantStatus(t, res, body, http.StatusForbidden) // no CSRF token
	res, body = c.post("/login", url.Values{"token": {"wrong-token-wrong-token"}, "csrf": {csrf}})
	wantStatus(t, res, body, http.StatusUnauthorized)
	res, body = c.post("/login", url.Values{"token": {token}, "csrf": {csrf}, "next": {"//evil.example/"}})
	wantStatus(t, res, body, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/" {
		t.Fatalf("login redirects to %q, want / (never another site)", loc)
	}
	setCookie := res.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(setCookie, want) {
			t.Fatalf("session cookie %q lacks %s", setCookie, want)
		}
	}
	if strings.Contains(setCookie, token) {
		t.Fatal("the session cookie holds the token itself")
	}
	res, body = c.get("/failed")
	wantStatus(t, res, body, http.StatusOK)
	if strings.Contains(body, token) {
		t.Fatal("a page shows the token")
	}
	// The CSRF token of the session is not the anonymous one.
	res, body = c.post("/logout", url.Values{"csrf": {csrf}})
	wantStatus(t, res, body, http.StatusForbidden)
	res, body = c.post("/logout", url.Values{"csrf": {c.csrf("/failed")}})
	wantStatus(t, res, body, http.StatusSeeOther)
	res, body = c.get("/failed")
	wantStatus(t, res, body, http.StatusUnauthorized)

	if _, err := console.New(console.Config{Store: s, Token: "short"}); err == nil {
		t.Fatal("a 5-byte token was accepted")
	}
}

func TestWithoutTokenOnlyLoopbackHostsAreServed(t *testing.T) {
	t.Parallel()
	c := serve(t, console.Config{Store: sqliteStore(t)})
	req, _ := http.NewRequest(http.MethodGet, c.base+"/", nil)
	req.Host = "rebound.example:8080"
	res, body := c.do(req)
	wantStatus(t, res, body, http.StatusForbidden)
	req.Host = "localhost:8080"
	res, body = c.do(req)
	wantStatus(t, res, body, http.StatusOK)
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8080", "", true},
		{"[::1]:8080", "", true},
		{"localhost:8080", "", true},
		{"127.0.0.2:0", "", true},
		{":8080", "", false},
		{"0.0.0.0:8080", "", false},
		{"10.1.2.3:8080", "", false},
		{"console.example:8080", "", false},
		{"0.0.0.0:8080", "a-token-of-enough-length", true},
		{"no-port", "", false},
	} {
		if err := console.CheckAddr(tc.addr, tc.token); (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q, token %v): %v, want ok %v", tc.addr, tc.token != "", err, tc.ok)
		}
	}
}

func TestSearchByIDAndDedupKey(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		e := orderEvent(7)
		ids := failEvents(t, s, []postbox.Event{e}, []string{"x"})
		inboxID := uuid.New()
		claimInbox(t, s, inboxID, "")
		c := serve(t, console.Config{Store: s})
		for q, want := range map[string]string{
			ids[0].String():  "/events/" + ids[0].String(),
			e.DedupKey:       "/events/" + ids[0].String(),
			inboxID.String(): "/inbox/" + inboxID.String(),
		} {
			res, body := c.get("/search?q=" + url.QueryEscape(q))
			wantStatus(t, res, body, http.StatusSeeOther)
			if loc := res.Header.Get("Location"); loc != want {
				t.Fatalf("search %q: to %q, want %q", q, loc, want)
			}
		}
		res, body := c.get("/search?q=nothing-like-it")
		wantStatus(t, res, body, http.StatusNotFound)
	})
}

func TestInboxShowsFailedRowsWithTheHandlersError(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		failed, pending := uuid.New(), uuid.New()
		claimInbox(t, s, failed, "handler: <i>insufficient stock</i> for order 42")
		claimInbox(t, s, pending, "")
		c := serve(t, console.Config{Store: s})
		res, body := c.get("/inbox")
		wantStatus(t, res, body, http.StatusOK)
		if !strings.Contains(body, failed.String()) || strings.Contains(body, pending.String()) ||
			!strings.Contains(body, "handler: &lt;i&gt;insufficient stock&lt;/i&gt; for order 42") {
			t.Fatalf("inbox page (failed): want the failed row with its error as text:\n%s", body)
		}
		if _, body := c.get("/inbox?status=pending"); !strings.Contains(body, pending.String()) {
			t.Fatal("inbox page (pending): the pending row is missing")
		}
		res, body = c.get("/inbox/" + failed.String())
		wantStatus(t, res, body, http.StatusOK)
		res, body = c.get("/inbox?status=gone")
		wantStatus(t, res, body, http.StatusBadRequest)
	})
}

var confirmTitle = regexp.MustCompile(`<h1 id="confirm-title">([^<]*)</h1>`)

// The confirmation says how many failed events the action moves: those
// the filters select, or those ticked; none left, it offers no button.
func TestConfirmationSaysHowMany(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		ids := failEvents(t, s, []postbox.Event{orderEvent(1), orderEvent(2), orderEvent(3)}, []string{"status 503", "status 503", "status 410"})
		c := serve(t, console.Config{Store: s})
		csrf := c.csrf("/failed")
		for _, tc := range []struct {
			form url.Values
			want string
		}{
			{url.Values{"action": {"retry"}, "all": {"1"}}, "Retry 3 failed events?"},
			{url.Values{"action": {"retry"}, "all": {"1"}, "error": {"503"}}, "Retry 2 failed events?"},
			{url.Values{"action": {"purge"}, "all": {"1"}, "error": {"410"}}, "Purge 1 failed event?"},
			{url.Values{"action": {"purge"}, "id": {ids[0].String(), ids[1].String(), ids[0].String()}}, "Purge 2 failed events?"},
			{url.Values{"action": {"retry"}, "all": {"1"}, "error": {"no such error"}}, "Retry 0 failed events?"},
		} {
			tc.form.Set("csrf", csrf)
			res, body := c.post("/failed/action", tc.form)
			wantStatus(t, res, body, http.StatusOK)
			m := confirmTitle.FindStringSubmatch(body)
			if m == nil || m[1] != tc.want {
				t.Fatalf("confirmation of %v: title %q, want %q", tc.form, m, tc.want)
			}
			if strings.HasPrefix(tc.want, "Retry 0") == strings.Contains(body, `id="confirm-button"`) {
				t.Fatalf("confirmation of %v: a button iff there is something to do", tc.form)
			}
		}
		for _, id := range ids {
			if got := status(t, s, id); got != store.StatusFailed {
				t.Fatalf("a confirmation changed event %s: %q", id, got)
			}
		}
	})
}
