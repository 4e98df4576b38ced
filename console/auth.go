package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// sessionCookie is the cookie the login form sets: a random session id,
// never the token.
const sessionCookie = "postbox_console"

// CheckAddr refuses to serve a console without a token on an address other
// hosts may reach: only a loopback address ("127.0.0.1:8080", "[::1]:8080",
// "localhost:8080") may go without one. An empty host (":8080") listens
// on every interface.
func CheckAddr(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("console: address %q: %w", addr, err)
	}
	if token != "" || isLoopbackHost(host) {
		return nil
	}
	return fmt.Errorf("console: %q is not a loopback address: other hosts could reach the console, so it needs a token (--token or --token-file)", addr)
}

// isLoopbackHost reports whether host (no port) names the loopback
// interface: "localhost" or a loopback IP.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.Unmap().IsLoopback()
}

// hostAllowed: without a token the console answers only requests
// addressed to a loopback host, so a web page that rebinds its own name to
// 127.0.0.1 (DNS rebinding) cannot read it.
func (c *Console) hostAllowed(r *http.Request) bool {
	if c.cfg.Token != "" {
		return true
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	return isLoopbackHost(host)
}

// now is the console's clock.
func (c *Console) now() time.Time {
	if c.cfg.Now != nil {
		return c.cfg.Now()
	}
	return time.Now()
}

// requireAuth lets through a request with the token (a bearer header, or
// the cookie of a live session), answers 429 to a client backing off after
// wrong tokens, and 401 with the login page to the others.
func (c *Console) requireAuth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.Token == "" {
			next(w, r)
			return
		}
		if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			switch right, wait := c.guess(r, bearer); {
			case right:
				next(w, r)
			case wait > 0:
				c.tooMany(w, r, wait, "/")
			default:
				c.askLogin(w, r)
			}
			return
		}
		// The overview's own refreshes (X-Refresh) do not count as use:
		// an open tab does not keep an idle session alive.
		if ck, err := r.Cookie(sessionCookie); err == nil && c.sessions.valid(ck.Value, c.now(), r.Header.Get("X-Refresh") == "") {
			next(w, r)
			return
		}
		c.askLogin(w, r)
	}
}

// askLogin answers 401 with the login page.
func (c *Console) askLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="postbox console"`)
	c.render(w, r, http.StatusUnauthorized, "login", loginPage{Next: r.URL.RequestURI()})
}

// guess checks a token the client sent (the login form's, a bearer
// header's) under the login limiter. While the client backs off, it
// reports the wait without looking at the token; a wrong token counts
// against the client, and the failure that starts a back-off reports the
// wait too. The caller answers 429 when wait is positive.
func (c *Console) guess(r *http.Request, token string) (right bool, wait time.Duration) {
	client, now := c.clientAddr(r), c.now()
	if wait := c.limiter.wait(client, now); wait > 0 {
		return false, wait
	}
	if sameSecret(token, c.cfg.Token) {
		c.limiter.forget(client)
		return true, 0
	}
	step := c.limiter.fail(client, now)
	if step.Failures == 1 || step.Wait > 0 {
		// One line per client and back-off step, never one per attempt.
		who := client.String()
		if step.Shared {
			who = "any client new to a full table"
		}
		c.log.Warn("console: wrong token", "client", who, "failures", step.Failures, "backoff", step.Wait)
	}
	return false, step.Wait
}

// tooMany answers 429 with Retry-After (whole seconds, rounded up), and
// the login page saying how long to wait.
func (c *Console) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, next string) {
	secs := int64((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	c.render(w, r, http.StatusTooManyRequests, "login", loginPage{Next: next, Wait: time.Duration(secs) * time.Second})
}

// sameSecret compares a and b in constant time (their hashes, so that the
// length does not show either).
func sameSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// csrfToken is the token the forms of r's session carry: a MAC of the
// session cookie (empty without one), under the console's secret.
func (c *Console) csrfToken(r *http.Request) string {
	session := ""
	if ck, err := r.Cookie(sessionCookie); err == nil {
		session = ck.Value
	}
	return hex.EncodeToString(c.mac("csrf", session))
}

// csrfValid checks the form's CSRF token, and the Origin header when the
// browser sends one (it must be this console's).
func (c *Console) csrfValid(r *http.Request) bool {
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	got, err := hex.DecodeString(r.PostFormValue("csrf"))
	if err != nil {
		return false
	}
	want, _ := hex.DecodeString(c.csrfToken(r))
	return hmac.Equal(got, want)
}

// action guards a POST that changes the outbox: the token, the CSRF token,
// and not read-only.
func (c *Console) action(next http.HandlerFunc) http.HandlerFunc {
	return c.requireAuth(func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.ReadOnly {
			http.Error(w, "console: read-only: actions are off", http.StatusForbidden)
			return
		}
		if c.formValid(w, r) {
			next(w, r)
		}
	})
}

// form guards a POST of the console that changes no event (logout): the
// token and the CSRF token.
func (c *Console) form(next http.HandlerFunc) http.HandlerFunc {
	return c.requireAuth(func(w http.ResponseWriter, r *http.Request) {
		if c.formValid(w, r) {
			next(w, r)
		}
	})
}

// formValid bounds the form's size and checks its CSRF token; it answers
// 403 and reports false when the token is missing or wrong.
func (c *Console) formValid(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if !c.csrfValid(r) {
		http.Error(w, "console: missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
		return false
	}
	return true
}

// maxFormBytes bounds a form: 10,000 event ids fit.
const maxFormBytes = 1 << 20

type loginPage struct {
	Next  string
	Wrong bool
	// Wait is how long the client must wait before it tries again.
	Wait time.Duration
}

// login checks the token of the login form and starts a session.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.formValid(w, r) {
		return
	}
	next := r.PostFormValue("next")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		next = "/"
	}
	if c.cfg.Token == "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if right, wait := c.guess(r, r.PostFormValue("token")); !right {
		if wait > 0 {
			c.tooMany(w, r, wait, next)
		} else {
			c.render(w, r, http.StatusUnauthorized, "login", loginPage{Next: next, Wrong: true})
		}
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: c.sessions.create(c.now()), Path: "/",
		MaxAge:   int(c.cfg.SessionMax / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.overTLS(r),
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session on the server (its cookie is refused from now
// on) and clears the cookie.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.sessions.revoke(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.overTLS(r)})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
