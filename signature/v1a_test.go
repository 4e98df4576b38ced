package signature_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/signature"
)

// The key of Svix's v1a test, the implementation v1a comes from: its
// signature of the published Standard Webhooks test message is the v1a
// entry of the spec's example header.
const (
	svixSecretKey = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg=="
	svixPublicKey = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="
	svixSignature = "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg=="
)

const vectorsFile = "testdata/v1a_vectors.json"

// vector is one entry of testdata/v1a_vectors.json, computed by Node.js's
// crypto with testdata/v1a_vectors.mjs.
type vector struct {
	Name       string   `json:"name"`
	Secrets    []string `json:"secrets"`
	VerifyWith []string `json:"verify_with"`
	ID         string   `json:"id"`
	Timestamp  int64    `json:"timestamp"`
	BodyBase64 string   `json:"body_base64"`
	Signature  string   `json:"signature"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Vectors []vector }
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	return file.Vectors
}

// The Node-computed vectors: each signer's header is the one Node wrote,
// byte for byte, and it verifies with the public keys (and whsec_ secrets).
func TestV1aVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			body, err := base64.StdEncoding.DecodeString(v.BodyBase64)
			if err != nil {
				t.Fatal(err)
			}
			s, err := signature.NewSigner(signature.Standard, v.Secrets...)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			if err := s.Sign(h, v.ID, time.Unix(v.Timestamp, 0), body); err != nil {
				t.Fatal(err)
			}
			assertHeader(t, h, http.Header{
				"Webhook-Id":        {v.ID},
				"Webhook-Timestamp": {strconv.FormatInt(v.Timestamp, 10)},
				"Webhook-Signature": {v.Signature},
			})

			// Every key alone verifies the header.
			for _, k := range v.VerifyWith {
				ver := newVerifierAt(t, time.Unix(v.Timestamp, 0), k)
				if id, _, err := ver.Verify(h, body); err != nil || id != v.ID {
					t.Errorf("verify with %.12s…: id %q, %v", k, id, err)
				}
				if _, _, err := ver.Verify(h, append(bytes.Clone(body), ' ')); !errors.Is(err, signature.ErrNoMatchingSignature) {
					t.Errorf("verify a changed body with %.12s…: got %v", k, err)
				}
			}
			for i, sk := range v.Secrets {
				if !strings.HasPrefix(sk, "whsk_") {
					continue
				}
				if pk, err := signature.PublicKey(sk); err != nil || pk != v.VerifyWith[i] {
					t.Errorf("PublicKey(secret %d) = %q, %v; want %q", i+1, pk, err, v.VerifyWith[i])
				}
			}
		})
	}
}

// The first vector is Svix's: Node agrees with it.
func TestV1aVectorsIncludeSvix(t *testing.T) {
	v := loadVectors(t)[0]
	if v.Secrets[0] != svixSecretKey || v.VerifyWith[0] != svixPublicKey || v.Signature != svixSignature {
		t.Fatalf("first vector %+v is not Svix's", v)
	}
}

// When node is installed, the script regenerates the committed vectors
// exactly: they were computed by Node and never changed by hand.
func TestVectorsMatchNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the committed vectors are checked by TestV1aVectors")
	}
	cmd := exec.Command(node, "v1a_vectors.mjs")
	cmd.Dir = "testdata"
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node v1a_vectors.mjs: %v", err)
	}
	committed, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, committed) {
		t.Fatalf("node computes other vectors than %s:\n%s", vectorsFile, out)
	}
}

func newVerifierAt(t *testing.T, now time.Time, secrets ...string) *signature.Verifier {
	t.Helper()
	v, err := signature.NewVerifier(signature.Standard, 0, secrets...)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = func() time.Time { return now }
	return v
}

func TestVerifyV1a(t *testing.T) {
	ts := strconv.Itoa(vectorTimestamp)
	signed := func(sig string) http.Header {
		return http.Header{"Webhook-Id": {vectorID}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {sig}}
	}
	sig := strings.TrimPrefix(svixSignature, "v1a,")
	raw, _ := base64.StdEncoding.DecodeString(sig)
	flipped := bytes.Clone(raw)
	flipped[10] ^= 1
	otherSK, otherPK, err := signature.GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, err := signature.NewSigner(signature.Standard, otherSK)
	if err != nil {
		t.Fatal(err)
	}
	byOther := http.Header{}
	if err := otherSigner.Sign(byOther, vectorID, vectorTime, []byte(vectorBody)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		secrets []string
		h       http.Header
		body    string
		want    error
	}{
		{"svix signature", []string{svixPublicKey}, signed(svixSignature), vectorBody, nil},
		{"beside an unknown v1", []string{svixPublicKey}, signed(vectorSignature + " " + svixSignature), vectorBody, nil},
		{"v1 matches a whsec_ beside the whpk_", []string{svixPublicKey, vectorSecret}, signed(vectorSignature), vectorBody, nil},
		{"body changed", []string{svixPublicKey}, signed(svixSignature), vectorBody + " ", signature.ErrNoMatchingSignature},
		{"id changed", []string{svixPublicKey}, http.Header{"Webhook-Id": {"msg_other"}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {svixSignature}}, vectorBody, signature.ErrNoMatchingSignature},
		{"one bit flipped", []string{svixPublicKey}, signed("v1a," + base64.StdEncoding.EncodeToString(flipped)), vectorBody, signature.ErrNoMatchingSignature},
		{"another key's signature", []string{svixPublicKey}, byOther, vectorBody, signature.ErrNoMatchingSignature},
		{"another key verifies its own", []string{svixPublicKey, otherPK}, byOther, vectorBody, nil},
		{"v1 only, public key only", []string{svixPublicKey}, signed(vectorSignature), vectorBody, signature.ErrNoMatchingSignature},
		{"v1a signature as v1", []string{svixPublicKey}, signed("v1," + sig), vectorBody, signature.ErrMalformedHeader},
		{"v1a too short", []string{svixPublicKey}, signed("v1a," + base64.StdEncoding.EncodeToString(raw[:63])), vectorBody, signature.ErrMalformedHeader},
		{"v1a not canonical base64", []string{svixPublicKey}, signed("v1a," + strings.TrimRight(sig, "=")), vectorBody, signature.ErrMalformedHeader},
		{"v1a signature to an HMAC verifier", []string{vectorSecret}, signed(svixSignature), vectorBody, signature.ErrNoMatchingSignature},
		{"too many v1a entries", []string{svixPublicKey}, signed(strings.Repeat(svixSignature+" ", signature.MaxAsymmetricSignatures) + svixSignature), vectorBody, signature.ErrMalformedHeader},
		{"as many v1a entries as allowed", []string{svixPublicKey}, signed(strings.TrimSpace(strings.Repeat(svixSignature+" ", signature.MaxAsymmetricSignatures))), vectorBody, nil},
		{"many v1a entries, HMAC verifier", []string{vectorSecret}, signed(strings.Repeat(svixSignature+" ", 2*signature.MaxAsymmetricSignatures) + vectorSignature), vectorBody, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, _, err := newVerifierAt(t, vectorTime, tc.secrets...).Verify(tc.h, []byte(tc.body))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want == nil && id != vectorID {
				t.Fatalf("id %q", id)
			}
		})
	}
}

func TestEd25519KeysAreRefusedWhereTheyCannotServe(t *testing.T) {
	seedOnly := "whsk_" + base64.StdEncoding.EncodeToString(make([]byte, ed25519.SeedSize))
	sk := mustDecode(t, svixSecretKey)
	damaged := bytes.Clone(sk)
	damaged[40] ^= 1
	for _, tc := range []struct {
		name   string
		scheme signature.Scheme
		role   string // "signer" or "verifier"
		secret string
		want   error
	}{
		{"whsk_ to a verifier", signature.Standard, "verifier", svixSecretKey, signature.ErrWrongKeyKind},
		{"seed-only whsk_ to a verifier", signature.Standard, "verifier", seedOnly, signature.ErrWrongKeyKind},
		{"whpk_ to a signer", signature.Standard, "signer", svixPublicKey, signature.ErrWrongKeyKind},
		{"whsk_ to x-signature signer", signature.XSignature, "signer", svixSecretKey, signature.ErrWrongKeyKind},
		{"whpk_ to x-signature verifier", signature.XSignature, "verifier", svixPublicKey, signature.ErrWrongKeyKind},
		{"whsk_ not base64", signature.Standard, "signer", "whsk_" + strings.Repeat("!", 88), signature.ErrMalformedSecret},
		{"whsk_ empty", signature.Standard, "signer", "whsk_", signature.ErrMalformedSecret},
		{"whsk_ of 48 bytes", signature.Standard, "signer", "whsk_" + base64.StdEncoding.EncodeToString(sk[:48]), signature.ErrMalformedSecret},
		{"whsk_ with another public half", signature.Standard, "signer", "whsk_" + base64.StdEncoding.EncodeToString(damaged), signature.ErrMalformedSecret},
		{"whpk_ not base64", signature.Standard, "verifier", "whpk_" + strings.Repeat("!", 44), signature.ErrMalformedSecret},
		{"whpk_ of 31 bytes", signature.Standard, "verifier", "whpk_" + base64.StdEncoding.EncodeToString(make([]byte, 31)), signature.ErrMalformedSecret},
		{"whpk_ of 64 bytes", signature.Standard, "verifier", "whpk_" + base64.StdEncoding.EncodeToString(sk), signature.ErrMalformedSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Second of two secrets, so that the position is named.
			secrets := []string{strings.Repeat("k", 32), tc.secret}
			var err error
			if tc.role == "signer" {
				_, err = signature.NewSigner(tc.scheme, secrets...)
			} else {
				_, err = signature.NewVerifier(tc.scheme, 0, secrets...)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), "secret 2") {
				t.Errorf("error %q does not name the secret's position", err)
			}
			if body := strings.SplitN(tc.secret, "_", 2)[1]; len(body) > 4 && strings.Contains(err.Error(), body) {
				t.Errorf("error %q reveals the key", err)
			}
		})
	}
}

// A verifier given the whsk_ says what to give it instead.
func TestVerifierRefusingPrivateKeySaysWhatToGive(t *testing.T) {
	_, err := signature.NewVerifier(signature.Standard, 0, svixSecretKey)
	if err == nil || !strings.Contains(err.Error(), "whpk_ public key") || !strings.Contains(err.Error(), "private key") {
		t.Fatalf("got %v", err)
	}
}

func TestGenerateKeyPair(t *testing.T) {
	sk, pk, err := signature.GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	if len(mustDecode(t, sk)) != ed25519.PrivateKeySize || len(mustDecode(t, pk)) != ed25519.PublicKeySize {
		t.Fatalf("key lengths: %q %q", sk, pk)
	}
	if derived, err := signature.PublicKey(sk); err != nil || derived != pk {
		t.Fatalf("PublicKey = %q, %v; want %q", derived, err, pk)
	}
	sk2, _, err := signature.GenerateKeyPair()
	if err != nil || sk2 == sk {
		t.Fatalf("two pairs are the same: %v", err)
	}
	// What the pair signs verifies with the public key, and only with it.
	s, err := signature.NewSigner(signature.Standard, sk)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if err := s.Sign(h, vectorID, vectorTime, []byte(vectorBody)); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h.Get("webhook-signature"), "v1a,") {
		t.Fatalf("signature %q", h.Get("webhook-signature"))
	}
	if _, _, err := newVerifierAt(t, vectorTime, pk).Verify(h, []byte(vectorBody)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := newVerifierAt(t, vectorTime, svixPublicKey).Verify(h, []byte(vectorBody)); !errors.Is(err, signature.ErrNoMatchingSignature) {
		t.Fatalf("another public key: %v", err)
	}
}

func TestGenerateSecret(t *testing.T) {
	a, err := signature.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, err := signature.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || len(mustDecode(t, a)) != signature.GeneratedSecretLen {
		t.Fatalf("secrets %q %q", a, b)
	}
	if _, err := signature.NewSigner(signature.Standard, a); err != nil {
		t.Fatal(err)
	}
}

func TestPublicKeyRefusesOtherSecrets(t *testing.T) {
	for secret, want := range map[string]error{
		vectorSecret:        signature.ErrWrongKeyKind,
		svixPublicKey:       signature.ErrWrongKeyKind,
		"whsk_AAAA":         signature.ErrMalformedSecret,
		"whsk_" + "!!!!!!!": signature.ErrMalformedSecret,
	} {
		if _, err := signature.PublicKey(secret); !errors.Is(err, want) {
			t.Errorf("PublicKey(%.10s…): got %v, want %v", secret, err, want)
		}
	}
}

// mustDecode returns the bytes of a whsec_, whsk_ or whpk_ secret.
func mustDecode(t *testing.T, secret string) []byte {
	t.Helper()
	_, encoded, _ := strings.Cut(secret, "_")
	b, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
