package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/store/postgres"
)

// startRelayWithKey starts postbox relay with args and the secrets key
// env gives ($POSTBOX_SECRETS_KEY=..., or nothing), logging to the
// returned buffer; it is killed when t ends.
func startRelayWithKey(t *testing.T, env []string, args ...string) (*logbuf.Buffer, func()) {
	t.Helper()
	logs := &logbuf.Buffer{}
	cmd := commandWithoutKey(append([]string{"relay"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("relay log:\n%s", logs)
		}
	})
	return logs, stop
}

// relayEndpointsArgs are the flags of an endpoints-mode relay of db that
// keeps delivered events and polls often.
func relayEndpointsArgs(db []string) []string {
	return append(append([]string{}, db...), "--endpoints", "--poll", "100ms", "--retention", "1h")
}

// relay --endpoints refuses to start without the secrets key, saying how
// to make one and where to put it; a key file others may read is warned
// about; the relay logs the key's id, never the key.
func TestRelayEndpointsNeedsTheSecretsKey(t *testing.T) {
	s, db := schemaStore(t)
	cmd := commandWithoutKey(append([]string{"relay"}, relayEndpointsArgs(db)...)...)
	last := runFailsWith(t, cmd, 2)
	for _, want := range []string{"relay --endpoints needs the secrets key", "postbox keys generate --type secrets-key", "$POSTBOX_SECRETS_KEY", "--secrets-key-file"} {
		if !strings.Contains(last, want) {
			t.Errorf("relay --endpoints without a key said %q, want %q in it", last, want)
		}
	}
	missing := filepath.Join(t.TempDir(), "no-such-key")
	if last := runFailsWith(t, commandWithoutKey(append([]string{"relay", "--secrets-key-file", missing}, relayEndpointsArgs(db)...)...), 2); !strings.Contains(last, missing) {
		t.Errorf("relay with a missing key file said %q, want the file named", last)
	}
	bad := commandWithoutKey(append([]string{"relay"}, relayEndpointsArgs(db)...)...)
	bad.Env = append(bad.Env, keyring.EnvVar+"=pbkey_short")
	if last := runFailsWith(t, bad, 2); !strings.Contains(last, "malformed key") || strings.Contains(last, "pbkey_short") {
		t.Errorf("relay with a malformed key said %q, want it refused without being quoted", last)
	}
	if last := runFailsWith(t, command("relay", "--sink", "http://127.0.0.1:9/", "--webhook-secret", secret, "--secrets-key-file", missing, "--db", "sqlite:/nonexistent"), 2); !strings.Contains(last, "--secrets-key-file") || !strings.Contains(last, "only with --endpoints") {
		t.Errorf("relay --sink --secrets-key-file said %q", last)
	}

	rc := receiver.New(t, secret, nil)
	addEndpointCmd(t, db, "--url", rc.URL, "--allow-private", "--secret", secret)
	keyFile := filepath.Join(t.TempDir(), "secrets.key")
	if err := os.WriteFile(keyFile, []byte("# the relay's secrets key\n"+secretsKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logs, _ := startRelayWithKey(t, nil, append([]string{"--secrets-key-file", keyFile}, relayEndpointsArgs(db)...)...)
	insertTyped(t, s, "1", "order.created")
	rc.WaitAccepted(t, 1, 20*time.Second)
	k, err := keyring.Parse(secretsKey)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the start line", 10*time.Second, func() bool { return strings.Contains(logs.String(), k.PrimaryID()) })
	if !strings.Contains(logs.String(), "may be read by other users") {
		t.Errorf("no warning about a key file of mode 0644:\n%s", logs)
	}
	if strings.Contains(logs.String(), strings.TrimPrefix(secretsKey, keyring.KeyPrefix)) {
		t.Errorf("the relay logged the secrets key:\n%s", logs)
	}
}

// A relay delivers to an endpoint with every sealed setting: its bearer
// token and static header on the request, its signature profile (svix
// headers), its envelope (Standard Webhooks' payload structure) and its
// filter; none of its secrets reaches the log.
func TestRelayEndpointsDeliversWithSealedCredentials(t *testing.T) {
	s, db := schemaStore(t)
	signing, bearer, apiKey := newWhsec(), uniqueSecret("bearer"), uniqueSecret("api")
	verifier, err := signature.NewProfileVerifier(signature.Profile{Scheme: signature.Standard, Names: signature.SvixNames}, 5*time.Minute, signing)
	if err != nil {
		t.Fatal(err)
	}
	type request struct {
		auth, apiKey string
		verified     bool
		body         map[string]any
	}
	var (
		mu   sync.Mutex
		reqs []request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _, verr := verifier.Verify(r.Header, body)
		req := request{auth: r.Header.Get("Authorization"), apiKey: r.Header.Get("X-Api-Key"), verified: verr == nil && r.Header.Get("svix-signature") != ""}
		_ = json.Unmarshal(body, &req.body)
		mu.Lock()
		reqs = append(reqs, req)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	add := command(append([]string{"endpoints", "add", "--url", srv.URL + "/hook", "--allow-private", "--secret", "env:PBTEST_SIGNING",
		"--bearer", "env:PBTEST_BEARER", "--header", "X-Api-Key: @" + secretFile(t, apiKey), "--signature", "svix", "--envelope", "standard",
		"--filter", "payload.n >= 2"}, db...)...)
	add.Env = append(add.Env, "PBTEST_SIGNING="+signing, "PBTEST_BEARER="+bearer)
	if code, out := runCmd(t, add); code != 0 {
		t.Fatalf("endpoints add: exit %d\n%s", code, out)
	}
	logs, _ := startRelayWithKey(t, []string{keyring.EnvVar + "=" + secretsKey}, relayEndpointsArgs(db)...)
	for n := range 5 {
		if _, err := s.Pool().Exec(context.Background(), "insert into "+s.Table("outbox_events")+
			"(aggregate_type, aggregate_id, event_type, payload) values ('order', $1, 'order.created', $2)", fmt.Sprint(n), fmt.Sprintf(`{"n": %d}`, n)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the 3 events the filter lets through", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reqs) >= 3
	})
	time.Sleep(300 * time.Millisecond) // room for a delivery the filter should have stopped
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 3 {
		t.Errorf("the endpoint received %d requests, want the 3 events with n >= 2", len(reqs))
	}
	for _, r := range reqs {
		data, _ := r.body["data"].(map[string]any)
		if r.auth != "Bearer "+bearer || r.apiKey != apiKey || !r.verified || r.body["type"] != "order.created" || data == nil || data["n"].(float64) < 2 {
			t.Errorf("a request: bearer %v, header %v, svix signature verified %v, body %v", r.auth == "Bearer "+bearer, r.apiKey == apiKey, r.verified, r.body)
		}
	}
	noSecretIn(t, "the relay's log", logs.String(), []string{signing, strings.TrimPrefix(signing, "whsec_"), bearer, apiKey})
}

// A key rotation: rekey with "NEW,OLD" re-wraps the endpoints sealed by
// OLD (a dry run first writes nothing), again finds them current, and a
// relay given NEW alone delivers; rekey with a keyring that lacks the key
// of an endpoint fails, naming the endpoint and the key's id, never a
// secret.
func TestEndpointsRekeyRotation(t *testing.T) {
	s, db := schemaStore(t)
	rc := receiver.New(t, secret, nil)
	id := addEndpointCmd(t, db, "--url", rc.URL, "--allow-private", "--name", "partner", "--secret", secret)
	oldKey, newKey := secretsKey, keyring.GenerateKey()
	oldRing, _ := keyring.Parse(oldKey)
	newRing, _ := keyring.Parse(newKey)
	rekey := func(keys string, args ...string) (int, string) {
		cmd := commandWithoutKey(append(append([]string{"endpoints", "rekey"}, db...), args...)...)
		cmd.Env = append(cmd.Env, keyring.EnvVar+"="+keys)
		return runCmd(t, cmd)
	}
	keyOf := func() string {
		e, err := s.EndpointGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return e.Sealed.Key
	}
	var printed strings.Builder
	code, out := rekey(newKey+","+oldKey, "--dry-run")
	printed.WriteString(out)
	if code != 0 || !strings.Contains(out, "1 endpoints would be re-wrapped under key "+newRing.PrimaryID()) || keyOf() != oldRing.PrimaryID() {
		t.Errorf("rekey --dry-run: exit %d, %q; the endpoint's key is %s, want %s still", code, out, keyOf(), oldRing.PrimaryID())
	}
	code, out = rekey(newKey + "," + oldKey)
	printed.WriteString(out)
	if code != 0 || !strings.Contains(out, "1 endpoints re-wrapped under key "+newRing.PrimaryID()) || keyOf() != newRing.PrimaryID() {
		t.Errorf("rekey NEW,OLD: exit %d, %q; the endpoint's key is %s", code, out, keyOf())
	}
	code, out = rekey(newKey + "," + oldKey)
	printed.WriteString(out)
	if code != 0 || !strings.Contains(out, "1 endpoints already sealed by key "+newRing.PrimaryID()) {
		t.Errorf("rekey again: exit %d, %q", code, out)
	}
	startRelayWithKey(t, []string{keyring.EnvVar + "=" + newKey}, relayEndpointsArgs(db)...)
	insertTyped(t, s, "1", "order.created")
	rc.WaitAccepted(t, 1, 20*time.Second)

	code, out = rekey(oldKey)
	printed.WriteString(out)
	if code != 1 || !strings.Contains(out, id.String()+" (partner): ") || !strings.Contains(out, newRing.PrimaryID()) || !strings.Contains(out, "1 endpoints failed") {
		t.Errorf("rekey with a keyring that lacks the endpoint's key: exit %d, %q", code, out)
	}
	if show := runOK(t, append([]string{"endpoints", "show", "partner"}, db...)...); !strings.Contains(show, "sealed by key "+newRing.PrimaryID()) {
		t.Errorf("show after the rotation:\n%s", show)
	}
	noSecretIn(t, "endpoints rekey", printed.String(), []string{secret, strings.TrimPrefix(secret, "whsec_"), oldKey, newKey,
		strings.TrimPrefix(oldKey, keyring.KeyPrefix), strings.TrimPrefix(newKey, keyring.KeyPrefix)})
}

// insertLegacyEndpoint writes an endpoint as migration 0013 left them: its
// signing secret in clear in the secret column, nothing sealed.
func insertLegacyEndpoint(t *testing.T, s *postgres.Store, name, url, secret string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	if _, err := s.Pool().Exec(context.Background(), "insert into "+s.Table("endpoints")+"(id, name, url, secret, allow_private) values ($1, $2, $3, $4, true)",
		id, name, url, secret); err != nil {
		t.Fatal(err)
	}
	return id
}

// An endpoint written before secrets were sealed is listed as in clear,
// delivered to as it is, and sealed by rekey (its clear column emptied);
// a relay then delivers with the sealed secret.
func TestLegacyClearEndpointDeliveredThenSealedByRekey(t *testing.T) {
	s, db := schemaStore(t)
	rc := receiver.New(t, secret, nil)
	id := insertLegacyEndpoint(t, s, "legacy", rc.URL, secret)
	if list := runOK(t, append([]string{"endpoints", "list"}, db...)...); !strings.Contains(list, "in clear") || !strings.Contains(list, endpoint.Fingerprint(secret)) {
		t.Errorf("list of a clear endpoint:\n%s", list)
	}
	if show := runOK(t, append([]string{"endpoints", "show", "legacy"}, db...)...); !strings.Contains(show, "in clear (run postbox endpoints rekey)") {
		t.Errorf("show of a clear endpoint:\n%s", show)
	}
	_, stop := startRelayWithKey(t, []string{keyring.EnvVar + "=" + secretsKey}, relayEndpointsArgs(db)...)
	insertTyped(t, s, "1", "order.created")
	rc.WaitAccepted(t, 1, 20*time.Second)
	stop()

	out := runOK(t, append([]string{"endpoints", "rekey"}, db...)...)
	k, _ := keyring.Parse(secretsKey)
	if !strings.Contains(out, "1 endpoints sealed by key "+k.PrimaryID()) {
		t.Errorf("rekey of a clear endpoint printed %q", out)
	}
	var clear string
	var sealed []byte
	if err := s.Pool().QueryRow(context.Background(), "select secret, sealed from "+s.Table("endpoints")+" where id = $1", id).Scan(&clear, &sealed); err != nil {
		t.Fatal(err)
	}
	if clear != "" || len(sealed) == 0 {
		t.Errorf("after rekey: the clear column holds %d bytes, sealed %d", len(clear), len(sealed))
	}
	var j struct {
		Sealed bool
		Secret string `json:"secret_fingerprint"`
	}
	if err := json.Unmarshal([]byte(runOK(t, append([]string{"endpoints", "show", "--json", "legacy"}, db...)...)), &j); err != nil || !j.Sealed || j.Secret != endpoint.Fingerprint(secret) {
		t.Errorf("show --json after rekey: %+v, %v", j, err)
	}
	startRelayWithKey(t, []string{keyring.EnvVar + "=" + secretsKey}, relayEndpointsArgs(db)...)
	insertTyped(t, s, "2", "order.created")
	rc.WaitAccepted(t, 2, 20*time.Second)
}

// rotate-secret seals an endpoint whose secrets were in clear: the new
// secret signs, the old one too until the grace ends, both sealed.
func TestRotateSecretSealsALegacyEndpoint(t *testing.T) {
	s, db := schemaStore(t)
	id := insertLegacyEndpoint(t, s, "legacy", "http://127.0.0.1:9/hook", secret)
	next := newWhsec()
	cmd := command(append([]string{"endpoints", "rotate-secret", "--grace", "1h", "--secret", "env:PBTEST_NEXT", "legacy"}, db...)...)
	cmd.Env = append(cmd.Env, "PBTEST_NEXT="+next)
	code, out := runCmd(t, cmd)
	if code != 0 || !strings.Contains(out, endpoint.Fingerprint(next)) || strings.Contains(out, next) || strings.Contains(out, "warning") {
		t.Fatalf("rotate-secret: exit %d, %q", code, out)
	}
	e, c := credsOf(t, s.Driver(), id)
	if e.Sealed.Data == nil || e.Secret != "" || c.Secret != next || c.PreviousSecret != secret || time.Until(e.PreviousSecretUntil) < 50*time.Minute {
		t.Errorf("after rotate-secret: sealed %v, clear column %d bytes, grace until %v", e.Sealed.Data != nil, len(e.Secret), e.PreviousSecretUntil)
	}
	show := runOK(t, append([]string{"endpoints", "show", "legacy"}, db...)...)
	if !strings.Contains(show, "old secret   "+endpoint.Fingerprint(secret)) || !strings.Contains(show, "secret       "+endpoint.Fingerprint(next)) {
		t.Errorf("show after rotate-secret:\n%s", show)
	}
	if code, out := runCmd(t, commandWithoutKey(append([]string{"endpoints", "rotate-secret", "legacy"}, db...)...)); code != 2 || !strings.Contains(out, "needs the secrets key") {
		t.Errorf("rotate-secret without the key: exit %d, %q", code, out)
	}
}
