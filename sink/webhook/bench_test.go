package webhook_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/postbox-go/postbox/sink/webhook"
)

// BenchmarkPublish measures one signed delivery to a local endpoint that
// answers 200 with an empty body, from 64 goroutines at once (the relay's
// default concurrency): the sink's own cost per request (building, signing,
// sending, reading the answer) plus the HTTP client's and, as it runs in
// the same process, the server's. Allocations per op are the robust figure;
// ns/op depends on the machine's load.
func BenchmarkPublish(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(srv.Close)
	s, err := webhook.New(webhook.Config{URL: srv.URL + "/hooks/orders", Secrets: []string{testSecret}})
	if err != nil {
		b.Fatal(err)
	}
	m := newMessage()
	b.ReportAllocs()
	// RunParallel starts parallelism × GOMAXPROCS goroutines.
	b.SetParallelism(max(1, webhook.MaxConcurrencyDefault/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Publish(b.Context(), m); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPublishOAuth2 is BenchmarkPublish with an OAuth2 token, cached
// after the first delivery, and two static headers: the cost of the token
// cache's lookup and of the extra headers.
func BenchmarkPublishOAuth2(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(srv.Close)
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeToken(w, "tok-1", 3600)
	}))
	b.Cleanup(tokens.Close)
	c := oauthConfig(srv.URL+"/hooks/orders", tokens.URL, webhook.AuthStyleHeader)
	c.Secrets = []string{testSecret}
	c.Headers = map[string]string{"X-Api-Key": "k3y", "X-Tenant": "acme"}
	s, err := webhook.New(c)
	if err != nil {
		b.Fatal(err)
	}
	m := newMessage()
	b.ReportAllocs()
	b.SetParallelism(max(1, webhook.MaxConcurrencyDefault/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Publish(b.Context(), m); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
