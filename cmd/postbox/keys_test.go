package main_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/signature"
)

// generateKeys runs "postbox keys generate" with args and returns the
// values of its lines ("secret key: X" gives "secret key" → X); it checks
// that nothing else is written, to stdout or stderr.
func generateKeys(t *testing.T, args ...string) map[string]string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := command(append([]string{"keys", "generate"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("postbox keys generate %v: %v\n%s", args, err, errOut.String())
	}
	if errOut.Len() != 0 {
		t.Fatalf("keys generate wrote to stderr: %q", errOut.String())
	}
	values := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		name, value, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("unexpected line %q", line)
		}
		values[name] = value
	}
	return values
}

// "postbox keys generate" prints a new ed25519 pair whose halves belong
// together; --type hmac prints a whsec_ secret; --type secrets-key a
// pbkey_ secrets key, a new one each time; another type is a usage error.
func TestKeysGenerate(t *testing.T) {
	pair := generateKeys(t)
	sk, pk := pair["secret key"], pair["public key"]
	if len(pair) != 2 || !strings.HasPrefix(sk, "whsk_") || !strings.HasPrefix(pk, "whpk_") {
		t.Fatalf("printed %q", pair)
	}
	if derived, err := signature.PublicKey(sk); err != nil || derived != pk {
		t.Fatalf("the public key of the printed secret key is %q (%v), printed %q", derived, err, pk)
	}
	if again := generateKeys(t, "--type", "ed25519"); again["secret key"] == sk {
		t.Fatal("two runs printed the same key")
	}

	hmacOut := generateKeys(t, "--type", "hmac")
	if len(hmacOut) != 1 || !strings.HasPrefix(hmacOut["secret"], "whsec_") {
		t.Fatalf("--type hmac printed %q", hmacOut)
	}
	if _, err := signature.NewSigner(signature.Standard, hmacOut["secret"]); err != nil {
		t.Fatalf("the printed secret is refused: %v", err)
	}

	key := generateKeys(t, "--type", "secrets-key")["secrets key"]
	if _, err := keyring.ParseKey(key); err != nil || !strings.HasPrefix(key, keyring.KeyPrefix) {
		t.Fatalf("--type secrets-key printed %q (%v), want a pbkey_ key", key, err)
	}
	if again := generateKeys(t, "--type", "secrets-key")["secrets key"]; again == key {
		t.Fatal("two runs printed the same secrets key")
	}
	if r, err := keyring.Parse(key); err != nil || r.PrimaryID() == "" {
		t.Fatalf("the printed secrets key is no keyring: %v", err)
	}

	var errOut bytes.Buffer
	cmd := command("keys", "generate", "--type", "rsa")
	cmd.Stderr = &errOut
	var exit *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(errOut.String(), "want ed25519, hmac or secrets-key") {
		t.Fatalf("--type rsa: %v, %q; want exit status 2 naming the types", err, errOut.String())
	}
}

// The path a user takes to v1a: "keys generate", the secret key to the
// relay's --webhook-secret, the public key to the receiver. An event
// inserted with plain SQL arrives signed v1a and verifies with the public
// key; the secret key never appears in the log.
func TestShippedRelaySignsV1a(t *testing.T) {
	pair := generateKeys(t)
	v, err := signature.NewVerifier(signature.Standard, 0, pair["public key"])
	if err != nil {
		t.Fatal(err)
	}
	var verified, refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if _, _, err := v.Verify(r.Header, body); err != nil || !strings.HasPrefix(r.Header.Get("Webhook-Signature"), "v1a,") {
			refused.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		verified.Add(1)
	}))
	t.Cleanup(srv.Close)

	s, db := schemaStore(t)
	insertArticleEvent(t, s, "1")
	insertArticleEvent(t, s, "2")
	logs, _ := startRelayLogged(t, append(db, "--webhook-url", srv.URL, "--webhook-secret", pair["secret key"])...)
	waitFor(t, "2 deliveries verified with the public key", 10*time.Second, func() bool { return verified.Load() == 2 })
	if refused.Load() != 0 {
		t.Fatalf("%d deliveries failed verification", refused.Load())
	}
	if strings.Contains(logs.String(), strings.TrimPrefix(pair["secret key"], "whsk_")) {
		t.Error("the secret key appears in the relay's log")
	}
}
