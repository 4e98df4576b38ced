package signature_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/signature"
)

// The published Standard Webhooks test vector.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// Secrets of the XSignature tests, used as bytes.
const (
	xSecret    = "article-secret-of-32-bytes-long!"
	xSecretOld = "the-old-article-secret-24"
)

var vectorTime = time.Unix(vectorTimestamp, 0)

// standardEntry and xEntry compute signature header entries the long way,
// with crypto/hmac directly, so the tests do not trust the package's code.
func standardEntry(key []byte, id, timestamp, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + timestamp + "." + body))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func xEntry(secret, timestamp, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp + body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func vectorKey(t testing.TB) []byte {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(vectorSecret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// signedVector is the Standard Webhooks test vector signed into a new
// header.
func signedVector(t *testing.T) http.Header {
	t.Helper()
	s, err := signature.NewSigner(signature.Standard, vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if err := s.Sign(h, vectorID, vectorTime, []byte(vectorBody)); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestSignStandardVector(t *testing.T) {
	h := signedVector(t)
	want := http.Header{
		"Webhook-Id":        {vectorID},
		"Webhook-Timestamp": {"1614265330"},
		"Webhook-Signature": {vectorSignature},
	}
	assertHeader(t, h, want)
}

func TestSignStandardRawSecret(t *testing.T) {
	secret := "a-raw-secret-without-prefix"
	s, err := signature.NewSigner(signature.Standard, secret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if err := s.Sign(h, vectorID, vectorTime, []byte(vectorBody)); err != nil {
		t.Fatal(err)
	}
	if got, want := h.Get("webhook-signature"), standardEntry([]byte(secret), vectorID, "1614265330", vectorBody); got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
}

func TestSignXSignature(t *testing.T) {
	s, err := signature.NewSigner(signature.XSignature, xSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if err := s.Sign(h, "evt-1", vectorTime.Add(999*time.Millisecond), []byte(vectorBody)); err != nil {
		t.Fatal(err)
	}
	assertHeader(t, h, http.Header{
		"X-Event-Id":  {"evt-1"},
		"X-Timestamp": {"1614265330"},
		"X-Signature": {xEntry(xSecret, "1614265330", vectorBody)},
	})
}

func TestSignWithEverySecret(t *testing.T) {
	t.Run("standard", func(t *testing.T) {
		second := strings.Repeat("n", 32)
		s, err := signature.NewSigner(signature.Standard, vectorSecret, second)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		if err := s.Sign(h, vectorID, vectorTime, []byte(vectorBody)); err != nil {
			t.Fatal(err)
		}
		want := vectorSignature + " " + standardEntry([]byte(second), vectorID, "1614265330", vectorBody)
		if got := h.Get("webhook-signature"); got != want {
			t.Fatalf("signature %q, want %q", got, want)
		}
	})
	t.Run("x-signature", func(t *testing.T) {
		s, err := signature.NewSigner(signature.XSignature, xSecretOld, xSecret)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		if err := s.Sign(h, "evt-1", vectorTime, []byte(vectorBody)); err != nil {
			t.Fatal(err)
		}
		want := xEntry(xSecretOld, "1614265330", vectorBody) + " " + xEntry(xSecret, "1614265330", vectorBody)
		if got := h.Get("x-signature"); got != want {
			t.Fatalf("signature %q, want %q", got, want)
		}
	})
}

func TestSignReplacesHeaders(t *testing.T) {
	s, err := signature.NewSigner(signature.Standard, vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{
		"Webhook-Id":        {"forged", "twice"},
		"Webhook-Signature": {"v1,forged"},
		"Traceparent":       {"kept"},
	}
	if err := s.Sign(h, vectorID, vectorTime, []byte(vectorBody)); err != nil {
		t.Fatal(err)
	}
	assertHeader(t, h, http.Header{
		"Webhook-Id":        {vectorID},
		"Webhook-Timestamp": {"1614265330"},
		"Webhook-Signature": {vectorSignature},
		"Traceparent":       {"kept"},
	})
}

// Sign sets the three headers with one backing array of values: adding a
// value to one of them must leave the others alone.
func TestSignedHeadersAreIndependent(t *testing.T) {
	h := signedVector(t)
	h.Add("Webhook-Id", "added")
	h.Add("Webhook-Timestamp", "added")
	assertHeader(t, h, http.Header{
		"Webhook-Id":        {vectorID, "added"},
		"Webhook-Timestamp": {"1614265330", "added"},
		"Webhook-Signature": {vectorSignature},
	})
}

// A Signer reuses its HMAC hashes across calls: signing from many
// goroutines at once (run with -race) gives each request its own signature.
func TestSignIsSafeForConcurrentUse(t *testing.T) {
	second := strings.Repeat("n", 32)
	s, err := signature.NewSigner(signature.Standard, vectorSecret, second)
	if err != nil {
		t.Fatal(err)
	}
	key := vectorKey(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id, body := fmt.Sprintf("msg_%d_%d", g, i), strings.Repeat("b", g*100+i)
				h := http.Header{}
				if err := s.Sign(h, id, vectorTime, []byte(body)); err != nil {
					t.Error(err)
					return
				}
				want := standardEntry(key, id, "1614265330", body) + " " + standardEntry([]byte(second), id, "1614265330", body)
				if got := h.Get("Webhook-Signature"); got != want {
					t.Errorf("%s: signature %q, want %q", id, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestSignRefusesInvalidID(t *testing.T) {
	for _, scheme := range []signature.Scheme{signature.Standard, signature.XSignature} {
		s, err := signature.NewSigner(scheme, xSecret)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"", "a.b", "."} {
			h := http.Header{}
			if err := s.Sign(h, id, vectorTime, nil); !errors.Is(err, signature.ErrInvalidID) {
				t.Errorf("%v: Sign(id %q): got %v, want ErrInvalidID", scheme, id, err)
			}
			if len(h) != 0 {
				t.Errorf("%v: Sign(id %q) set headers %v", scheme, id, h)
			}
		}
	}
}

// assertHeader checks that got holds the headers of want and, beside them,
// only a metadata signature (which metadata_test.go checks).
func assertHeader(t *testing.T, got, want http.Header) {
	t.Helper()
	if len(got.Values(signature.HeaderMetadataSignature)) != 1 {
		t.Fatalf("headers %v: no metadata signature", got)
	}
	got = got.Clone()
	got.Del(signature.HeaderMetadataSignature)
	if len(got) != len(want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	for name, values := range want {
		if g := got.Values(name); strings.Join(g, "\n") != strings.Join(values, "\n") {
			t.Errorf("%s: %q, want %q", name, g, values)
		}
	}
}
