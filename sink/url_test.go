package sink_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/sink"
)

// testKinds stand for a program's list: Lookup reads only their names and
// schemes.
var testKinds = []sink.URLKind{
	{Name: "webhook", Schemes: []string{"https", "http"}},
	{Name: "nats", Schemes: []string{"nats"}},
	{Name: "amqp", Schemes: []string{"amqp", "amqps"}},
}

// Lookup finds a URL's kind by its scheme, in any case, and returns the
// URL parsed.
func TestLookupFindsTheKindOfTheScheme(t *testing.T) {
	for raw, want := range map[string]string{
		"https://example.com/hook": "webhook",
		"http://127.0.0.1:8080/":   "webhook",
		"HTTPS://example.com/":     "webhook",
		"nats://h:4222?subject=x":  "nats",
		"amqps://u:p@h/v":          "amqp",
		"AMQP://h/":                "amqp",
	} {
		k, u, err := sink.Lookup(testKinds, raw)
		if err != nil {
			t.Errorf("Lookup(%q): %v", raw, err)
			continue
		}
		if k.Name != want {
			t.Errorf("Lookup(%q) = %s, want %s", raw, k.Name, want)
		}
		if parsed, _ := url.Parse(raw); u.String() != parsed.String() {
			t.Errorf("Lookup(%q) returned the URL %s", raw, u)
		}
	}
}

// A text that is not a URL, or a scheme no kind has, is refused as the
// URL's fault, with what the kinds offer and never a password.
func TestLookupRefusesWhatNoKindTakes(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"ftp://user:hunter2secret@host/x", `unknown scheme "ftp" (want https, http, nats, amqp or amqps)`},
		{"127.0.0.1:4222", `"127.0.0.1:4222" is not a URL (want https://..., nats://... or amqp://...)`},
		{"/just/a/path", `"/just/a/path" is not a URL`},
		{"", `"" is not a URL`},
		{"user:hunter2secret@h:1:2/x?y", `unknown scheme "user"`},
		{"h:hunter2secret@h:1:x", `unknown scheme "h"`},
		{"tok@host/x", `"…@host/x" is not a URL`},
	} {
		_, u, err := sink.Lookup(testKinds, c.raw)
		var refused *sink.OptionError
		if !errors.As(err, &refused) || refused.Option != "URL" {
			t.Errorf("Lookup(%q): %v (%#v), want an OptionError for the URL", c.raw, err, err)
			continue
		}
		if u != nil {
			t.Errorf("Lookup(%q) returned the URL %s with its error", c.raw, u)
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2secret") {
			t.Errorf("Lookup(%q): %q, want it to say %q, without the password", c.raw, err, c.want)
		}
	}
}

func TestOptionError(t *testing.T) {
	missing := &sink.OptionError{Option: "Secrets", Err: sink.ErrRequired}
	if missing.Error() != "Secrets: required" || !errors.Is(missing, sink.ErrRequired) {
		t.Errorf("a missing option: %q, errors.Is ErrRequired %v", missing, errors.Is(missing, sink.ErrRequired))
	}
	whole := &sink.OptionError{Err: errors.New("webhook: Config.URL must be an absolute http or https URL")}
	if whole.Error() != "webhook: Config.URL must be an absolute http or https URL" {
		t.Errorf("an OptionError of no one option: %q, want its Err's text", whole)
	}
}

// Credentials given apart fill a URL that has none, and only such a URL;
// the URL given is never changed.
func TestWithCredentials(t *testing.T) {
	for _, c := range []struct{ raw, user, password, want string }{
		{"amqp://h/v", "relay", "s3cret", "amqp://relay:s3cret@h/v"},
		{"nats://h:4222?subject=x", "t0ken", "", "nats://t0ken@h:4222?subject=x"},
		{"amqp://own:pw@h/v", "relay", "s3cret", "amqp://own:pw@h/v"},
		{"nats://tok@h", "relay", "s3cret", "nats://tok@h"},
		{"amqp://h/v", "", "s3cret", "amqp://h/v"},
		{"kafka://h", "", "", "kafka://h"},
		{"amqp://h/v", "us er", "p@ss:/?", "amqp://us%20er:p%40ss%3A%2F%3F@h/v"},
	} {
		u, err := url.Parse(c.raw)
		if err != nil {
			t.Fatal(err)
		}
		got := sink.WithCredentials(u, c.user, c.password)
		if got.String() != c.want {
			t.Errorf("WithCredentials(%s, %q, %q) = %s, want %s", c.raw, c.user, c.password, got, c.want)
		}
		if u.String() != c.raw {
			t.Errorf("WithCredentials changed its URL %s to %s", c.raw, u)
		}
		if password, _ := got.User.Password(); got.User != nil && got.User.Username() == c.user && password != c.password {
			t.Errorf("WithCredentials(%s): password %q, want %q", c.raw, password, c.password)
		}
	}
}

// Redact hides the passwords, tokens and password parameters of a sink
// URL and keeps the rest to tell which one it is.
func TestRedact(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"amqp://guest:hunter2@127.0.0.1:5672/?exchange=x", "amqp://guest:xxxxx@127.0.0.1:5672/?exchange=x"},
		{"nats://hunter2token@h:4222?subject=orders.{event_type}", "nats://xxxxx@h:4222?subject=orders.{event_type}"},
		{"kafka://u:hunter2@a:1,b:2?topic=t&sasl=plain", "kafka://u:xxxxx@a:1,b:2?topic=t&sasl=plain"},
		{"https://example.com/hook?token=abc", "https://example.com/hook?token=abc"},
		{"https://h/x?PassWord=hunter2&y=1", "https://h/x?PassWord=xxxxx&y=1"},
		// An unescaped '/' or '?' in a password of digits: url.Parse reads
		// a host and port, then a path or a query.
		{"amqp://u:1234/5678@h/v?exchange=x", "amqp://u:xxxxx@h/v?exchange=x"},
		{"amqp://u:1234?5678@h/v", "amqp://u:xxxxx@h/v"},
		{"amqp://u:hunter%2F2@h/v", "amqp://u:xxxxx@h/v"},
		{"amqp://u:hun/ter2@h/v?exchange=x", "…@h/v?exchange=x"},
		// Texts that do not parse: what follows the last '@' alone.
		{"nats://u:hunter2@h:1:x?subject=x", "…@h:1:x?subject=x"},
		{"h:hunter2@h:1:x", "…@h:1:x"},
		{"hunter2@h.example", "…@h.example"},
		{"127.0.0.1:4222", "127.0.0.1:4222"},
		// Not a URL: a database's keyword/value string given by mistake.
		{"host=x password=hunter2 user=y", "host=x password=xxxxx user=y"},
		{"host=x sslpassword='hunter 2' user=y", "host=x sslpassword=xxxxx user=y"},
		{"just-a-name", "just-a-name"},
	} {
		got := sink.Redact(c.raw)
		if got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.raw, got, c.want)
		}
		if strings.Contains(got, "hunter") || strings.Contains(got, "5678") {
			t.Errorf("Redact(%q) = %q shows the secret", c.raw, got)
		}
	}
}
