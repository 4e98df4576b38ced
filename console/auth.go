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
	"strings"
)

// sessionCookie is the cookie the login form sets: a MAC of the token,
// never the token itself.
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

// sessionValue is the session cookie's value: a MAC of the token.
func (c *Console) sessionValue() string {
	return hex.EncodeToString(c.mac("session", c.cfg.Token))
}

// authorized reports whether r carries the token (a bearer header or the
// session cookie); every request is authorized without a token.
func (c *Console) authorized(r *http.Request) bool {
	if c.cfg.Token == "" {
		return true
	}
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return sameSecret(bearer, c.cfg.Token)
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		return sameSecret(ck.Value, c.sessionValue())
	}
	return false
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

// requireAuth answers 401 to a request without the token: the login page
// for a browser.
func (c *Console) requireAuth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !c.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="postbox console"`)
			c.render(w, r, http.StatusUnauthorized, "login", loginPage{Next: r.URL.RequestURI()})
			return
		}
		next(w, r)
	}
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
}

// login checks the token of the login form and sets the session cookie.
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
	if !sameSecret(r.PostFormValue("token"), c.cfg.Token) {
		c.log.Warn("console: login with a wrong token", "remote", r.RemoteAddr)
		c.render(w, r, http.StatusUnauthorized, "login", loginPage{Next: next, Wrong: true})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: c.sessionValue(), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout clears the session cookie.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
