package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/sink/webhook/guard"
)

// clientSecret is the OAuth2 client secret of the tests: no error, log
// line or String may show it. Its characters need URL-encoding in Basic
// credentials (RFC 6749 section 2.3.1).
const clientSecret = "cl13nt-S3CRET/+:&é"

// tokenRequest is what the token server received.
type tokenRequest struct {
	form   url.Values
	header http.Header
}

// tokenServer is an OAuth2 token endpoint: it records each request, then
// answers with answer (n counts its requests from 1), by default a JSON
// token "tok-<n>" of type bearer valid for an hour.
type tokenServer struct {
	*httptest.Server
	answer func(w http.ResponseWriter, r *http.Request, n int)

	mu       sync.Mutex
	requests []tokenRequest
}

func newTokenServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) *tokenServer {
	t.Helper()
	ts := &tokenServer{answer: answer}
	if ts.answer == nil {
		ts.answer = func(w http.ResponseWriter, _ *http.Request, n int) { writeToken(w, fmt.Sprintf("tok-%d", n), 3600) }
	}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("token server: %v", err)
		}
		ts.mu.Lock()
		ts.requests = append(ts.requests, tokenRequest{form: r.PostForm, header: r.Header.Clone()})
		n := len(ts.requests)
		ts.mu.Unlock()
		ts.answer(w, r, n)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) received() []tokenRequest {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]tokenRequest(nil), ts.requests...)
}

// writeToken answers a token request with token, expiring in expiresIn
// seconds (none when 0).
func writeToken(w http.ResponseWriter, token string, expiresIn int) {
	answer := map[string]any{"access_token": token, "token_type": "bearer"}
	if expiresIn != 0 {
		answer["expires_in"] = expiresIn
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(answer)
}

// oauthConfig is a sink's Config for endpoint with OAuth2 client
// credentials at the token server tokenURL.
func oauthConfig(endpoint, tokenURL string, style webhook.AuthStyle) webhook.Config {
	return webhook.Config{URL: endpoint, Auth: webhook.Auth{OAuth2: &webhook.OAuth2{
		TokenURL: tokenURL, ClientID: "postbox relay", ClientSecret: clientSecret,
		Scopes: []string{"events:write", "orders:read"}, Params: map[string][]string{"audience": {"https://api.partner.example"}},
		AuthStyle: style,
	}}}
}

// authorizations are the Authorization headers the endpoint received.
func authorizations(e *endpoint) []string {
	var got []string
	for _, r := range e.received() {
		got = append(got, strings.Join(r.header.Values("Authorization"), ", "))
	}
	return got
}

// assertNoSecret fails if err shows the client secret or a token.
func assertNoSecret(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, secret := range []string{clientSecret, url.QueryEscape(clientSecret), "cl13nt", "tok-"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error %q shows the secret or a token (%q)", err, secret)
		}
	}
}

// One token serves many deliveries, concurrent ones included; the token
// request is a client credentials grant with the scopes and parameters,
// and the client's id and secret as URL-encoded Basic credentials.
func TestOAuth2TokenIsFetchedOnceForManyDeliveries(t *testing.T) {
	tokens := newTokenServer(t, nil)
	e := newEndpoint(t, nil)
	s := newSink(t, oauthConfig(e.URL, tokens.URL+"/oauth/token", webhook.AuthStyleHeader))
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := s.Publish(context.Background(), newMessage()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, auth := range authorizations(e) {
		if auth != "Bearer tok-1" {
			t.Errorf("delivery %d: Authorization %q, want Bearer tok-1", i+1, auth)
		}
	}
	got := tokens.received()
	if len(got) != 1 {
		t.Fatalf("%d token requests for 20 deliveries, want 1", len(got))
	}
	form := got[0].form
	if form.Get("grant_type") != "client_credentials" || form.Get("scope") != "events:write orders:read" || form.Get("audience") != "https://api.partner.example" {
		t.Errorf("token request form %v", form)
	}
	if form.Has("client_id") || form.Has("client_secret") {
		t.Errorf("AuthStyleHeader sent the credentials in the form too: %v", form)
	}
	r := &http.Request{Header: got[0].header}
	user, password, ok := r.BasicAuth()
	if !ok || user != url.QueryEscape("postbox relay") || password != url.QueryEscape(clientSecret) {
		t.Errorf("token request's Basic credentials %q %q, want the URL-encoded client id and secret", user, password)
	}
	if desc := s.String(); !strings.Contains(desc, "oauth2 client credentials auth") || strings.Contains(desc, "cl13nt") {
		t.Errorf("String() = %q", desc)
	}
}

// AuthStyleParams sends the credentials in the form only; AuthStyleAuto
// tries the header, then the form when the token endpoint refuses it, and
// keeps to the form afterwards.
func TestOAuth2AuthStyles(t *testing.T) {
	t.Run("params", func(t *testing.T) {
		tokens := newTokenServer(t, nil)
		e := newEndpoint(t, nil)
		if err := newSink(t, oauthConfig(e.URL, tokens.URL, webhook.AuthStyleParams)).Publish(t.Context(), newMessage()); err != nil {
			t.Fatal(err)
		}
		got := tokens.received()[0]
		if got.form.Get("client_id") != "postbox relay" || got.form.Get("client_secret") != clientSecret || got.header.Get("Authorization") != "" {
			t.Errorf("token request form %v, Authorization %q: want the credentials in the form only", got.form, got.header.Get("Authorization"))
		}
	})
	t.Run("auto", func(t *testing.T) {
		tokens := newTokenServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if r.Header.Get("Authorization") != "" || r.PostForm.Get("client_secret") != clientSecret {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"error":"invalid_client"}`)
				return
			}
			writeToken(w, fmt.Sprintf("tok-%d", n), 3600)
		})
		// The endpoint refuses the first token, so that a second one is
		// fetched.
		e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "Bearer tok-2" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
		s := newSink(t, oauthConfig(e.URL, tokens.URL, webhook.AuthStyleAuto))
		s.Publish(t.Context(), newMessage())
		if err := s.Publish(t.Context(), newMessage()); err != nil {
			t.Fatal(err)
		}
		if got := authorizations(e); strings.Join(got, " | ") != "Bearer tok-2 | Bearer tok-3" {
			t.Errorf("Authorization %q", got)
		}
		var styles []string
		for _, r := range tokens.received() {
			style := "form"
			if r.header.Get("Authorization") != "" {
				style = "header"
			}
			styles = append(styles, style)
		}
		if strings.Join(styles, " ") != "header form form" {
			t.Errorf("token requests sent the credentials in: %v, want header, form, form", styles)
		}
	})
}

// A token about to expire (within the library's early expiry of 10s) is
// replaced before a delivery uses it; the new one, valid for an hour, is
// then kept.
func TestOAuth2TokenIsRefreshedBeforeItExpires(t *testing.T) {
	tokens := newTokenServer(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		expiresIn := 3600
		if n == 1 {
			expiresIn = 5
		}
		writeToken(w, fmt.Sprintf("tok-%d", n), expiresIn)
	})
	e := newEndpoint(t, nil)
	s := newSink(t, oauthConfig(e.URL, tokens.URL, webhook.AuthStyleHeader))
	for range 4 {
		if err := s.Publish(t.Context(), newMessage()); err != nil {
			t.Fatal(err)
		}
	}
	if got := authorizations(e); strings.Join(got, " | ") != "Bearer tok-1 | Bearer tok-2 | Bearer tok-2 | Bearer tok-2" {
		t.Errorf("Authorization %q, want tok-1, then tok-2 kept", got)
	}
	if n := len(tokens.received()); n != 2 {
		t.Errorf("%d token requests, want 2", n)
	}
}

// An endpoint answering 401 makes the next attempt fetch a fresh token:
// once, however many deliveries the old token failed at once.
func TestOAuth2TokenIsFetchedAgainAfterA401(t *testing.T) {
	tokens := newTokenServer(t, nil)
	const concurrent = 5
	var arrived sync.WaitGroup
	arrived.Add(concurrent)
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer tok-1" {
			arrived.Done()
			arrived.Wait() // every delivery holds tok-1 before any 401
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s := newSink(t, oauthConfig(e.URL, tokens.URL, webhook.AuthStyleHeader))
	var wg sync.WaitGroup
	for range concurrent {
		wg.Go(func() {
			err := s.Publish(context.Background(), newMessage())
			if kind, _, code := sink.Classify(err); err == nil || kind != sink.Rejected || code != http.StatusUnauthorized {
				t.Errorf("a refused token: %v, want a rejected 401", err)
			}
			assertNoSecret(t, err)
		})
	}
	wg.Wait()
	for range 3 {
		if err := s.Publish(t.Context(), newMessage()); err != nil {
			t.Fatal(err)
		}
	}
	got := authorizations(e)
	if strings.Join(got[concurrent:], " ") != "Bearer tok-2 Bearer tok-2 Bearer tok-2" {
		t.Errorf("Authorization after the 401s %q, want tok-2", got[concurrent:])
	}
	if n := len(tokens.received()); n != 2 {
		t.Errorf("%d token requests, want 2: one before the 401s, one after", n)
	}
}

// A token that cannot be fetched fails the attempt, retryably, saying
// "oauth2 token" and why (the token endpoint's status and error code),
// never the client secret, a token, the token endpoint's error text or
// its URL; nothing reaches the endpoint. Once the token endpoint answers,
// deliveries go on.
func TestOAuth2TokenFailuresAreRetryableWithoutSecrets(t *testing.T) {
	e := newEndpoint(t, nil)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL + "/token?key=T0KEN-URL-" + url.QueryEscape(clientSecret)
	down.Close()
	refusing := newTokenServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":"invalid_client","error_description":"client secret %s is wrong"}`, r.PostForm.Get("client_secret"))
	})
	broken := newTokenServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "panic: %s", r.Header.Get("Authorization"))
	})
	empty := newTokenServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"token_type":"bearer"}`)
	})
	forged := newTokenServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) { writeToken(w, "tok-1\r\nX-Forged: 1", 3600) })
	hanging := newTokenServer(t, func(_ http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() })
	for _, c := range []struct {
		name, tokenURL string
		style          webhook.AuthStyle
		says           []string
	}{
		{"token endpoint down", downURL, webhook.AuthStyleAuto, []string{"connection refused"}},
		{"client refused", refusing.URL, webhook.AuthStyleParams, []string{"401 Unauthorized", `"invalid_client"`}},
		{"client refused, auto", refusing.URL, webhook.AuthStyleAuto, []string{"401 Unauthorized", `"invalid_client"`}},
		{"server error", broken.URL, webhook.AuthStyleHeader, []string{"500 Internal Server Error"}},
		{"no access token", empty.URL, webhook.AuthStyleHeader, []string{"missing access_token"}},
		{"token with a line break", forged.URL, webhook.AuthStyleHeader, []string{"cannot be sent in a header"}},
		{"no answer", hanging.URL, webhook.AuthStyleHeader, []string{"Timeout"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := oauthConfig(e.URL, c.tokenURL, c.style)
			cfg.Timeout = time.Second
			err := newSink(t, cfg).Publish(t.Context(), newMessage())
			if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Retryable {
				t.Fatalf("got %v, want a retryable error", err)
			}
			for _, want := range append([]string{"oauth2 token"}, c.says...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			assertNoSecret(t, err)
			if strings.Contains(err.Error(), "T0KEN-URL") || strings.Contains(err.Error(), "is wrong") {
				t.Errorf("error %q shows the token URL or the token endpoint's text", err)
			}
			if n := len(e.received()); n != 0 {
				t.Fatalf("the endpoint got %d requests", n)
			}
		})
	}
}

// Token requests go through the sink's own client: its SSRF guard refuses
// a token endpoint at an address it does not allow, though the endpoint's
// own address is allowed.
func TestOAuth2TokenRequestsGoThroughTheGuard(t *testing.T) {
	e := newEndpoint(t, nil) // on 127.0.0.1
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	tokens := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeToken(w, "tok-1", 3600)
	}))
	tokens.Listener.Close()
	tokens.Listener = ln
	tokens.Start()
	t.Cleanup(tokens.Close)
	g, err := guard.New(guard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := oauthConfig(e.URL, tokens.URL, webhook.AuthStyleHeader)
	cfg.Client = &http.Client{Transport: g.Transport(5 * time.Second)}
	err = newSink(t, cfg).Publish(t.Context(), newMessage())
	if kind, _, _ := sink.Classify(err); !errors.Is(err, guard.ErrBlocked) || kind != sink.Retryable || !strings.Contains(err.Error(), "oauth2 token") {
		t.Fatalf("got %v, want a retryable oauth2 token error matching guard.ErrBlocked", err)
	}
	assertNoSecret(t, err)
	cfg.Client = nil // the same token endpoint, without the guard
	if err := newSink(t, cfg).Publish(t.Context(), newMessage()); err != nil {
		t.Fatal(err)
	}
}
