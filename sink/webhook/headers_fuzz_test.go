package webhook_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/sink/webhook"
)

// FuzzStaticHeader gives Config.Headers one arbitrary header. Properties:
// New either refuses it with an error naming Config.Headers (or
// Config.Auth) that never shows the value, or every request carries it
// exactly, over an event's header of the same name; and what New accepts
// is never a header the sink, the signature or the transport owns.
func FuzzStaticHeader(f *testing.F) {
	for _, seed := range [][2]string{
		{"X-Api-Key", "k3y"}, {"x-tenant", " spaced\tvalue "}, {"Authorization", "Bearer t"}, {"Content-Type", "text/plain"},
		{"Postbox-Anything", "v"}, {"Webhook-Id", "v"}, {"X-Forwarded-For", "1.2.3.4"}, {"Bad Name", "v"},
		{"X-Key", "line\r\nX-Forged: 1"}, {"", "v"}, {"X-Empty", ""}, {"TE", "trailers"}, {"x-ÿ", "v"}, {"Webhook-Custom", "v"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		var sent *http.Request
		client := &http.Client{Transport: roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			sent = r
			return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody}, nil
		})}
		s, err := webhook.New(webhook.Config{URL: "https://partner.example/hooks", Secrets: []string{testSecret},
			Headers: map[string]string{name: value}, Client: client})
		canonical := http.CanonicalHeaderKey(name)
		if err != nil {
			if !strings.Contains(err.Error(), "Config.Headers") && !strings.Contains(err.Error(), "Config.Auth") {
				t.Fatalf("error %q names neither Config.Headers nor Config.Auth", err)
			}
			if len(value) >= 4 && !strings.Contains(name, value) && strings.Contains(err.Error(), value) {
				t.Fatalf("error %q shows the header's value", err)
			}
			return
		}
		owned := canonical == "Content-Type" || canonical == "User-Agent" || strings.HasPrefix(canonical, "Postbox-") ||
			canonical == "Webhook-Id" || canonical == "Webhook-Timestamp" || canonical == "Webhook-Signature" || webhook.TransportHeader(canonical)
		if owned || strings.ContainsAny(value, "\r\n\x00") {
			t.Fatalf("New accepted header %q: %q", name, value)
		}
		m := newMessage()
		m.Headers = map[string]string{name: "forged-by-the-event"}
		if err := s.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, sent.Body)
		if got := sent.Header[canonical]; len(got) != 1 || got[0] != value {
			t.Fatalf("header %s sent as %q, want %q", canonical, got, value)
		}
	})
}
