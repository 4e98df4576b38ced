package webhook_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
)

// An event's own headers cannot set credentials or the request's framing:
// each such event fails alone, permanently, with an error naming the
// header, and nothing is sent. The URL's own Basic credentials still go
// with the next event.
func TestTransportHeadersAreRefused(t *testing.T) {
	e := newEndpoint(t, nil)
	u, err := url.Parse(e.URL + "/hooks")
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("partner", "s3cret")
	s := newSink(t, webhook.Config{URL: u.String()})
	for _, name := range []string{
		"Authorization", "authorization", "Proxy-Authorization", "Proxy-Connection", "proxy-anything",
		"Cookie", "Set-Cookie", "Connection", "Keep-Alive", "TE", "Trailer", "Transfer-Encoding",
		"Upgrade", "Expect", "Host", "Content-Length", "Content-Encoding", "Http2-Settings",
		"Forwarded", "X-Forwarded-For", "x-forwarded-host", "X-Real-Ip",
	} {
		t.Run(name, func(t *testing.T) {
			m := newMessage()
			m.Headers = map[string]string{name: "Bearer forged", "X-Custom": "kept"}
			before := len(e.received())
			err := s.Publish(t.Context(), m)
			if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Permanent {
				t.Fatalf("Publish with a %s header: %v, want a permanent failure", name, err)
			}
			if !strings.Contains(err.Error(), http.CanonicalHeaderKey(name)) || strings.Contains(err.Error(), "forged") {
				t.Errorf("error %q does not name header %s, or shows its value", err, http.CanonicalHeaderKey(name))
			}
			if len(e.received()) != before {
				t.Fatal("the request was sent")
			}
		})
	}
	if err := s.Publish(t.Context(), newMessage()); err != nil {
		t.Fatal(err)
	}
	got := e.received()
	r := &http.Request{Header: got[len(got)-1].header}
	if user, password, ok := r.BasicAuth(); !ok || user != "partner" || password != "s3cret" {
		t.Fatalf("Authorization %q, want the URL's Basic credentials", r.Header.Get("Authorization"))
	}
}

// A payload over Config.MaxMessageBytes fails alone, permanently, before
// anything is sent; the next event goes through.
func TestPayloadOverTheLimitIsPermanent(t *testing.T) {
	e := newEndpoint(t, nil)
	s := newSink(t, webhook.Config{URL: e.URL, MaxMessageBytes: 100})
	m := newMessage()
	m.Payload = []byte(`"` + strings.Repeat("x", 200) + `"`)
	err := s.Publish(t.Context(), m)
	if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Permanent {
		t.Fatalf("Publish of 202 bytes with a limit of 100: %v, want a permanent failure", err)
	}
	for _, s := range []string{"202 bytes", "MaxMessageBytes", "100"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if len(e.received()) != 0 {
		t.Fatal("the request was sent")
	}
	if err := s.Publish(t.Context(), newMessage()); err != nil {
		t.Fatal(err)
	}
}

// An endpoint's answer that the request is too large for it (413 Content
// Too Large, 431 Request Header Fields Too Large) fails the event at once:
// sending it again cannot help.
func TestTooLargeAnswersArePermanent(t *testing.T) {
	for _, code := range []int{http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge} {
		e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) })
		err := newSink(t, webhook.Config{URL: e.URL}).Publish(t.Context(), newMessage())
		if kind, _, status := sink.Classify(err); kind != sink.Permanent || status != code {
			t.Errorf("answer %d: %v (%v), want a permanent failure with the status", code, err, kind)
		}
	}
}
