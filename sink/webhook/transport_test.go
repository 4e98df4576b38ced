package webhook_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/sink/webhook/guard"
)

func TestRedirectsAreNotFollowed(t *testing.T) {
	var followed atomic.Int32
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Add(1)
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})

	userClient := &http.Client{}
	for name, client := range map[string]*http.Client{"default client": nil, "caller's client": userClient} {
		t.Run(name, func(t *testing.T) {
			err := newSink(t, webhook.Config{URL: e.URL, Client: client}).Publish(t.Context(), newMessage())
			if kind, _, code := sink.Classify(err); err == nil || kind != sink.Rejected || code != http.StatusTemporaryRedirect {
				t.Fatalf("got %v, want rejected with status 307", err)
			}
			if followed.Load() != 0 {
				t.Fatal("the redirect was followed")
			}
		})
	}
	if userClient.CheckRedirect != nil {
		t.Error("New changed the caller's client")
	}
}

// hang blocks a handler until the request is abandoned or the test ends.
func hang(t *testing.T) func(http.ResponseWriter, *http.Request) {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}
}

func TestTimeoutBoundsTheWholeRequest(t *testing.T) {
	const timeout = 200 * time.Millisecond
	wait := hang(t)
	for name, respond := range map[string]http.HandlerFunc{
		"no answer": wait,
		"answer without its body": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusInternalServerError)
			w.(http.Flusher).Flush()
			wait(w, r)
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEndpoint(t, respond)
			s := newSink(t, webhook.Config{URL: e.URL, Timeout: timeout})
			start := time.Now()
			err := s.Publish(t.Context(), newMessage())
			elapsed := time.Since(start)
			if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Retryable {
				t.Fatalf("got %v, want a retryable error", err)
			}
			if elapsed < timeout || elapsed > timeout+time.Second {
				t.Fatalf("Publish returned after %v, want about %v", elapsed, timeout)
			}
		})
	}
}

func TestDroppedConnectionIsRetryable(t *testing.T) {
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	})
	err := newSink(t, webhook.Config{URL: e.URL}).Publish(t.Context(), newMessage())
	if kind, _, code := sink.Classify(err); err == nil || kind != sink.Retryable || code != 0 {
		t.Fatalf("got %v, want a retryable error without status", err)
	}
}

func TestRefusedConnectionIsUnavailableAndHidesTheURL(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/hooks/T0KEN-IN-PATH?token=T0KEN-IN-QUERY"
	srv.Close()
	err := newSink(t, webhook.Config{URL: url}).Publish(t.Context(), newMessage())
	if kind, _, code := sink.Classify(err); err == nil || kind != sink.Unavailable || code != 0 {
		t.Fatalf("got %v, want an unavailable error", err)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) || strings.Contains(err.Error(), "T0KEN") {
		t.Fatalf("error %q: want the dial error, without the URL", err)
	}
}

// The endpoint cannot be reached at all: every message would fail alike,
// and the relay pauses rather than count attempts (sink.Unavailable).
func TestUnreachableEndpointIsUnavailable(t *testing.T) {
	tlsEndpoint := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsEndpoint.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	tlsEndpoint.StartTLS()
	t.Cleanup(tlsEndpoint.Close)
	for name, url := range map[string]string{
		"unknown host":            "http://postbox-test-no-such-host.invalid/hook",
		"certificate not trusted": tlsEndpoint.URL,
	} {
		t.Run(name, func(t *testing.T) {
			err := newSink(t, webhook.Config{URL: url, Timeout: 5 * time.Second}).Publish(t.Context(), newMessage())
			if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Unavailable {
				t.Fatalf("got %v, want an unavailable error", err)
			}
		})
	}
}

// The endpoint sits behind a reverse proxy and is down: the proxy answers
// 502 Bad Gateway, which says the sink is unavailable, as a refused
// connection would, with the status for the relay's log.
func TestEndpointDownBehindAGatewayIsUnavailable(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	backend, err := url.Parse(down.URL)
	if err != nil {
		t.Fatal(err)
	}
	down.Close()
	proxy := httputil.NewSingleHostReverseProxy(backend)
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	gateway := httptest.NewServer(proxy)
	t.Cleanup(gateway.Close)
	err = newSink(t, webhook.Config{URL: gateway.URL + "/hooks?token=T0KEN"}).Publish(t.Context(), newMessage())
	if kind, _, code := sink.Classify(err); err == nil || kind != sink.Unavailable || code != http.StatusBadGateway {
		t.Fatalf("got %v, want an unavailable error with status 502", err)
	}
	if strings.Contains(err.Error(), "T0KEN") {
		t.Fatalf("error %q holds the URL", err)
	}
}

// A publish the caller abandons is no verdict on the endpoint: retryable,
// even while connecting fails.
func TestCancelledPublishIsNotUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := newSink(t, webhook.Config{URL: srv.URL}).Publish(ctx, newMessage())
	if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Retryable {
		t.Fatalf("got %v, want a retryable error", err)
	}
}

// A request the endpoint does not answer in time is ambiguous (one slow
// event, or a dead endpoint): a plain timeout, which the relay counts.
func TestUnansweredRequestIsATimeout(t *testing.T) {
	e := newEndpoint(t, hang(t))
	err := newSink(t, webhook.Config{URL: e.URL, Timeout: 100 * time.Millisecond}).Publish(t.Context(), newMessage())
	var timeout interface{ Timeout() bool }
	if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Retryable || !errors.As(err, &timeout) || !timeout.Timeout() {
		t.Fatalf("got %v, want a retryable timeout", err)
	}
}

func TestConcurrencyIsBounded(t *testing.T) {
	const limit, publishes = 4, 24
	var mu sync.Mutex
	inFlight, most := 0, 0
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
	})
	s := newSink(t, webhook.Config{URL: e.URL, MaxConcurrency: limit})
	var wg sync.WaitGroup
	for range publishes {
		wg.Go(func() {
			if err := s.Publish(t.Context(), newMessage()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if got := most; got > limit || got < 2 {
		t.Fatalf("%d requests in flight at most, want between 2 and %d", got, limit)
	}
	if got := len(e.received()); got != publishes {
		t.Fatalf("%d requests, want %d", got, publishes)
	}
}

func TestWaitingForASlotHonoursTheContext(t *testing.T) {
	started := make(chan struct{}, 1)
	wait := hang(t)
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		wait(w, r)
	})
	s := newSink(t, webhook.Config{URL: e.URL, MaxConcurrency: 1, Timeout: time.Minute})
	first, cancelFirst := context.WithCancel(t.Context())
	defer cancelFirst()
	go s.Publish(first, newMessage())
	<-started

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Publish(ctx, newMessage())
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Fatalf("Publish waited %v for a slot", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's deadline", err)
	}
	if len(e.received()) != 1 {
		t.Fatal("the second request was sent")
	}
}

func TestConnectionsAreReused(t *testing.T) {
	var served atomic.Int32
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1)%2 == 0 {
			http.Error(w, strings.Repeat("overloaded ", 100), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"ok": true}`))
	})
	s := newSink(t, webhook.Config{URL: e.URL})
	for range 50 {
		s.Publish(t.Context(), newMessage())
	}
	if served.Load() != 50 {
		t.Fatalf("%d requests served, want 50", served.Load())
	}
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("50 sequential requests opened %d connections, want 1", n)
	}
}

func TestResponseBodyIsBounded(t *testing.T) {
	chunk := []byte(strings.Repeat("x", 32<<10))
	for _, code := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			for r.Context().Err() == nil { // an endless answer
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})
		s := newSink(t, webhook.Config{URL: e.URL, MaxResponseBody: 4 << 10, Timeout: 10 * time.Second})
		start := time.Now()
		err := s.Publish(t.Context(), newMessage())
		if elapsed := time.Since(start); elapsed > 2*time.Second {
			t.Fatalf("status %d: Publish read for %v", code, elapsed)
		}
		if kind, _, _ := sink.Classify(err); (code == http.StatusOK) != (err == nil) || (err != nil && kind != sink.Retryable) {
			t.Fatalf("status %d: got %v", code, err)
		}
		if err != nil && len(err.Error()) > 400 {
			t.Fatalf("error of %d bytes", len(err.Error()))
		}
	}
}

// An endpoint whose address the SSRF guard refuses is a configuration
// fault, not an outage: the attempt fails for good (no retry can help
// until the address is allowed), and the endpoint never sees a request.
func TestBlockedAddressIsPermanent(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) }))
	t.Cleanup(srv.Close)
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// The guard's client has a Timeout (sent with Client.Do); its bare
	// transport is sent through directly.
	for name, client := range map[string]*http.Client{
		"guard client":    g.Client(5 * time.Second),
		"guard transport": {Transport: g.Transport(5 * time.Second)},
	} {
		t.Run(name, func(t *testing.T) {
			err := newSink(t, webhook.Config{URL: srv.URL, Client: client}).Publish(t.Context(), newMessage())
			if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Permanent || !errors.Is(err, guard.ErrBlocked) {
				t.Fatalf("got %v (%v), want a permanent error matching guard.ErrBlocked", err, kind)
			}
			if !strings.Contains(err.Error(), "127.0.0.1 is loopback") {
				t.Errorf("error %q does not say which address and rule", err)
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the endpoint got %d requests", n)
	}
}

// The user information of the URL is sent as Basic credentials, as
// http.Client does, whether the request goes through the client or
// straight to its transport; they never show in an error.
func TestURLUserInfoIsSentAsBasicAuth(t *testing.T) {
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	})
	u, err := url.Parse(e.URL + "/hooks")
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("partner", "pa:ss w0rd")
	for name, client := range map[string]*http.Client{
		"default client":        nil,
		"client with a timeout": {Timeout: 5 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			before := len(e.received())
			err := newSink(t, webhook.Config{URL: u.String(), Client: client}).Publish(t.Context(), newMessage())
			if err == nil || strings.Contains(err.Error(), "pa:ss") || strings.Contains(err.Error(), "partner") {
				t.Fatalf("got %v, want the 401 without the credentials", err)
			}
			got := e.received()[before:]
			if len(got) != 1 {
				t.Fatalf("%d requests, want 1", len(got))
			}
			r := &http.Request{Header: got[0].header}
			if user, password, ok := r.BasicAuth(); !ok || user != "partner" || password != "pa:ss w0rd" {
				t.Fatalf("Authorization %q, want Basic credentials of partner", got[0].header.Get("Authorization"))
			}
		})
	}
}

// A client's own Timeout and cookie jar keep their meaning: such a client
// sends with Client.Do.
func TestClientTimeoutAndJarAreHonoured(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		e := newEndpoint(t, hang(t))
		client := &http.Client{Timeout: 100 * time.Millisecond}
		start := time.Now()
		err := newSink(t, webhook.Config{URL: e.URL, Client: client, Timeout: 10 * time.Second}).Publish(t.Context(), newMessage())
		if elapsed := time.Since(start); err == nil || elapsed > 5*time.Second {
			t.Fatalf("got %v after %v, want the client's timeout", err, elapsed)
		}
	})
	t.Run("jar", func(t *testing.T) {
		e := newEndpoint(t, nil)
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(e.URL)
		if err != nil {
			t.Fatal(err)
		}
		jar.SetCookies(u, []*http.Cookie{{Name: "session", Value: "s1"}})
		if err := newSink(t, webhook.Config{URL: e.URL, Client: &http.Client{Jar: jar}}).Publish(t.Context(), newMessage()); err != nil {
			t.Fatal(err)
		}
		if got := e.received()[0].header.Get("Cookie"); got != "session=s1" {
			t.Fatalf("Cookie %q, want session=s1 from the client's jar", got)
		}
	})
}

// An endpoint named https that speaks plain HTTP gets http.Client's own
// error.
func TestHTTPSToAnHTTPEndpointSaysSo(t *testing.T) {
	e := newEndpoint(t, nil)
	err := newSink(t, webhook.Config{URL: strings.Replace(e.URL, "http://", "https://", 1)}).Publish(t.Context(), newMessage())
	if !errors.Is(err, http.ErrSchemeMismatch) {
		t.Fatalf("got %v, want http.ErrSchemeMismatch", err)
	}
}
