package manifest_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/endpoint/manifest"
)

// parse parses text, failing the test on an error.
func parse(t *testing.T, text string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse([]byte(text))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	return m
}

// refused parses text, which must be refused with an *Error at line:col
// whose text holds every want and none of the never.
func refused(t *testing.T, text string, line, col int, want []string, never ...string) *manifest.Error {
	t.Helper()
	_, err := manifest.Parse([]byte(text))
	var e *manifest.Error
	if !errors.As(err, &e) {
		t.Fatalf("Parse = %v, want a *manifest.Error\n%s", err, text)
	}
	if line > 0 && (e.Line != line || e.Column != col) {
		t.Errorf("error at %d:%d, want %d:%d: %v", e.Line, e.Column, line, col, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	for _, n := range never {
		if strings.Contains(err.Error(), n) {
			t.Errorf("error %q quotes %q", err, n)
		}
	}
	return e
}

// Every key of the format is read into its field.
func TestParseEveryKey(t *testing.T) {
	m := parse(t, `version: 1
endpoints:
  - name: warehouse
    url: https://wh.example/hook
    types: [order.*, payment.succeeded]
    filter: 'payload.total > 100'
    envelope: cloudevents
    ce_source: https://shop.example/orders
    signature: svix
    rate_per_second: 50.5
    concurrency: 4
    shadow: true
    allow_private: true
    state: disabled
    secret: env:WH_SECRET
    headers:
      x-api-key: file:/run/secrets/wh-key
      X-Tenant: env:TENANT
    tls: {cert: file:client.pem, key: file:client-key.pem, ca: file:ca.pem}
    auth:
      oauth2:
        token_url: https://auth.example/token
        client_id: postbox
        client_secret: env:OAUTH_SECRET
        scopes: [webhooks.write]
        params: {audience: https://api.example, resource: [a, b]}
  - name: audit
    url: https://audit.example/in
    auth: {basic: {user: postbox, password: file:/run/secrets/audit}}
  - name: 2024
    url: nats://nats:4222?subject=orders
    auth: {bearer: env:TOKEN}
`)
	if m.Version != 1 || len(m.Endpoints) != 3 {
		t.Fatalf("version %d, %d endpoints", m.Version, len(m.Endpoints))
	}
	wh := m.Endpoints[0]
	wantSettings := admin.Settings{Name: "warehouse", URL: "https://wh.example/hook", Types: []string{"order.*", "payment.succeeded"},
		Filter: "payload.total > 100", Envelope: "cloudevents", CESource: "https://shop.example/orders", Signature: "svix",
		RatePerSecond: 50.5, Concurrency: 4, Shadow: true, AllowPrivate: true}
	if !reflect.DeepEqual(wh.Settings, wantSettings) {
		t.Errorf("settings %+v\nwant     %+v", wh.Settings, wantSettings)
	}
	if wh.State != "disabled" || wh.Line != 3 || wh.Column != 5 {
		t.Errorf("state %q at %d:%d", wh.State, wh.Line, wh.Column)
	}
	if wh.Secret == nil || wh.Secret.String() != "env:WH_SECRET" || wh.Secret.Line != 15 {
		t.Errorf("secret %+v", wh.Secret)
	}
	if h := wh.Headers; len(h) != 2 || h["X-Api-Key"].String() != "file:/run/secrets/wh-key" || h["X-Tenant"].String() != "env:TENANT" {
		t.Errorf("headers %+v (names canonical)", h)
	}
	if wh.TLS == nil || wh.TLS.Cert.String() != "file:client.pem" || wh.TLS.Key.String() != "file:client-key.pem" || wh.TLS.CA.String() != "file:ca.pem" {
		t.Errorf("tls %+v", wh.TLS)
	}
	o := wh.Auth.OAuth2
	if o == nil || o.TokenURL != "https://auth.example/token" || o.ClientID != "postbox" || o.ClientSecret.String() != "env:OAUTH_SECRET" ||
		!reflect.DeepEqual(o.Scopes, []string{"webhooks.write"}) ||
		!reflect.DeepEqual(o.Params, map[string][]string{"audience": {"https://api.example"}, "resource": {"a", "b"}}) {
		t.Errorf("oauth2 %+v", o)
	}
	if b := m.Endpoints[1].Auth.Basic; b == nil || b.User != "postbox" || b.Password.String() != "file:/run/secrets/audit" {
		t.Errorf("basic %+v", b)
	}
	if e := m.Endpoints[2]; e.Name != "2024" || e.Auth.Bearer.String() != "env:TOKEN" || e.Secret != nil || e.State != "" {
		t.Errorf("third endpoint %+v", e)
	}
}

// Anchors, aliases and merge keys work, and x- keys at the top are a
// place for them.
func TestParseAnchorsAndMergeKeys(t *testing.T) {
	m := parse(t, `version: 1
x-defaults: &defaults
  types: [order.*]
  rate_per_second: 10
  headers: {X-Tenant: env:TENANT}
endpoints:
  - <<: *defaults
    name: a
    url: https://a.example/hook
  - <<: *defaults
    name: b
    url: https://b.example/hook
    rate_per_second: 20
`)
	a, b := m.Endpoints[0], m.Endpoints[1]
	if !reflect.DeepEqual(a.Types, []string{"order.*"}) || a.RatePerSecond != 10 || a.Headers["X-Tenant"].String() != "env:TENANT" {
		t.Errorf("a %+v", a)
	}
	if b.RatePerSecond != 20 || !reflect.DeepEqual(b.Types, []string{"order.*"}) {
		t.Errorf("b's own key must win over the merged one: %+v", b)
	}
}

// The errors name the line, the column and the key.
func TestParseRefusals(t *testing.T) {
	head := "version: 1\nendpoints:\n  - name: a\n    url: https://a.example/\n"
	for _, c := range []struct {
		name      string
		text      string
		line, col int
		want      []string
	}{
		{"unknown key", head + "    urll: x\n", 5, 5, []string{"endpoints[0]", `unknown key "urll"`, "known: name, url"}},
		{"unknown key at the top", "version: 1\nendpoint: []\n", 2, 1, []string{`unknown key "endpoint"`}},
		{"unknown key in auth", head + "    auth: {token: env:X}\n", 5, 12, []string{"endpoints[0].auth", `unknown key "token"`}},
		{"key twice", head + "    url: https://b.example/\n", 5, 5, []string{"endpoints[0].url", "given twice"}},
		{"name twice", head + "  - name: a\n    url: https://b.example/\n", 5, 5, []string{"endpoints[1].name", `"a"`, "line 3"}},
		{"no name", head + "  - url: https://b.example/\n", 5, 5, []string{"endpoints[1].name", "required"}},
		{"no version", "endpoints: []\n", 1, 1, []string{"version", "required"}},
		{"version 2", "version: 2\nendpoints: []\n", 1, 10, []string{"version", "version 1"}},
		{"version as text", "version: '1'\nendpoints: []\n", 1, 10, []string{"version"}},
		{"no endpoints", "version: 1\n", 1, 1, []string{"endpoints", "required"}},
		{"endpoints a mapping", "version: 1\nendpoints: {a: 1}\n", 2, 12, []string{"endpoints", "list"}},
		{"endpoint a text", "version: 1\nendpoints: [a]\n", 2, 13, []string{"endpoints[0]", "mapping"}},
		{"state", head + "    state: auto_disabled\n", 5, 12, []string{"endpoints[0].state", "enabled or disabled"}},
		{"concurrency", head + "    concurrency: many\n", 5, 18, []string{"endpoints[0].concurrency", "whole number"}},
		{"concurrency float", head + "    concurrency: 1.5\n", 5, 18, []string{"endpoints[0].concurrency"}},
		{"rate NaN", head + "    rate_per_second: .nan\n", 5, 22, []string{"endpoints[0].rate_per_second", "number"}},
		{"rate infinite", head + "    rate_per_second: .inf\n", 5, 22, []string{"endpoints[0].rate_per_second"}},
		{"shadow", head + "    shadow: yes\n", 5, 13, []string{"endpoints[0].shadow", "true or false"}},
		{"types a text", head + "    types: order.*\n", 5, 12, []string{"endpoints[0].types", "list"}},
		{"types of lists", head + "    types: [[a]]\n", 5, 13, []string{"endpoints[0].types[0]", "text"}},
		{"name a bool", "version: 1\nendpoints:\n  - name: true\n", 3, 11, []string{"endpoints[0].name", "text"}},
		{"two auths", head + "    auth: {bearer: env:A, basic: {user: u, password: env:B}}\n", 5, 11, []string{"endpoints[0].auth", "one of"}},
		{"basic without password", head + "    auth: {basic: {user: u}}\n", 5, 19, []string{"endpoints[0].auth.basic.password", "required"}},
		{"oauth2 without secret", head + "    auth: {oauth2: {token_url: https://t.example/, client_id: c}}\n", 5, 20, []string{"client_secret", "required"}},
		{"header twice", head + "    headers: {X-A: env:A, x-a: env:B}\n", 5, 27, []string{"X-A", "twice"}},
		{"env name", head + "    secret: env:1X\n", 5, 13, []string{"endpoints[0].secret", "env:NAME"}},
		{"file path", head + "    secret: 'file:'\n", 5, 13, []string{"endpoints[0].secret", "file:PATH"}},
		{"two documents", "version: 1\nendpoints: []\n---\nversion: 1\n", 3, 1, []string{"second YAML document"}},
		{"tabs", "version: 1\nendpoints:\n\t- name: a\n", 0, 0, []string{"line 3"}},
		{"empty", "", 0, 0, []string{"empty"}},
		{"comment only", "# nothing\n", 0, 0, []string{"empty"}},
		{"header name", head + "    headers: {'X Y': env:A}\n", 5, 15, []string{"endpoints[0].headers", `"X Y" is not an HTTP header name`}},
		{"key of a number", head + "    1: a\n", 5, 5, []string{"endpoints[0]", "plain text"}},
		{"merge of itself", "version: 1\nx-a: &a {<<: *a}\nendpoints: [{<<: *a, name: a}]\n", 2, 6, []string{"endpoints[0].<<: merge keys (<<) nested deeper than 32"}},
		{"merge of a text", head + "    <<: text\n", 5, 9, []string{"endpoints[0]", "mapping"}},
	} {
		t.Run(c.name, func(t *testing.T) { refused(t, c.text, c.line, c.col, c.want) })
	}
}

// A secret written in the file is refused, wherever a secret goes, and
// the error does not quote it.
func TestParseRefusesLiteralSecrets(t *testing.T) {
	const secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	head := "version: 1\nendpoints:\n  - name: a\n    url: https://a.example/\n"
	for _, c := range []struct{ name, line, key string }{
		{"secret", "    secret: " + secret + "\n", "endpoints[0].secret"},
		{"secret with a colon", "    secret: 'vault:" + secret + "'\n", "endpoints[0].secret"},
		{"header", "    headers: {X-Api-Key: " + secret + "}\n", "endpoints[0].headers.X-Api-Key"},
		{"bearer", "    auth: {bearer: " + secret + "}\n", "endpoints[0].auth.bearer"},
		{"basic password", "    auth: {basic: {user: u, password: " + secret + "}}\n", "endpoints[0].auth.basic.password"},
		{"oauth2 secret", "    auth: {oauth2: {token_url: https://t.example/, client_id: c, client_secret: " + secret + "}}\n", "endpoints[0].auth.oauth2.client_secret"},
		{"tls key", "    tls: {key: " + secret + "}\n", "endpoints[0].tls.key"},
		{"a number", "    secret: 1234567890123\n", "endpoints[0].secret"},
		{"a list", "    secret: [" + secret + "]\n", "endpoints[0].secret"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := refused(t, head+c.line, 0, 0, []string{c.key, "env:NAME or file:PATH", "not shown"}, secret, "1234567890123")
			if e.Line != 5 {
				t.Errorf("line %d, want 5", e.Line)
			}
		})
	}
	t.Run("password in the URL", func(t *testing.T) {
		refused(t, "version: 1\nendpoints:\n  - name: a\n    url: https://user:"+secret+"@a.example/\n", 4, 10,
			[]string{"endpoints[0].url", "auth.basic"}, secret)
	})
	t.Run("broker password in the URL", func(t *testing.T) {
		refused(t, "version: 1\nendpoints:\n  - name: a\n    url: amqp://app:"+secret+"@rabbit:5672/?exchange=x\n", 4, 10,
			[]string{"endpoints[0].url"}, secret)
	})
}

// Load refuses a file over MaxSize without reading it all.
func TestLoadBoundsTheFile(t *testing.T) {
	big := strings.NewReader("version: 1\nendpoints: []\n# " + strings.Repeat("x", manifest.MaxSize))
	if _, err := manifest.Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Load of a file over MaxSize: %v", err)
	}
	m, err := manifest.Load(strings.NewReader("version: 1\nendpoints: []\n"))
	if err != nil || len(m.Endpoints) != 0 {
		t.Fatalf("Load: %v, %+v", err, m)
	}
}

// Resolve reads env:NAME from the lookup given and file:PATH from the
// file (relative to Dir), one trailing new line trimmed, PEM whole.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("secret", "whsec_fromfile\n")
	write("crlf", "token-crlf\r\n")
	write("cert.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	m := parse(t, `version: 1
endpoints:
  - name: a
    url: https://a.example/
    secret: file:`+filepath.Join(dir, "secret")+`
    headers: {X-Key: env:KEY}
    auth: {bearer: file:crlf}
    tls: {ca: file:cert.pem}
`)
	m.Dir = dir
	env := map[string]string{"KEY": "key-from-env"}
	if err := m.Resolve(func(name string) (string, bool) { v, ok := env[name]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	c := manifest.CredentialsOf(&m.Endpoints[0])
	if c.Secret != "whsec_fromfile" || c.Headers["X-Key"] != "key-from-env" || c.Bearer != "token-crlf" ||
		c.TLS == nil || c.TLS.CAPEM != "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n" {
		t.Errorf("resolved %#v: secret %q, header %q, bearer %q, tls %+v", c, c.Secret, c.Headers["X-Key"], c.Bearer, c.TLS)
	}
}

// Resolve's errors name the reference and where the file writes it, and
// never what a file or a variable holds.
func TestResolveRefusals(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("s", manifest.MaxSecretFileSize+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, ref, want string }{
		{"unset variable", "env:UNSET", "env:UNSET: the environment variable is not set"},
		{"empty variable", "env:EMPTY", "env:EMPTY: the secret is empty"},
		{"missing file", "file:" + filepath.Join(dir, "missing"), "no such file"},
		{"a folder", "file:" + dir, "not a regular file"},
		{"too large", "file:" + big, "larger than"},
		{"empty file", "file:" + empty, "the secret is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := parse(t, "version: 1\nendpoints:\n  - name: a\n    url: https://a.example/\n    secret: "+c.ref+"\n")
			err := m.Resolve(func(name string) (string, bool) { return "", name == "EMPTY" })
			var e *manifest.Error
			if !errors.As(err, &e) || e.Line != 5 || e.Column != 13 || e.Key != "endpoints[0].secret" || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Resolve = %v, want %q at 5:13 endpoints[0].secret", err, c.want)
			}
			if strings.Contains(err.Error(), "ssss") {
				t.Fatalf("error quotes the file: %v", err)
			}
		})
	}
}
