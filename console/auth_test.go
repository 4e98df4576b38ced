package console_test

import (
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
)

const testToken = "a-token-of-enough-length"

// clock is a console's injectable clock: the tests move it instead of
// sleeping.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// loginAs posts the login form with token as the client at addr (sent as
// X-Forwarded-For; believed only behind a trusted proxy).
func (c *client) loginAs(addr, token string) (*http.Response, string) {
	c.t.Helper()
	csrf := c.csrf("/login")
	req, _ := http.NewRequest(http.MethodPost, c.base+"/login", strings.NewReader(url.Values{"token": {token}, "csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if addr != "" {
		req.Header.Set("X-Forwarded-For", addr)
	}
	return c.do(req)
}

// retryAfter reads a 429's Retry-After, in seconds.
func retryAfter(t *testing.T, res *http.Response, body string) time.Duration {
	t.Helper()
	wantStatus(t, res, body, http.StatusTooManyRequests)
	n, err := strconv.Atoi(res.Header.Get("Retry-After"))
	if err != nil || n <= 0 {
		t.Fatalf("429 with Retry-After %q: want a positive number of seconds", res.Header.Get("Retry-After"))
	}
	return time.Duration(n) * time.Second
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// Wrong logins from one client back it off (429 with a Retry-After that
// grows), without checking the token meanwhile; other clients are not
// affected; after the back-off the right token logs in. One WARN line per
// back-off step, none for the refused attempts.
func TestLoginFailuresBackOffPerClient(t *testing.T) {
	t.Parallel()
	clk := newClock()
	logs := &logbuf.Buffer{}
	c := serve(t, console.Config{Store: sqliteStore(t), Token: testToken, Now: clk.Now, TrustedProxies: loopback,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	const attacker, other = "203.0.113.7", "198.51.100.20"
	for i := range console.LoginFreeFailures {
		res, body := c.loginAs(attacker, "wrong-token-wrong-token")
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong login %d: %d, want 401 (the first %d are free)", i+1, res.StatusCode, console.LoginFreeFailures)
		}
		_ = body
	}
	res, body := c.loginAs(attacker, "wrong-token-wrong-token")
	first := retryAfter(t, res, body)
	// Blocked: even the right token is refused until the back-off ends,
	// and a hundred more attempts are neither checked nor logged.
	for range 100 {
		res, body = c.loginAs(attacker, testToken)
		retryAfter(t, res, body)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 2 {
		t.Fatalf("%d WARN lines, want 2 (the first failure, the first back-off):\n%s", n, logs)
	}
	// Another client logs in meanwhile.
	res, body = c.loginAs(other, testToken)
	wantStatus(t, res, body, http.StatusSeeOther)
	// The next failure after the back-off doubles it.
	clk.advance(first)
	res, body = c.loginAs(attacker, "wrong-token-wrong-token")
	if second := retryAfter(t, res, body); second != 2*first {
		t.Fatalf("second back-off %v, want %v", second, 2*first)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 3 {
		t.Fatalf("%d WARN lines, want 3:\n%s", n, logs)
	}
	clk.advance(2 * first)
	jar, _ := cookiejar.New(nil)
	c.http.Jar = jar // a fresh browser
	res, body = c.loginAs(attacker, testToken)
	wantStatus(t, res, body, http.StatusSeeOther)
	res, body = c.get("/failed")
	wantStatus(t, res, body, http.StatusOK)
	if strings.Contains(logs.String(), testToken) {
		t.Fatal("the log shows the token")
	}
}

// A wrong bearer token counts as a failed login: guessing through the
// Authorization header backs off too.
func TestBearerFailuresBackOff(t *testing.T) {
	t.Parallel()
	c := serve(t, console.Config{Store: sqliteStore(t), Token: testToken, Now: newClock().Now})
	bearer := func(token string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, c.base+"/", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		return c.do(req)
	}
	for range console.LoginFreeFailures {
		res, body := bearer("wrong-token-wrong-token")
		wantStatus(t, res, body, http.StatusUnauthorized)
	}
	res, body := bearer("wrong-token-wrong-token")
	retryAfter(t, res, body)
	res, body = bearer(testToken)
	retryAfter(t, res, body)
}

// X-Forwarded-For from a client that is not a trusted proxy is not
// believed: changing it does not escape the back-off.
func TestForwardedForOfUntrustedPeerIsIgnored(t *testing.T) {
	t.Parallel()
	c := serve(t, console.Config{Store: sqliteStore(t), Token: testToken, Now: newClock().Now})
	for i := range console.LoginFreeFailures {
		res, body := c.loginAs("192.0.2."+strconv.Itoa(i+1), "wrong-token-wrong-token")
		wantStatus(t, res, body, http.StatusUnauthorized)
	}
	res, body := c.loginAs("192.0.2.200", "wrong-token-wrong-token")
	retryAfter(t, res, body)
}

// loggedIn is a client of a console with a token, logged in.
func loggedIn(t *testing.T, cfg console.Config) *client {
	t.Helper()
	cfg.Token = testToken
	c := serve(t, cfg)
	res, body := c.loginAs("", testToken)
	wantStatus(t, res, body, http.StatusSeeOther)
	return c
}

// sessionCookie is the client's session cookie.
func (c *client) sessionCookie() *http.Cookie {
	c.t.Helper()
	u, _ := url.Parse(c.base)
	for _, ck := range c.http.Jar.Cookies(u) {
		if ck.Name == "postbox_console" {
			return ck
		}
	}
	c.t.Fatal("no session cookie")
	return nil
}

// replay sends a GET with the cookie and nothing else.
func (c *client) replay(path string, ck *http.Cookie) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	req.AddCookie(ck)
	res, err := (&http.Client{CheckRedirect: c.http.CheckRedirect}).Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// Logout revokes the session on the server: the cookie replayed after
// logout is refused.
func TestLogoutRevokesTheSession(t *testing.T) {
	t.Parallel()
	c := loggedIn(t, console.Config{Store: sqliteStore(t)})
	ck := c.sessionCookie()
	if res := c.replay("/failed", ck); res.StatusCode != http.StatusOK {
		t.Fatalf("the session cookie before logout: %d, want 200", res.StatusCode)
	}
	res, body := c.post("/logout", url.Values{"csrf": {c.csrf("/failed")}})
	wantStatus(t, res, body, http.StatusSeeOther)
	if res := c.replay("/failed", ck); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the session cookie replayed after logout: %d, want 401", res.StatusCode)
	}
}

// A session ends after SessionIdle without a request, and after
// SessionMax whatever its use; the page's own refreshes (X-Refresh) do not
// keep it alive.
func TestSessionsExpire(t *testing.T) {
	t.Parallel()
	clk := newClock()
	cfg := console.Config{Store: sqliteStore(t), Now: clk.Now, SessionIdle: 10 * time.Minute, SessionMax: time.Hour}
	c := loggedIn(t, cfg)
	ck := c.sessionCookie()
	if ck.MaxAge != 0 && ck.MaxAge > 3600 {
		t.Fatalf("cookie Max-Age %d outlives the session", ck.MaxAge)
	}
	// Used every 9 minutes: alive until the absolute lifetime.
	for range 6 {
		clk.advance(9 * time.Minute)
		if res := c.replay("/", ck); res.StatusCode != http.StatusOK {
			t.Fatalf("after %v of use: %d, want 200", clk.Now().Sub(newClock().Now()), res.StatusCode)
		}
	}
	clk.advance(7 * time.Minute) // 61 minutes after the login
	if res := c.replay("/", ck); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after the absolute lifetime: %d, want 401", res.StatusCode)
	}

	// Idle: 9 minutes of the overview refreshing itself, then 2 more.
	c = loggedIn(t, cfg)
	ck = c.sessionCookie()
	clk.advance(5 * time.Minute)
	req, _ := http.NewRequest(http.MethodGet, c.base+"/", nil)
	req.Header.Set("X-Refresh", "1")
	req.AddCookie(ck)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("a refresh within the idle time: %d", res.StatusCode)
	}
	clk.advance(6 * time.Minute)
	if res := c.replay("/", ck); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after 11 idle minutes (a refresh between): %d, want 401", res.StatusCode)
	}
}

// A new console (a restart) knows no session of the old one.
func TestSessionsDoNotSurviveARestart(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	old := loggedIn(t, console.Config{Store: s})
	ck := old.sessionCookie()
	fresh := serve(t, console.Config{Store: s, Token: testToken})
	if res := fresh.replay("/", ck); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the old console's session on a new one: %d, want 401", res.StatusCode)
	}
}

// The session cookie is Secure when the request came over TLS through a
// trusted proxy (X-Forwarded-Proto: https), and not when an untrusted
// client says so.
func TestSecureCookieBehindTrustedProxyOnly(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		proto   string
		secure  bool
	}{
		{"trusted proxy, https", loopback, "https", true},
		{"trusted proxy, http", loopback, "http", false},
		{"untrusted peer, https", nil, "https", false},
		{"untrusted peer (another range), https", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, "https", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, console.Config{Store: s, Token: testToken, TrustedProxies: tc.trusted})
			csrf := c.csrf("/login")
			req, _ := http.NewRequest(http.MethodPost, c.base+"/login", strings.NewReader(url.Values{"token": {testToken}, "csrf": {csrf}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Forwarded-Proto", tc.proto)
			res, body := c.do(req)
			wantStatus(t, res, body, http.StatusSeeOther)
			var session *http.Cookie
			for _, ck := range res.Cookies() {
				if ck.Name == "postbox_console" {
					session = ck
				}
			}
			if session == nil {
				t.Fatal("no session cookie")
			}
			if session.Secure != tc.secure {
				t.Fatalf("Secure %v, want %v (Set-Cookie %q)", session.Secure, tc.secure, res.Header.Get("Set-Cookie"))
			}
		})
	}
}

// The login page says nothing about the deployment: no store, no
// database host or name, no read-only badge.
func TestLoginPageShowsNothingOfTheDeployment(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	c := serve(t, console.Config{Store: s, Token: testToken, ReadOnly: true})
	for _, path := range []string{"/login", "/", "/failed"} {
		_, body := c.get(path)
		if !strings.Contains(body, `id="login"`) {
			t.Fatalf("%s: no login form", path)
		}
		for _, secret := range []string{s.String(), "console.db", "sqlite", `id="read-only"`} {
			if strings.Contains(body, secret) {
				t.Fatalf("%s before login shows %q", path, secret)
			}
		}
	}
	c = loggedIn(t, console.Config{Store: s})
	if _, body := c.get("/"); !strings.Contains(body, "console.db") {
		t.Fatal("after login the header does not name the store")
	}
}
