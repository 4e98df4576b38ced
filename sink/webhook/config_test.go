package webhook_test

import (
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink/webhook"
)

func TestNewRefusesInvalidConfig(t *testing.T) {
	const url = "https://partner.example/hooks?token=T0KEN"
	secrets := []string{testSecret}
	for _, tc := range []struct {
		name  string
		c     webhook.Config
		field string
	}{
		{"no URL", webhook.Config{Secrets: secrets}, "Config.URL"},
		{"relative URL", webhook.Config{URL: "/hooks", Secrets: secrets}, "Config.URL"},
		{"other scheme", webhook.Config{URL: "ftp://partner.example/T0KEN", Secrets: secrets}, "Config.URL"},
		{"no host", webhook.Config{URL: "https:///T0KEN", Secrets: secrets}, "Config.URL"},
		{"unparsable URL", webhook.Config{URL: "https://partner.example/%zzT0KEN", Secrets: secrets}, "Config.URL"},
		{"no secrets", webhook.Config{URL: url}, "Config.Secrets"},
		{"empty secret", webhook.Config{URL: url, Secrets: []string{""}}, "Config.Secrets"},
		{"short secret", webhook.Config{URL: url, Secrets: []string{"T0KEN-short"}}, "Config.Secrets"},
		{"unknown scheme", webhook.Config{URL: url, Secrets: secrets, Scheme: signature.Scheme(5)}, "Config.Scheme"},
		{"negative timeout", webhook.Config{URL: url, Secrets: secrets, Timeout: -time.Second}, "Config.Timeout"},
		{"negative concurrency", webhook.Config{URL: url, Secrets: secrets, MaxConcurrency: -1}, "Config.MaxConcurrency"},
		{"negative body limit", webhook.Config{URL: url, Secrets: secrets, MaxResponseBody: -1}, "Config.MaxResponseBody"},
		{"negative retry-after cap", webhook.Config{URL: url, Secrets: secrets, RetryAfterMax: -time.Second}, "Config.RetryAfterMax"},
		{"newline in user agent", webhook.Config{URL: url, Secrets: secrets, UserAgent: "postbox\r\nX-Forged: 1"}, "Config.UserAgent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := webhook.New(tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("got %v, want an error naming %s", err, tc.field)
			}
			if strings.Contains(err.Error(), "T0KEN") {
				t.Fatalf("error %q reveals the URL or a secret", err)
			}
		})
	}
}

func TestNewNeedsOnlyURLAndSecrets(t *testing.T) {
	for _, scheme := range []signature.Scheme{signature.Standard, signature.XSignature} {
		if _, err := webhook.New(webhook.Config{URL: "http://127.0.0.1:1/hooks", Secrets: []string{rawSecret}, Scheme: scheme}); err != nil {
			t.Errorf("%v: %v", scheme, err)
		}
	}
}

// Destination names the endpoint by its scheme and host only: its path,
// query and user info may hold a token.
func TestDestinationHidesPathQueryAndUser(t *testing.T) {
	s, err := webhook.New(webhook.Config{URL: "https://user:pw@hooks.example:8443/t/secret-token?key=k", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
	if err != nil {
		t.Fatal(err)
	}
	d := s.Destination()
	if d.System != "webhook" || d.Name != "https://hooks.example:8443" {
		t.Fatalf("Destination() = %+v, want webhook https://hooks.example:8443", d)
	}
}
