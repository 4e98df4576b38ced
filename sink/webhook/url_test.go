package webhook_test

import (
	"errors"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
)

// parseURL parses a URL of the test, as sink.Lookup hands it to Open.
func parseURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestURLKind(t *testing.T) {
	for _, raw := range []string{"https://example.com/hook", "http://127.0.0.1/"} {
		if k, _, err := sink.Lookup([]sink.URLKind{webhook.URL}, raw); err != nil || k.Name != "webhook" {
			t.Errorf("Lookup(%q) = %q, %v, want the webhook", raw, k.Name, err)
		}
	}
	if webhook.URL.Concurrency != webhook.MaxConcurrencyDefault || webhook.URL.PublishBatch != 1 {
		t.Errorf("Concurrency %d, PublishBatch %d, want the sink's %d requests, one event each",
			webhook.URL.Concurrency, webhook.URL.PublishBatch, webhook.MaxConcurrencyDefault)
	}
}

// Open signs with the options' secrets and scheme, and takes their timeout
// and concurrency; a broker's credentials in the options never reach the
// endpoint.
func TestURLOpenSignsWithTheOptions(t *testing.T) {
	ep := newEndpoint(t, nil)
	s, err := webhook.URL.Open(t.Context(), parseURL(t, ep.URL+"/hooks"), sink.URLOptions{
		Secrets: []string{rawSecret}, Signature: "x-signature", Timeout: 3 * time.Second, Concurrency: 7,
		User: "relay", Password: "broker-password",
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(io.Closer); ok {
		t.Error("the webhook sink is an io.Closer: it holds nothing to close")
	}
	if desc := s.String(); !strings.Contains(desc, "x-signature signatures with 1 secret, at most 7 requests at once, timeout 3s") {
		t.Errorf("String() = %q, want the options' scheme, concurrency and timeout", desc)
	}
	m := newMessage()
	if err := s.Publish(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	req := ep.received()[0]
	v, err := signature.NewVerifier(signature.XSignature, 0, rawSecret)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Verify(req.header, req.body); err != nil {
		t.Errorf("the request does not verify with the options' secret and scheme: %v", err)
	}
	if auth := req.header.Get("Authorization"); auth != "" {
		t.Errorf("Authorization %q: the options' broker credentials reached the endpoint", auth)
	}
}

// Open refuses what is missing or wrong in its options or URL with an
// OptionError naming the option, never showing a secret or the URL.
func TestURLOpenRefuses(t *testing.T) {
	const hook = "https://partner.example/hooks?token=T0KEN"
	for _, c := range []struct {
		name, url string
		o         sink.URLOptions
		option    string
		want      error
		says      string
	}{
		{"no secret", hook, sink.URLOptions{Signature: "standard"}, "Secrets", sink.ErrRequired, "required"},
		{"unknown signature", hook, sink.URLOptions{Secrets: []string{testSecret}, Signature: "bogus"}, "Signature", signature.ErrUnknownScheme, "want"},
		{"no signature", hook, sink.URLOptions{Secrets: []string{testSecret}}, "Signature", signature.ErrUnknownScheme, "want"},
		{"short secret", hook, sink.URLOptions{Secrets: []string{"T0KEN-short"}, Signature: "standard"}, "", nil, "Config.Secrets"},
		{"no host", "https:///T0KEN", sink.URLOptions{Secrets: []string{testSecret}, Signature: "standard"}, "", nil, "Config.URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := webhook.URL.Open(t.Context(), parseURL(t, c.url), c.o)
			var refused *sink.OptionError
			if !errors.As(err, &refused) || refused.Option != c.option {
				t.Fatalf("got %v, want an OptionError for %q", err, c.option)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("got %v, want it to be %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "T0KEN") {
				t.Errorf("got %q, want it to say %q without the URL or a secret", err, c.says)
			}
		})
	}
}

// A webhook is described by its scheme and host: its path and query, which
// may hold a token, read "/…" and are secrets, as is its password.
func TestURLDescribe(t *testing.T) {
	desc, secrets := sink.Describe([]sink.URLKind{webhook.URL}, "https://hook:pw-123@hooks.example.com/t0ken-path?sig=abcd", sink.URLOptions{})
	if desc != "webhook https://hooks.example.com/…" {
		t.Errorf("desc %q", desc)
	}
	for _, want := range []string{"pw-123", "/t0ken-path", "abcd", "sig=abcd"} {
		if !slices.Contains(secrets, want) {
			t.Errorf("secrets %q lack %q", secrets, want)
		}
	}
	if desc, _ := sink.Describe([]sink.URLKind{webhook.URL}, "http://127.0.0.1:8080/", sink.URLOptions{}); desc != "webhook http://127.0.0.1:8080" {
		t.Errorf("desc of a URL without path %q", desc)
	}
	if webhook.URL.Setup != nil {
		t.Error("a webhook has a setup")
	}
}
