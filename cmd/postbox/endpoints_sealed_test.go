package main_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// pkiFiles are a private CA, a server certificate for 127.0.0.1 and a
// client certificate signed by it, and a second client key of no
// certificate, the PEM ones written to files of the test's own.
type pkiFiles struct {
	caFile, certFile, keyFile, otherKeyFile string
	keyPEM                                  []byte
	server                                  tls.Certificate
	clientCAs                               *x509.CertPool
}

func newPKIFiles(t *testing.T) *pkiFiles {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	issue := func(template, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) ([]byte, *x509.Certificate) {
		template.SerialNumber = big.NewInt(time.Now().UnixNano())
		template.NotBefore, template.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		if parent == nil {
			parent = template
		}
		der, err := x509.CreateCertificate(rand.Reader, template, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return der, c
	}
	keyPEM := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	certPEM := func(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}) }
	caKey := newKey()
	caDER, ca := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "partner CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, &caKey.PublicKey, caKey)
	serverKey, clientKey := newKey(), newKey()
	serverDER, _ := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "partner"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, &serverKey.PublicKey, caKey)
	clientDER, _ := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "postbox-relay"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, &clientKey.PublicKey, caKey)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	p := &pkiFiles{
		caFile: write("ca.pem", certPEM(caDER)), certFile: write("client.pem", certPEM(clientDER)),
		keyPEM: keyPEM(clientKey), server: tls.Certificate{Certificate: [][]byte{serverDER}, PrivateKey: serverKey},
		clientCAs: x509.NewCertPool(),
	}
	p.keyFile = write("client-key.pem", p.keyPEM)
	p.otherKeyFile = write("other-key.pem", keyPEM(newKey()))
	p.clientCAs.AddCert(ca)
	return p
}

// keyMaterial is a line of the client key's PEM body: what must never be
// printed nor stored in clear.
func (p *pkiFiles) keyMaterial() string { return strings.Split(string(p.keyPEM), "\n")[1] }

// secretFile writes value and a trailing new line to a file of the
// test's own, for a flag's @FILE, and returns its path.
func secretFile(t *testing.T, value string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// uniqueSecret is a marked random text, easy to look for.
func uniqueSecret(mark string) string {
	return "sek" + mark + strings.ReplaceAll(rand.Text(), "-", "")[:16]
}

// newWhsec is a new whsec_ secret.
func newWhsec() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// credsOf opens the stored credentials of endpoint id with the tests'
// secrets key.
func credsOf(t *testing.T, s store.Endpoints, id uuid.UUID) (store.Endpoint, endpoint.Credentials) {
	t.Helper()
	e, err := s.EndpointGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	k, err := keyring.Parse(secretsKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := endpoint.Open(k, e)
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}

// runCmd runs cmd and returns its exit code and everything it printed.
func runCmd(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	out, err := runCaptured(t, cmd)
	return exitCodeOf(err), out
}

// noSecretIn fails t for each of secrets that text holds.
func noSecretIn(t *testing.T, what, text string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s holds the secret %q:\n%s", what, s, text)
		}
	}
}

// Every secret endpoints add takes, whatever its form (as is, @FILE,
// env:NAME, in the URL), is sealed: list and show, in text and JSON, and
// the database's data (pg_dump --data-only) show none of them, only
// fingerprints, kinds of authentication and the key's id; the keyring
// opens each as it was given.
func TestEndpointsAddSealsEverySecret(t *testing.T) {
	s, db := schemaStore(t)
	pki := newPKIFiles(t)
	signing, signing2, signing3 := newWhsec(), newWhsec(), newWhsec()
	apiKey, tenant, bearer := uniqueSecret("api"), uniqueSecret("tenant"), uniqueSecret("bearer")
	urlPassword, basicPassword, oauthSecret, brokerPassword, brokerHeader := uniqueSecret("urlpw"), uniqueSecret("basic"), uniqueSecret("oauth"), uniqueSecret("natspw"), uniqueSecret("natshdr")
	secrets := []string{signing, signing2, signing3, strings.TrimPrefix(signing, "whsec_"), apiKey, tenant, bearer, urlPassword, basicPassword, oauthSecret,
		brokerPassword, brokerHeader, pki.keyMaterial()}

	type added struct {
		name  string
		args  []string
		env   []string
		auth  []string
		check func(c endpoint.Credentials) bool
	}
	cases := []added{
		{name: "signed", args: []string{"--url", "http://127.0.0.1:9/one", "--secret", "@" + secretFile(t, signing),
			"--header", "X-Api-Key: env:PBTEST_API_KEY", "--header", "x-tenant:" + tenant, "--bearer", "@" + secretFile(t, bearer),
			"--filter", `payload.total > 100 && event_type.startsWith("order.")`, "--envelope", "cloudevents", "--ce-source", "/shop/orders", "--signature", "svix"},
			env: []string{"PBTEST_API_KEY=" + apiKey}, auth: []string{"bearer", "headers"},
			check: func(c endpoint.Credentials) bool {
				return c.Secret == signing && c.Bearer == bearer && len(c.Headers) == 2 && c.Headers["X-Api-Key"] == apiKey && c.Headers["X-Tenant"] == tenant
			}},
		{name: "url-basic", args: []string{"--url", "http://alice:" + urlPassword + "@127.0.0.1:9/two", "--secret", "env:PBTEST_SIGNING"},
			env: []string{"PBTEST_SIGNING=" + signing2}, auth: []string{"basic"},
			check: func(c endpoint.Credentials) bool {
				return c.Secret == signing2 && c.Basic != nil && c.Basic.User == "alice" && c.Basic.Password == urlPassword
			}},
		{name: "mtls", args: []string{"--url", "https://127.0.0.1:9/three", "--secret", signing3, "--basic", "bob:" + basicPassword,
			"--tls-cert", pki.certFile, "--tls-key", pki.keyFile, "--tls-ca", pki.caFile}, auth: []string{"basic", "mtls"},
			check: func(c endpoint.Credentials) bool {
				return c.Basic != nil && c.Basic.User == "bob" && c.Basic.Password == basicPassword && c.TLS != nil &&
					c.TLS.KeyPEM == string(pki.keyPEM) && c.TLS.CertPEM != "" && c.TLS.CAPEM != ""
			}},
		{name: "oauth2", args: []string{"--url", "https://127.0.0.1:9/four", "--oauth2-token-url", "https://127.0.0.1:9/token", "--oauth2-client-id", "postbox",
			"--oauth2-client-secret", "env:PBTEST_OAUTH", "--oauth2-scope", "events:write", "--oauth2-scope", "events:read", "--oauth2-param", "audience=https://partner.example"},
			env: []string{"PBTEST_OAUTH=" + oauthSecret}, auth: []string{"oauth2"},
			check: func(c endpoint.Credentials) bool {
				o := c.OAuth2
				return o != nil && o.ClientID == "postbox" && o.ClientSecret == oauthSecret && slices.Equal(o.Scopes, []string{"events:write", "events:read"}) &&
					slices.Equal(o.Params["audience"], []string{"https://partner.example"})
			}},
		{name: "broker", args: []string{"--url", "nats://natsuser:" + brokerPassword + "@127.0.0.1:4222?subject=shop.{event_type}", "--header", "X-Api-Key: @" + secretFile(t, brokerHeader)},
			auth: []string{"headers"},
			check: func(c endpoint.Credentials) bool {
				return c.Secret == "" && c.URLUser == "natsuser" && c.URLPassword == brokerPassword && c.Headers["X-Api-Key"] == brokerHeader
			}},
	}
	k, err := keyring.Parse(secretsKey)
	if err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	ids := map[string]uuid.UUID{}
	for _, c := range cases {
		cmd := command(append(append([]string{"endpoints", "add", "--name", c.name, "--allow-private"}, db...), c.args...)...)
		cmd.Env = append(cmd.Env, c.env...)
		code, out := runCmd(t, cmd)
		if code != 0 {
			t.Fatalf("endpoints add %s: exit %d\n%s", c.name, code, out)
		}
		printed.WriteString(out)
		m := endpointIDLine.FindStringSubmatch(out)
		if m == nil || !strings.Contains(out, "sealed by key "+k.PrimaryID()) {
			t.Fatalf("endpoints add %s printed %q, want its id and the key that sealed it", c.name, out)
		}
		ids[c.name] = uuid.MustParse(m[1])
		_, creds := credsOf(t, s.Driver(), ids[c.name])
		if !c.check(creds) {
			t.Errorf("endpoint %s: the sealed credentials do not hold what was given", c.name)
		}
	}
	var warnings []string
	for _, line := range strings.Split(printed.String(), "\n") {
		if strings.HasPrefix(line, "warning: ") && strings.Contains(line, "given as is") {
			warnings = append(warnings, line)
		}
	}
	warned := strings.Join(warnings, "\n")
	for _, flag := range []string{"--header", "--url's password", "--basic", "--secret"} {
		if !strings.Contains(warned, flag) {
			t.Errorf("endpoints add did not warn that %s was given as is:\n%s", flag, warned)
		}
	}
	for _, flag := range []string{"--bearer", "--oauth2-client-secret"} { // from @FILE and env:NAME
		if strings.Contains(warned, flag) {
			t.Errorf("endpoints add warned about %s, read from a file or the environment:\n%s", flag, warned)
		}
	}

	for _, args := range [][]string{{"list"}, {"list", "--json"}} {
		printed.WriteString(runOK(t, append(append([]string{"endpoints"}, args...), db...)...))
	}
	for name, id := range ids {
		printed.WriteString(runOK(t, append([]string{"endpoints", "show", id.String()}, db...)...))
		out := runOK(t, append([]string{"endpoints", "show", "--json", id.String()}, db...)...)
		printed.WriteString(out)
		var shown struct {
			URL, Filter, Envelope, Signature string
			CESource                         string `json:"ce_source"`
			Auth                             []string
			SecretsKey                       string `json:"secrets_key"`
			Sealed                           bool
			Secret                           string `json:"secret_fingerprint"`
		}
		if err := json.Unmarshal([]byte(out), &shown); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, c := range cases {
			if c.name == name {
				want = c.auth
			}
		}
		if !shown.Sealed || shown.SecretsKey != k.PrimaryID() || !slices.Equal(shown.Auth, want) || strings.Contains(shown.URL, "@") {
			t.Errorf("show --json %s = %s, want sealed by %s, auth %v, a URL without user information", name, out, k.PrimaryID(), want)
		}
		if name == "signed" && (shown.Secret != endpoint.Fingerprint(signing) || shown.Filter != `payload.total > 100 && event_type.startsWith("order.")` ||
			shown.Envelope != "cloudevents" || shown.CESource != "/shop/orders" || shown.Signature != "svix") {
			t.Errorf("show --json signed = %s", out)
		}
	}
	show := runOK(t, append([]string{"endpoints", "show", "signed"}, db...)...)
	for _, want := range []string{"filter       payload.total > 100", "envelope     cloudevents;source=/shop/orders", "signature    svix",
		"auth         bearer+headers", "secrets      sealed by key " + k.PrimaryID(), "secret       " + endpoint.Fingerprint(signing)} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	noSecretIn(t, "the commands' output", printed.String(), secrets)

	dump, err := exec.Command("pg_dump", "--data-only", "--schema", s.Schema(), pgtest.URL()).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, dump)
	}
	if !strings.Contains(string(dump), ids["signed"].String()) || !strings.Contains(string(dump), endpoint.Fingerprint(signing)) {
		t.Fatalf("pg_dump --data-only --schema %s lacks the endpoints' rows:\n%s", s.Schema(), dump)
	}
	noSecretIn(t, "pg_dump --data-only", string(dump), secrets)
}

// What endpoints add cannot store for use is refused in one line that
// names the flag, and never shows a secret given; nothing is added.
func TestEndpointsAddRefusesWhatCannotBeUsed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	pki := newPKIFiles(t)
	const mark = "SEKRIT9x"
	webhook := []string{"--url", "http://127.0.0.1:9/hook", "--allow-private"}
	broker := []string{"--url", "nats://127.0.0.1:4222?subject=shop.{event_type}"}
	oauth2 := []string{"--oauth2-token-url", "https://127.0.0.1:9/token", "--oauth2-client-id", "id", "--oauth2-client-secret", mark}
	cases := []struct {
		args []string
		want string
	}{
		{append(webhook, "--filter", "payload.total >"), `--filter: 1:16: `},
		{append(webhook, "--filter", "event_type == 'a' &&\n  nosuch.x"), `--filter: 2:3: `},
		{append(webhook, "--filter", "1 + 2"), `--filter: `},
		{append(webhook, "--header", "X-Api-Key "+mark), "--header #1: want 'Name: value'"},
		{append(webhook, "--header", "X-Api-Key="+mark+": v"), "--header #1: its name is not an HTTP header name"},
		{append(webhook, "--header", "X-A: "+mark, "--header", "x-a: "+mark), "--header X-A is given twice"},
		{append(webhook, "--header", "X-A:  "), "--header X-A: the value is empty"},
		{append(webhook, "--header", "Content-Type: "+mark), "--header cannot set Content-Type"},
		{append(webhook, "--header", "Authorization: Bearer "+mark), "--header cannot set Authorization"},
		{append(webhook, "--basic", mark), "--basic: want USER:PASSWORD"},
		{append(webhook, "--basic", "u:"+mark, "--bearer", mark), "give one authentication of --basic, --bearer"},
		{append(webhook, "--bearer", mark+" x"), "--bearer is not an RFC 6750 token"},
		{append(webhook, "--bearer", "@/nonexistent/"+mark[:3]), "--bearer: open /nonexistent/"},
		{append(webhook, "--bearer", "env:PBTEST_NOT_SET"), "--bearer: env:PBTEST_NOT_SET: the environment variable is not set"},
		{append(webhook, oauth2[:4]...), "--oauth2-client-secret is required"},
		{append(webhook, "--oauth2-client-secret", mark), "is required with the other --oauth2-* flags"},
		{append(append(webhook, oauth2...), "--oauth2-token-url", "ftp://x/"+mark), "--oauth2-token-url: want an absolute https://"},
		{append(append(webhook, oauth2...), "--oauth2-param", "grant_type=password"), "--oauth2-param cannot set"},
		{append(append(webhook, oauth2...), "--oauth2-param", mark), "--oauth2-param: want NAME=VALUE"},
		{append(webhook, "--tls-cert", pki.certFile), "give --tls-cert and --tls-key together"},
		{append(webhook, "--tls-cert", pki.certFile, "--tls-key", pki.keyFile), "--tls-* need an https:// URL"},
		{[]string{"--url", "https://127.0.0.1:9/", "--allow-private", "--tls-cert", pki.certFile, "--tls-key", pki.otherKeyFile}, "--tls-key " + pki.otherKeyFile + ": "},
		{[]string{"--url", "https://127.0.0.1:9/", "--allow-private", "--tls-ca", pki.keyFile}, "--tls-ca " + pki.keyFile + ": "},
		{append(webhook, "--envelope", "xml"), `--envelope "xml": want raw, standard, cloudevents or cloudevents-binary`},
		{append(webhook, "--ce-source", "/shop"), "--ce-source: only --envelope cloudevents and cloudevents-binary have a source"},
		{append(webhook, "--envelope", "cloudevents", "--ce-source", "not a uri%"), "--ce-source: "},
		{append(webhook, "--signature", "hmac-sha1"), "--signature: "},
		{append(webhook, "--signature", "x-signature", "--secret", "whsk_"+mark), "--secret: "},
		{[]string{"--url", "http://u:" + mark + "@127.0.0.1:9/", "--allow-private", "--basic", "a:b"}, "--basic and a --url with user information are both Basic authentication"},
		{[]string{"--url", "http://u:" + mark + "@127.0.0.1:9/", "--allow-private", "--bearer", "tok"}, "--url: its user information is Basic authentication"},
		{append(broker, "--bearer", mark), "authenticates a webhook's requests (http:// or https://), and this endpoint is a broker's"},
		{append(broker, "--basic", "u:"+mark), "this endpoint is a broker's"},
		{append(broker, oauth2...), "this endpoint is a broker's"},
		{append(broker, "--tls-ca", pki.caFile), "--tls-* configure a webhook's https:// requests, and this endpoint is a broker's"},
		{append(broker, "--envelope", "cloudevents-binary"), "--envelope cloudevents-binary: NATS has no CloudEvents binary mode"},
		{append(broker, "--signature", "svix"), "--signature: a broker's endpoint signs nothing"},
		{append(broker, "--secret", "@"+secretFile(t, newWhsec())), "--secret: a broker's endpoint signs nothing"},
	}
	for _, c := range cases {
		args := append(append([]string{"endpoints", "add"}, db...), c.args...)
		code, out := runCmd(t, command(args...))
		line := strings.TrimSpace(out)
		if code != 2 || strings.Contains(line, "\n") || !strings.Contains(line, c.want) {
			t.Errorf("endpoints add %q: exit %d, %q; want exit 2 and one line saying %q", c.args, code, out, c.want)
		}
		noSecretIn(t, "the refusal", out, []string{mark, pki.keyMaterial()})
	}
	if list := runOK(t, append([]string{"endpoints", "list"}, db...)...); !strings.HasPrefix(list, "no endpoints") {
		t.Errorf("refused adds added endpoints:\n%s", list)
	}
	// The same without the secrets key: refused before anything is read,
	// saying how to make one.
	code, out := runCmd(t, commandWithoutKey(append(append([]string{"endpoints", "add"}, db...), webhook...)...))
	if code != 2 || !strings.Contains(out, "postbox keys generate --type secrets-key") || !strings.Contains(out, "$POSTBOX_SECRETS_KEY") {
		t.Errorf("endpoints add without a secrets key: exit %d, %q", code, out)
	}
}

// endpoints update changes the secrets given, and only those, through one
// compare-and-swap write of the sealed credentials (endpoint.Reseal):
// --header replaces every header, --clear-headers and --auth none remove
// them, an auth flag replaces the authentication, --tls-* and --no-tls the
// client certificate; a change of settings alone leaves the sealed blob as
// it is; --filter with an empty value removes the filter. The SQLite file holds no secret.
func TestEndpointsUpdateReseals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pki := newPKIFiles(t)
	signing, first, second, bearer, basicPassword := newWhsec(), uniqueSecret("first"), uniqueSecret("second"), uniqueSecret("bearer"), uniqueSecret("basic")
	secrets := []string{signing, first, second, bearer, basicPassword, pki.keyMaterial()}
	id := addEndpointCmd(t, db, "--url", "https://127.0.0.1:9/hook", "--allow-private", "--name", "partner", "--secret", "@"+secretFile(t, signing),
		"--header", "X-First: @"+secretFile(t, first), "--bearer", "@"+secretFile(t, bearer))
	var printed strings.Builder
	update := func(env []string, args ...string) string {
		t.Helper()
		cmd := command(append(append([]string{"endpoints", "update", "partner"}, db...), args...)...)
		cmd.Env = append(cmd.Env, env...)
		code, out := runCmd(t, cmd)
		if code != 0 {
			t.Fatalf("endpoints update %q: exit %d\n%s", args, code, out)
		}
		printed.WriteString(out)
		return out
	}
	before, c := credsOf(t, s.Driver(), id)
	if c.Headers["X-First"] != first || c.Bearer != bearer || before.Sealed.Auth != "bearer+headers" {
		t.Fatalf("after add: auth %q, credentials not as given", before.Sealed.Auth)
	}

	if out := update([]string{"PBTEST_SECOND=" + second}, "--header", "X-Second: env:PBTEST_SECOND"); !strings.Contains(out, "updated: header") {
		t.Errorf("update --header printed %q", out)
	}
	e, c := credsOf(t, s.Driver(), id)
	if len(c.Headers) != 1 || c.Headers["X-Second"] != second || c.Bearer != bearer || c.Secret != signing {
		t.Errorf("after update --header: headers %d, bearer kept %v", len(c.Headers), c.Bearer == bearer)
	}
	if bytes.Equal(e.Sealed.Data, before.Sealed.Data) {
		t.Error("update --header left the sealed credentials as they were")
	}

	sealed := e.Sealed.Data
	update(nil, "--rate", "5/s", "--filter", `event_type == "order.created"`)
	if e, _ = credsOf(t, s.Driver(), id); !bytes.Equal(e.Sealed.Data, sealed) || e.RatePerSecond != 5 || e.Filter != `event_type == "order.created"` {
		t.Errorf("update --rate --filter: rate %v, filter %q, sealed data changed %v", e.RatePerSecond, e.Filter, !bytes.Equal(e.Sealed.Data, sealed))
	}
	if last := usageError(t, append([]string{"endpoints", "update", "partner", "--filter", "payload.total >"}, db...)...); !regexp.MustCompile(`--filter: 1:16: `).MatchString(last) {
		t.Errorf("update with a bad filter said %q, want its line:column", last)
	}
	update(nil, "--filter", "")
	if e, _ = credsOf(t, s.Driver(), id); e.Filter != "" {
		t.Errorf("update --filter '' left %q", e.Filter)
	}

	update(nil, "--clear-headers")
	if e, c = credsOf(t, s.Driver(), id); c.Headers != nil || c.Bearer != bearer || e.Sealed.Auth != "bearer" {
		t.Errorf("after --clear-headers: auth %q", e.Sealed.Auth)
	}
	update(nil, "--auth", "none")
	if e, c = credsOf(t, s.Driver(), id); c.Bearer != "" || e.Sealed.Auth != "" || c.Secret == "" {
		t.Errorf("after --auth none: auth %q, signing secret kept %v", e.Sealed.Auth, c.Secret != "")
	}
	update(nil, "--basic", "bob:"+basicPassword, "--tls-cert", pki.certFile, "--tls-key", pki.keyFile)
	if e, c = credsOf(t, s.Driver(), id); c.Basic == nil || c.Basic.Password != basicPassword || c.TLS == nil || e.Sealed.Auth != "basic+mtls" {
		t.Errorf("after --basic --tls-*: auth %q", e.Sealed.Auth)
	}
	update(nil, "--bearer", "@"+secretFile(t, bearer))
	if e, c = credsOf(t, s.Driver(), id); c.Basic != nil || c.Bearer != bearer || e.Sealed.Auth != "bearer+mtls" {
		t.Errorf("after --bearer: auth %q, basic left %v", e.Sealed.Auth, c.Basic != nil)
	}
	update(nil, "--no-tls", "--envelope", "cloudevents-binary", "--ce-source", "/shop", "--signature", "standard;prefix=acme")
	if e, c = credsOf(t, s.Driver(), id); c.TLS != nil || e.Sealed.Auth != "bearer" || e.Envelope != "cloudevents-binary;source=/shop" || !strings.Contains(e.Signature, "prefix=") {
		t.Errorf("after --no-tls --envelope --signature: auth %q, envelope %q, signature %q", e.Sealed.Auth, e.Envelope, e.Signature)
	}
	update(nil, "--signature", "", "--envelope", "raw")
	if e, _ = credsOf(t, s.Driver(), id); e.Signature != "" || e.Envelope != "" {
		t.Errorf("after --signature '' --envelope raw: %q, %q", e.Signature, e.Envelope)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--auth", "none", "--bearer", "x"}, "give --auth none or --bearer, not both"},
		{[]string{"--auth", "basic"}, "--auth \"basic\": the only value is none"},
		{[]string{"--header", "X-A: b", "--clear-headers"}, "or --clear-headers, not both"},
		{[]string{"--no-tls", "--tls-ca", pki.caFile}, "give --no-tls or --tls-ca, not both"},
		{[]string{"--url", "nats://127.0.0.1:4222?subject=a.b"}, "this endpoint is a broker's"},
		{[]string{"--url", "http://127.0.0.1:9/", "--tls-ca", pki.caFile}, "--tls-* need an https:// URL"},
		{[]string{}, "nothing to change"},
	} {
		if last := usageError(t, append(append([]string{"endpoints", "update", "partner"}, db...), c.args...)...); !strings.Contains(last, c.want) {
			t.Errorf("endpoints update %q said %q, want %q", c.args, last, c.want)
		}
	}
	// A webhook's authentication goes with its URL to a broker's only if
	// removed in the same command.
	update(nil, "--url", "nats://user:pw@127.0.0.1:4222?subject=a.b", "--auth", "none")
	if e, c = credsOf(t, s.Driver(), id); c.Bearer != "" || c.URLUser != "user" || c.URLPassword != "pw" || strings.Contains(e.URL, "pw") || c.Secret == "" {
		t.Errorf("after --url nats://user:pw@... --auth none: url %s, credentials not as asked", e.URL)
	}
	code, out := runCmd(t, commandWithoutKey(append([]string{"endpoints", "update", "partner", "--rate", "1/s"}, db...)...))
	if code != 2 || !strings.Contains(out, "endpoints update needs the secrets key") {
		t.Errorf("update without the secrets key: exit %d, %q", code, out)
	}

	printed.WriteString(runOK(t, append([]string{"endpoints", "show", "partner"}, db...)...))
	noSecretIn(t, "the commands' output", printed.String(), secrets)
	s.Close()
	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		noSecretIn(t, "the SQLite file "+filepath.Base(f), string(b), secrets)
	}
}

// endpoints test opens the endpoint's sealed credentials with the secrets
// key: its test event reaches an https:// endpoint that asks for a client
// certificate of its own CA, with a token from an OAuth 2.0 token
// endpoint that the same server serves.
func TestEndpointsTestWithMTLSAndOAuth2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	pki := newPKIFiles(t)
	clientSecret, token := uniqueSecret("client"), uniqueSecret("token")
	var (
		mu    sync.Mutex
		calls []string
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := ""
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/token":
			id, secret, _ := r.BasicAuth()
			if err := r.ParseForm(); err == nil && id == "" {
				id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
			}
			if id != "postbox" || secret != clientSecret {
				http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
				return
			}
			calls = append(calls, "token by "+cn)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"access_token":"` + token + `","token_type":"Bearer","expires_in":3600}`))
		case "/hook":
			if r.Header.Get("Authorization") != "Bearer "+token {
				http.Error(w, "no token", http.StatusUnauthorized)
				return
			}
			calls = append(calls, "hook by "+cn+" "+r.Header.Get("Postbox-Event-Type"))
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.clientCAs}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	add := command(append([]string{"endpoints", "add", "--url", srv.URL + "/hook", "--allow-private", "--name", "partner",
		"--tls-cert", pki.certFile, "--tls-key", pki.keyFile, "--tls-ca", pki.caFile,
		"--oauth2-token-url", srv.URL + "/token", "--oauth2-client-id", "postbox", "--oauth2-client-secret", "env:PBTEST_CLIENT_SECRET"}, db...)...)
	add.Env = append(add.Env, "PBTEST_CLIENT_SECRET="+clientSecret)
	if code, out := runCmd(t, add); code != 0 {
		t.Fatalf("endpoints add: exit %d\n%s", code, out)
	}
	out := runOK(t, append([]string{"endpoints", "test", "partner"}, db...)...)
	mu.Lock()
	got := slices.Clone(calls)
	mu.Unlock()
	if !strings.Contains(out, "delivered") || !slices.Equal(got, []string{"token by postbox-relay", "hook by postbox-relay postbox.test"}) {
		t.Errorf("endpoints test printed %q; the server saw %q", out, got)
	}
	noSecretIn(t, "endpoints test", out, []string{clientSecret, token, pki.keyMaterial()})
	code, out := runCmd(t, commandWithoutKey(append([]string{"endpoints", "test", "partner"}, db...)...))
	if code != 2 || !strings.Contains(out, "endpoints test needs the secrets key") {
		t.Errorf("endpoints test without the secrets key: exit %d, %q", code, out)
	}
}
