package main_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/store/postgres"
)

// The endpoints of TestEndpointsFromOutside, by the name each is added
// under.
const (
	outsideMTLS  = "mtls"  // webhook, client certificate, standard envelope
	outsideOAuth = "oauth" // webhook, OAuth2 client credentials, raw
	outsideNATS  = "nats"  // NATS subject, cloudevents (structured)
	outsideKafka = "kafka" // Kafka topic, cloudevents-binary
)

// outsideEvent is an event TestEndpointsFromOutside writes, and the
// endpoints whose filters want it.
type outsideEvent struct {
	aggregateType, aggregateID, eventType, payload string
	headers                                        map[string]string
	viaGo                                          bool // written with the Go API, not plain SQL
	want                                           []string
	id                                             string
}

// The Done-when of issue 26, checked from outside as a user does it: one
// database, migrated by `postbox migrate`; a secrets key from `postbox
// keys generate`; four endpoints added by `postbox endpoints add`, each
// with its own CEL filter and envelope — a webhook behind mTLS (a client
// certificate that the server requires and verifies) with a static
// header, a webhook behind OAuth2 client credentials under a renamed
// signature profile, a NATS JetStream subject and a Kafka topic. Events
// are written with plain SQL and one with the Go API; `postbox relay
// --endpoints` refuses to start without the key, then with it delivers
// each event exactly once to each endpoint that wants it and to no other,
// in that endpoint's envelope, the webhooks' signatures verified with
// package signature. Finally a `pg_dump --data-only` of the database, the
// relay's log and what list and show print hold no secret: not the
// signing secrets, the OAuth2 client secret, the client key, the static
// header's value or the secrets key.
func TestEndpointsFromOutside(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	// The brokers: a stream of the test's own on the machine's NATS, and
	// an in-process Kafka cluster that the relay reaches over TCP.
	_, js := natstest.Connect(t, natstest.URL())
	stream, prefix := natstest.Stream(t, js, nil)
	_, brokers := kafkatest.NewCluster(t)
	topic := strings.ToLower(natstest.Name("outside"))
	kafkatest.CreateTopic(t, brokers, topic, 3)
	kafkaReader := kafkatest.NewReader(t, brokers, topic)

	// The webhooks: one behind mTLS, one behind OAuth2 and its token
	// server.
	certs := newOutsidePKI(t, dir)
	apiKey := "ak-" + outsideRandomHex(t, 16)
	mtlsHook := newOutsideHook(outsideMTLS, func(r *http.Request) error {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return errors.New("no client certificate")
		}
		if cn := r.TLS.PeerCertificates[0].Subject.CommonName; cn != outsideClientCN {
			return fmt.Errorf("client certificate of %q", cn)
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Api-Key")), []byte(apiKey)) != 1 {
			return errors.New("the static header X-Api-Key is missing or wrong")
		}
		return nil
	})
	mtlsSrv := httptest.NewUnstartedServer(mtlsHook)
	mtlsSrv.TLS = &tls.Config{
		Certificates: []tls.Certificate{certs.server}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: certs.pool, MinVersion: tls.VersionTLS12,
	}
	mtlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	mtlsSrv.StartTLS()
	t.Cleanup(mtlsSrv.Close)
	certs.checkRequired(t, mtlsSrv.URL)

	oauthClientID, oauthSecret := "postbox-relay", "cs-"+outsideRandomHex(t, 16)
	accessToken := "at-" + outsideRandomHex(t, 16)
	tokens := newOutsideTokenServer(t, oauthClientID, oauthSecret, accessToken)
	oauthHook := newOutsideHook(outsideOAuth, func(r *http.Request) error {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+accessToken)) != 1 {
			return errors.New("the Authorization header is missing or not the token server's bearer token")
		}
		return nil
	})
	oauthSrv := httptest.NewServer(oauthHook)
	t.Cleanup(oauthSrv.Close)

	// A fresh database, migrated by the command.
	dbURL := outsideDatabase(t)
	db := []string{"--db", dbURL}
	outsideRun(t, nil, append([]string{"migrate"}, db...)...)

	sealKey := generateKeys(t, "--type", "secrets-key")["secrets key"]
	if !strings.HasPrefix(sealKey, "pbkey_") {
		t.Fatalf("keys generate --type secrets-key printed %q, want a pbkey_", sealKey)
	}
	env := []string{"POSTBOX_SECRETS_KEY=" + sealKey, "OUTSIDE_OAUTH2_SECRET=" + oauthSecret}

	// The endpoints, as the design's flags add them.
	var printed []string // what the commands printed that must hold no secret
	add := func(name string, args ...string) string {
		t.Helper()
		out := outsideRun(t, env, append(append([]string{"endpoints", "add", "--name", name}, db...), args...)...)
		if !endpointIDLine.MatchString(out) {
			t.Fatalf("endpoints add %s printed %q, want its id", name, out)
		}
		m := regexp.MustCompile(`(whsec_[A-Za-z0-9+/=]+)`).FindStringSubmatch(out)
		signing := ""
		if m != nil {
			signing = m[1]
		}
		printed = append(printed, strings.ReplaceAll(out, signing, "<its signing secret>"))
		return signing
	}
	mtlsSecret := add(outsideMTLS, "--url", mtlsSrv.URL+"/hooks/orders", "--allow-private",
		"--tls-cert", certs.clientCertFile, "--tls-key", certs.clientKeyFile, "--tls-ca", certs.caFile,
		"--header", "X-Api-Key: "+apiKey,
		"--filter", "payload.total > 100",
		"--envelope", "standard")
	oauthSecretSigning := add(outsideOAuth, "--url", oauthSrv.URL+"/hooks/payments", "--allow-private",
		"--oauth2-token-url", tokens.URL+"/oauth/token", "--oauth2-client-id", oauthClientID,
		"--oauth2-client-secret", "env:OUTSIDE_OAUTH2_SECRET",
		"--oauth2-scope", "events:write", "--oauth2-param", "audience=https://hooks.example",
		"--signature", "standard;prefix=acme",
		"--filter", `event_type.startsWith("payment.")`,
		"--envelope", "raw")
	for name, s := range map[string]string{outsideMTLS: mtlsSecret, outsideOAuth: oauthSecretSigning} {
		if s == "" {
			t.Fatalf("endpoints add %s printed no whsec_ signing secret", name)
		}
	}
	if s := add(outsideNATS, "--url", natstest.URL()+"?subject="+prefix+".{event_type}",
		"--filter", `payload.?region.orValue("") == "eu"`,
		"--envelope", "cloudevents", "--ce-source", "/shop/orders"); s != "" {
		t.Fatalf("endpoints add of a NATS subject printed a signing secret")
	}
	if s := add(outsideKafka, "--url", kafkatest.URL(brokers, "topic="+topic),
		"--filter", `event_type.startsWith("order.") && payload.total <= 100`,
		"--envelope", "cloudevents-binary"); s != "" {
		t.Fatalf("endpoints add of a Kafka topic printed a signing secret")
	}
	mtlsHook.setVerifier(t, signature.Profile{}, mtlsSecret)
	acme, err := signature.ParseProfile("standard;prefix=acme")
	if err != nil {
		t.Fatal(err)
	}
	oauthHook.setVerifier(t, acme, oauthSecretSigning)
	printed = append(printed, outsideRun(t, nil, append([]string{"endpoints", "list"}, db...)...))
	for _, name := range []string{outsideMTLS, outsideOAuth, outsideNATS, outsideKafka} {
		printed = append(printed, outsideRun(t, nil, append([]string{"endpoints", "show", "--json", name}, db...)...))
	}

	// The events: plain SQL as the article writes them, and one through
	// the Go API. Each filter is exercised both ways; two events no
	// endpoint wants (one whose total is a string: the filters that
	// compare it fail, which means "no match"), two that one endpoint
	// alone wants.
	events := []*outsideEvent{
		{aggregateType: "order", aggregateID: "1", eventType: "order.created", payload: `{"total": 250, "region": "us"}`, want: []string{outsideMTLS}},
		{aggregateType: "order", aggregateID: "2", eventType: "order.created", payload: `{"total": 40, "region": "eu"}`, want: []string{outsideNATS, outsideKafka}},
		{aggregateType: "payment", aggregateID: "3", eventType: "payment.refunded", payload: `{"total": 500, "region": "eu"}`, want: []string{outsideMTLS, outsideOAuth, outsideNATS}},
		{aggregateType: "payment", aggregateID: "4", eventType: "payment.captured", payload: `{"amount": 12, "region": "us"}`, want: []string{outsideOAuth}},
		{aggregateType: "customer", aggregateID: "5", eventType: "customer.updated", payload: `{"region": "us"}`},
		{aggregateType: "order", aggregateID: "6", eventType: "order.paid", payload: `{"total": 100, "region": "eu"}`,
			headers: map[string]string{"Tenant": "acme"}, viaGo: true, want: []string{outsideNATS, outsideKafka}},
		{aggregateType: "order", aggregateID: "7", eventType: "order.created", payload: `{"total": "999", "region": "apac"}`},
	}
	pool := pgtest.PoolAt(t, dbURL)
	goStore, err := postgres.New(pool, postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.viaGo {
			ev := postbox.Event{ID: postbox.NewID(), AggregateType: e.aggregateType, AggregateID: e.aggregateID,
				EventType: e.eventType, Payload: []byte(e.payload), Headers: e.headers}
			if err := goStore.Enqueue(ctx, ev); err != nil {
				t.Fatal(err)
			}
			e.id = ev.ID.String()
			continue
		}
		err := pool.QueryRow(ctx, "insert into outbox_events (aggregate_type, aggregate_id, event_type, payload) values ($1, $2, $3, $4) returning id::text",
			e.aggregateType, e.aggregateID, e.eventType, e.payload).Scan(&e.id)
		if err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]map[string]*outsideEvent{} // endpoint → event id → event
	for _, name := range []string{outsideMTLS, outsideOAuth, outsideNATS, outsideKafka} {
		want[name] = map[string]*outsideEvent{}
	}
	for _, e := range events {
		for _, name := range e.want {
			want[name][e.id] = e
		}
	}

	// Without the key the relay refuses to start, in one clear line, and
	// delivers nothing.
	out, err := runCaptured(t, outsideCommand(ctx, nil, append([]string{"relay", "--endpoints"}, db...)...))
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() <= 0 || !strings.Contains(out, "POSTBOX_SECRETS_KEY") {
		t.Fatalf("relay --endpoints without the key: %v, want it to exit at once with a non-zero status, naming POSTBOX_SECRETS_KEY:\n%s", err, out)
	}
	printed = append(printed, out)
	if n := mtlsHook.total() + oauthHook.total() + len(kafkaReader.Records()); n != 0 {
		t.Fatalf("the relay that refused to start delivered %d events", n)
	}

	// With it, every event reaches every endpoint that wants it.
	relay := startOutsideRelay(t, env, append(db, "--endpoints", "--poll", "100ms", "--retention", "1h")...)
	relayLog := relay.log
	natsGot := func() map[string][]*jetstream.RawStreamMsg { return outsideNATSMessages(t, stream) }
	kafkaGot := func() map[string][]outsideRecord {
		got := map[string][]outsideRecord{}
		for _, rec := range kafkaReader.Records() {
			v := outsideRecord{headers: map[string]string{}, value: rec.Value}
			for _, h := range rec.Headers {
				v.headers[h.Key] = string(h.Value)
			}
			got[v.headers["ce_id"]] = append(got[v.headers["ce_id"]], v)
		}
		return got
	}
	quiet := func() bool { // nothing left to deliver; nothing failed
		var st struct {
			Pending, Processing, Failed int64
			Deliveries                  struct{ Pending, Processing, Failed int64 } `json:"endpoint_deliveries"`
		}
		jsonOut(t, &st, append([]string{"status", "--json"}, db...)...)
		if st.Failed != 0 || st.Deliveries.Failed != 0 {
			t.Fatalf("status: %d events and %d endpoint deliveries failed\nrelay log:\n%s", st.Failed, st.Deliveries.Failed, relay.log)
		}
		return st.Pending == 0 && st.Processing == 0 && st.Deliveries.Pending == 0 && st.Deliveries.Processing == 0
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if len(mtlsHook.ids()) >= len(want[outsideMTLS]) && len(oauthHook.ids()) >= len(want[outsideOAuth]) &&
			len(natsGot()) >= len(want[outsideNATS]) && len(kafkaGot()) >= len(want[outsideKafka]) && quiet() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: mtls got %v, oauth %v, nats %d, kafka %d events, token requests %d; problems: %v\nrelay log:\n%s",
				mtlsHook.ids(), oauthHook.ids(), len(natsGot()), len(kafkaGot()), tokens.requests.Load(),
				append(mtlsHook.problemList(), oauthHook.problemList()...), relayLog)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := relay.stop(30 * time.Second); err != nil {
		t.Fatalf("relay: %v\n%s", err, relayLog)
	}

	// Each endpoint received each event it wants once, none other, in its
	// envelope.
	for _, h := range []*outsideHook{mtlsHook, oauthHook} {
		for _, p := range h.problemList() {
			t.Errorf("%s webhook: %s", h.name, p)
		}
	}
	checkOutsideOnce(t, outsideMTLS, want[outsideMTLS], mtlsHook.ids())
	for id, reqs := range mtlsHook.received() {
		if e := want[outsideMTLS][id]; e != nil {
			checkStandardEnvelope(t, e, reqs[0])
		}
	}
	checkOutsideOnce(t, outsideOAuth, want[outsideOAuth], oauthHook.ids())
	for id, reqs := range oauthHook.received() {
		if e := want[outsideOAuth][id]; e != nil {
			checkRawWebhook(t, e, reqs[0])
		}
	}
	if n := tokens.requests.Load(); n < 1 || n > 2 {
		t.Errorf("the token server had %d requests, want the token fetched once and cached", n)
	}
	nats := natsGot()
	checkOutsideOnce(t, outsideNATS, want[outsideNATS], outsideCounts(nats))
	for id, msgs := range nats {
		if e := want[outsideNATS][id]; e != nil {
			checkStructuredNATS(t, e, msgs[0])
		}
	}
	kafka := kafkaGot()
	checkOutsideOnce(t, outsideKafka, want[outsideKafka], outsideCounts(kafka))
	for id, recs := range kafka {
		if e := want[outsideKafka][id]; e != nil {
			checkBinaryKafka(t, e, recs[0])
		}
	}
	logOutsideReceived(t, events, map[string]map[string]int{outsideMTLS: mtlsHook.ids(), outsideOAuth: oauthHook.ids(),
		outsideNATS: outsideCounts(nats), outsideKafka: outsideCounts(kafka)})
	t.Logf("the OAuth2 token server was asked %d times", tokens.requests.Load())

	// No secret at rest, in the relay's log, or in what the commands
	// printed.
	dumpCtx, cancelDump := context.WithTimeout(ctx, time.Minute)
	defer cancelDump()
	dump, err := exec.CommandContext(dumpCtx, "/usr/bin/pg_dump", "--data-only", "--dbname", dbURL).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	for _, e := range events {
		if !bytes.Contains(dump, []byte(e.id)) {
			t.Fatalf("the dump lacks the event %s: it is not the database the relay used", e.id)
		}
	}
	if !bytes.Contains(dump, []byte(mtlsSrv.URL)) {
		t.Fatal("the dump lacks the mTLS endpoint's URL: it is not the database of the endpoints")
	}
	secrets := []outsideSecret{
		outsideKeySecret(t, "the secrets key", sealKey, "pbkey_", base64.RawURLEncoding),
		outsideKeySecret(t, "the mTLS endpoint's signing secret", mtlsSecret, "whsec_", base64.StdEncoding),
		outsideKeySecret(t, "the OAuth2 endpoint's signing secret", oauthSecretSigning, "whsec_", base64.StdEncoding),
		outsideTextSecret("the OAuth2 client secret", oauthSecret),
		outsideTextSecret("the static header's value", apiKey),
		certs.keySecret(),
	}
	checkNoSecret(t, secrets, map[string]string{"pg_dump --data-only": string(dump), "the relay's log": relayLog.String()})
	for i, p := range printed {
		checkNoSecret(t, secrets, map[string]string{fmt.Sprintf("command output %d", i): p})
	}
}

// logOutsideReceived logs what each endpoint received (got: event id →
// times).
func logOutsideReceived(t *testing.T, events []*outsideEvent, got map[string]map[string]int) {
	t.Helper()
	byID := map[string]*outsideEvent{}
	for _, e := range events {
		byID[e.id] = e
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		var received []string
		for id, n := range got[name] {
			if e := byID[id]; e != nil {
				received = append(received, fmt.Sprintf("%s/%s %s ×%d", e.aggregateType, e.aggregateID, e.eventType, n))
			} else {
				received = append(received, fmt.Sprintf("unknown %s ×%d", id, n))
			}
		}
		slices.Sort(received)
		t.Logf("%s received %s", name, strings.Join(received, ", "))
	}
}

// checkNoSecret checks that no text (by what it is) holds a form of a
// secret; it names the secret, never shows it.
func checkNoSecret(t *testing.T, secrets []outsideSecret, texts map[string]string) {
	t.Helper()
	for what, text := range texts {
		for _, s := range secrets {
			for i, f := range s.forms {
				if strings.Contains(text, f) {
					t.Errorf("%s holds %s (form %d of it)", what, s.name, i)
				}
			}
		}
	}
}

// outsideClientCN is the common name of the relay's client certificate.
const outsideClientCN = "postbox-relay-client"

// outsidePKI is a CA, a server certificate for 127.0.0.1 and a client
// certificate it signed; the CA and the client's certificate and key are
// written to PEM files for `postbox endpoints add`.
type outsidePKI struct {
	server                                tls.Certificate
	pool                                  *x509.CertPool
	caFile, clientCertFile, clientKeyFile string
	clientKeyPEM                          []byte
	clientKeyScalar                       []byte
}

func newOutsidePKI(t *testing.T, dir string) outsidePKI {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "postbox e2e CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) (certPEM, keyPEM []byte, key *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), key
	}
	serverCert, serverKey, _ := leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	clientCert, clientKey, clientPriv := leaf(3, outsideClientCN, x509.ExtKeyUsageClientAuth, nil)
	server, err := tls.X509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	p := outsidePKI{
		server: server, pool: x509.NewCertPool(),
		caFile: filepath.Join(dir, "ca.pem"), clientCertFile: filepath.Join(dir, "client.pem"), clientKeyFile: filepath.Join(dir, "client-key.pem"),
		clientKeyPEM: clientKey,
	}
	if p.clientKeyScalar, err = clientPriv.Bytes(); err != nil {
		t.Fatal(err)
	}
	p.pool.AddCert(ca)
	for file, data := range map[string][]byte{
		p.caFile:         pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		p.clientCertFile: clientCert,
		p.clientKeyFile:  clientKey,
	} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// checkRequired checks that the server at url refuses a client that
// trusts its CA but has no certificate: the deliveries that reach it
// presented the client certificate.
func (p outsidePKI) checkRequired(t *testing.T, url string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	resp, err := client.Post(url+"/hooks/orders", "application/json", strings.NewReader(`{}`))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the mTLS server answered %s to a client without a certificate", resp.Status)
	}
}

// keySecret is the client key in every form a store or a log might hold:
// each line of its PEM body, and its private scalar in hex.
func (p outsidePKI) keySecret() outsideSecret {
	s := outsideSecret{name: "the client key", forms: []string{hex.EncodeToString(p.clientKeyScalar)}}
	block, _ := pem.Decode(p.clientKeyPEM)
	body := base64.StdEncoding.EncodeToString(block.Bytes)
	for len(body) > 0 {
		n := min(len(body), 64)
		s.forms = append(s.forms, body[:n])
		body = body[n:]
	}
	return s
}

// outsideSecret is a secret, by name, in the forms to look for.
type outsideSecret struct {
	name  string
	forms []string
}

// outsideTextSecret is a secret text: as it is, and in hex (how pg_dump writes
// bytea).
func outsideTextSecret(name, s string) outsideSecret {
	return outsideSecret{name: name, forms: []string{s, hex.EncodeToString([]byte(s))}}
}

// outsideKeySecret is a prefixed base64 key (pbkey_, whsec_): whole, its body,
// and its bytes in standard base64 and hex.
func outsideKeySecret(t *testing.T, name, s, prefix string, enc *base64.Encoding) outsideSecret {
	t.Helper()
	body := strings.TrimPrefix(s, prefix)
	raw, err := enc.DecodeString(body)
	if err != nil || len(raw) < 16 {
		t.Fatalf("%s (%d characters) is not %s<base64>: %v", name, len(s), prefix, err)
	}
	return outsideSecret{name: name, forms: []string{s, body, base64.StdEncoding.EncodeToString(raw), hex.EncodeToString(raw)}}
}

// outsideRandomHex is n random bytes in hex.
func outsideRandomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// outsideDatabase creates a database of its own on the test server, dropped
// when the test ends, and returns its URL.
func outsideDatabase(t *testing.T) string {
	t.Helper()
	admin := pgtest.Pool(t)
	name := "pbe2e_" + outsideRandomHex(t, 6)
	if _, err := admin.Exec(context.Background(), "create database "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, "drop database if exists "+pgx.Identifier{name}.Sanitize()+" with (force)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// outsideTokenServer is an OAuth2 token endpoint that issues one bearer
// token to one client, by the client credentials grant.
type outsideTokenServer struct {
	URL      string
	requests atomic.Int64
}

func newOutsideTokenServer(t *testing.T, clientID, clientSecret, token string) *outsideTokenServer {
	t.Helper()
	ts := &outsideTokenServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.requests.Add(1)
		r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
		if r.Method != http.MethodPost || r.ParseForm() != nil {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		id, secret, ok := r.BasicAuth()
		if ok {
			id, _ = url.QueryUnescape(id)
			secret, _ = url.QueryUnescape(secret)
		} else {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if subtle.ConstantTimeCompare([]byte(id), []byte(clientID)) != 1 || subtle.ConstantTimeCompare([]byte(secret), []byte(clientSecret)) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
			return
		}
		if r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("scope") != "events:write" ||
			r.PostForm.Get("audience") != "https://hooks.example" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"error":"invalid_request","error_description":"grant %q scope %q audience %q"}`,
				r.PostForm.Get("grant_type"), r.PostForm.Get("scope"), r.PostForm.Get("audience"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, token)
	}))
	t.Cleanup(srv.Close)
	ts.URL = srv.URL
	return ts
}

// outsideRequest is a webhook request that passed every check.
type outsideRequest struct {
	header   http.Header
	body     []byte
	metadata signature.Metadata
}

// outsideHook is a webhook receiver: it checks the request's
// authentication (check), then its signatures with package signature's
// verifier, and records it by event id; a request that fails is refused
// and noted as a problem.
type outsideHook struct {
	name     string
	check    func(*http.Request) error
	verifier atomic.Pointer[signature.Verifier]

	mu       sync.Mutex
	got      map[string][]outsideRequest
	problems []string
}

func newOutsideHook(name string, check func(*http.Request) error) *outsideHook {
	return &outsideHook{name: name, check: check, got: map[string][]outsideRequest{}}
}

// setVerifier makes the hook verify with secret under profile p.
func (h *outsideHook) setVerifier(t *testing.T, p signature.Profile, secret string) {
	t.Helper()
	v, err := signature.NewProfileVerifier(p, 0, secret)
	if err != nil {
		t.Fatal(err)
	}
	h.verifier.Store(v)
}

func (h *outsideHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = h.check(r)
	}
	v := h.verifier.Load()
	if err == nil && v == nil {
		err = errors.New("a request before the endpoint was added")
	}
	var id string
	var md signature.Metadata
	if err == nil {
		id, _, err = v.Verify(r.Header, body)
	}
	if err == nil {
		md, err = v.VerifyMetadata(r.Header)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.problems = append(h.problems, fmt.Sprintf("refused a request: %v", err))
		http.Error(w, "refused", http.StatusUnauthorized)
		return
	}
	h.got[id] = append(h.got[id], outsideRequest{header: r.Header.Clone(), body: body, metadata: md})
}

func (h *outsideHook) received() map[string][]outsideRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	got := make(map[string][]outsideRequest, len(h.got))
	for id, reqs := range h.got {
		got[id] = slices.Clone(reqs)
	}
	return got
}

func (h *outsideHook) ids() map[string]int { return outsideCounts(h.received()) }

func (h *outsideHook) total() int {
	n := 0
	for _, c := range h.ids() {
		n += c
	}
	return n
}

func (h *outsideHook) problemList() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.problems)
}

// outsideCounts counts what was received, by event id.
func outsideCounts[V any](got map[string][]V) map[string]int {
	n := make(map[string]int, len(got))
	for id, vs := range got {
		n[id] = len(vs)
	}
	return n
}

// checkOutsideOnce checks that endpoint received each event it wants once and
// no other.
func checkOutsideOnce(t *testing.T, endpoint string, want map[string]*outsideEvent, got map[string]int) {
	t.Helper()
	for id, e := range want {
		if got[id] != 1 {
			t.Errorf("%s received %s (%s %s) %d times, want once", endpoint, id, e.eventType, e.payload, got[id])
		}
	}
	for id, n := range got {
		if want[id] == nil {
			t.Errorf("%s received %s %d times, an event its filter does not want", endpoint, id, n)
		}
	}
}

// outsideSameJSON reports whether a and b are the same JSON value.
func outsideSameJSON(a, b []byte) bool {
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}

// checkStandardEnvelope checks a request of the standard envelope: the
// body {"type", "timestamp", "data"} and the signed metadata of e.
func checkStandardEnvelope(t *testing.T, e *outsideEvent, r outsideRequest) {
	t.Helper()
	var body map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &body); err != nil || len(body) != 3 {
		t.Errorf("mtls, %s: body %s, want {type, timestamp, data}", e.id, r.body)
		return
	}
	var typ, ts string
	_ = json.Unmarshal(body["type"], &typ)
	_ = json.Unmarshal(body["timestamp"], &ts)
	if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || typ != e.eventType || !outsideSameJSON(body["data"], []byte(e.payload)) {
		t.Errorf("mtls, %s: body %s, want the standard envelope of %s %s", e.id, r.body, e.eventType, e.payload)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("mtls, %s: Content-Type %q", e.id, ct)
	}
	if r.metadata.EventType != e.eventType || r.metadata.AggregateID != e.aggregateID {
		t.Errorf("mtls, %s: signed metadata %+v, want %s of %s", e.id, r.metadata, e.eventType, e.aggregateID)
	}
}

// checkRawWebhook checks a request of the raw envelope under the acme
// signature profile: the payload as the body, no CloudEvents header, the
// signature under acme-* names only.
func checkRawWebhook(t *testing.T, e *outsideEvent, r outsideRequest) {
	t.Helper()
	if !outsideSameJSON(r.body, []byte(e.payload)) {
		t.Errorf("oauth, %s: body %s, want the payload %s", e.id, r.body, e.payload)
	}
	if r.header.Get("Ce-Specversion") != "" || r.header.Get("Webhook-Signature") != "" || r.header.Get("Acme-Signature") == "" {
		t.Errorf("oauth, %s: headers %v, want the acme-* signature and no CloudEvents attribute", e.id, r.header)
	}
	if r.metadata.EventType != e.eventType || r.metadata.AggregateID != e.aggregateID {
		t.Errorf("oauth, %s: signed metadata %+v, want %s of %s", e.id, r.metadata, e.eventType, e.aggregateID)
	}
}

// checkStructuredNATS checks a NATS message of the cloudevents envelope
// (structured mode, the source given with --ce-source).
func checkStructuredNATS(t *testing.T, e *outsideEvent, m *jetstream.RawStreamMsg) {
	t.Helper()
	var ce struct {
		SpecVersion     string          `json:"specversion"`
		ID              string          `json:"id"`
		Source          string          `json:"source"`
		Type            string          `json:"type"`
		Subject         string          `json:"subject"`
		AggregateType   string          `json:"aggregatetype"`
		DataContentType string          `json:"datacontenttype"`
		Time            time.Time       `json:"time"`
		Data            json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(m.Data, &ce); err != nil {
		t.Errorf("nats, %s: body %s: %v", e.id, m.Data, err)
		return
	}
	if ce.SpecVersion != "1.0" || ce.ID != e.id || ce.Source != "/shop/orders" || ce.Type != e.eventType ||
		ce.Subject != e.aggregateID || ce.AggregateType != e.aggregateType || ce.DataContentType != "application/json" ||
		ce.Time.IsZero() || !outsideSameJSON(ce.Data, []byte(e.payload)) {
		t.Errorf("nats, %s: body %s, want a structured CloudEvent of %s %s", e.id, m.Data, e.eventType, e.payload)
	}
	if ct := m.Header.Get("Content-Type"); ct != "application/cloudevents+json; charset=utf-8" {
		t.Errorf("nats, %s: Content-Type %q", e.id, ct)
	}
	for name, value := range e.headers {
		if m.Header.Get(name) != value {
			t.Errorf("nats, %s: header %s = %q, want the event's %q", e.id, name, m.Header.Get(name), value)
		}
	}
}

// outsideRecord is a Kafka record's headers and value.
type outsideRecord struct {
	headers map[string]string
	value   []byte
}

// checkBinaryKafka checks a Kafka record of the cloudevents-binary
// envelope: the payload as the value, the attributes as ce_* headers.
func checkBinaryKafka(t *testing.T, e *outsideEvent, r outsideRecord) {
	t.Helper()
	h := r.headers
	if h["ce_specversion"] != "1.0" || h["ce_id"] != e.id || h["ce_source"] != "/postbox" || h["ce_type"] != e.eventType ||
		h["ce_subject"] != e.aggregateID || h["ce_aggregatetype"] != e.aggregateType || h["ce_time"] == "" ||
		h["content-type"] != "application/json" || h[postbox.HeaderEventID] != e.id {
		t.Errorf("kafka, %s: headers %v, want the binary CloudEvent of %s", e.id, h, e.eventType)
	}
	if !outsideSameJSON(r.value, []byte(e.payload)) {
		t.Errorf("kafka, %s: value %s, want the payload %s", e.id, r.value, e.payload)
	}
	for name, value := range e.headers {
		if h[name] != value {
			t.Errorf("kafka, %s: header %s = %q, want the event's %q", e.id, name, h[name], value)
		}
	}
}

// outsideNATSMessages reads every message of the stream, by event id
// (Nats-Msg-Id).
func outsideNATSMessages(t *testing.T, st jetstream.Stream) map[string][]*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatalf("nats stream info: %v", err)
	}
	got := map[string][]*jetstream.RawStreamMsg{}
	if info.State.Msgs == 0 {
		return got
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("nats message %d: %v", seq, err)
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		got[id] = append(got[id], m)
	}
	return got
}

// outsideCommand is the postbox command with args, killed when ctx is
// done, with PATH, HOME and env alone in its environment: a secrets key
// only when env gives one.
func outsideCommand(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	return cmd
}

// outsideRun runs the postbox command with args and env, which must
// succeed within a minute, and returns its standard output.
func outsideRun(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := outsideCommand(ctx, env, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("postbox %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// outsideRelay is a `postbox relay` process and its log.
type outsideRelay struct {
	cmd    *exec.Cmd
	log    *logbuf.Buffer
	exited chan struct{} // closed when the process has exited
}

// startOutsideRelay starts `postbox relay` with args and the variables
// env; it is killed when the test ends.
func startOutsideRelay(t *testing.T, env []string, args ...string) *outsideRelay {
	t.Helper()
	r := &outsideRelay{cmd: outsideCommand(context.Background(), env, append([]string{"relay"}, args...)...), log: &logbuf.Buffer{}, exited: make(chan struct{})}
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.exited
	})
	return r
}

// stop sends SIGTERM and waits up to timeout for the relay to exit; it
// returns nil when it exited with status 0.
func (r *outsideRelay) stop(timeout time.Duration) error {
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-r.exited:
	case <-time.After(timeout):
		return fmt.Errorf("still running %v after SIGTERM", timeout)
	}
	if !r.cmd.ProcessState.Success() {
		return fmt.Errorf("exited after SIGTERM: %v", r.cmd.ProcessState)
	}
	return nil
}
