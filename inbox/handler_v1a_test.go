package inbox_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/signature"
)

// v1aFixture is a handler that holds the public key of a fresh ed25519
// pair (beside the fixture's whsec_ secret when withHMAC), its fixture
// signing with the private key.
func v1aFixture(t *testing.T, withHMAC bool) *fixture {
	t.Helper()
	secretKey, publicKey, err := signature.GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{publicKey}
	if withHMAC {
		secrets = append(secrets, standardSecret)
	}
	f := newFixture(t, inbox.HandlerConfig{Secrets: secrets})
	if f.signer, err = signature.NewSigner(signature.Standard, secretKey); err != nil {
		t.Fatal(err)
	}
	return f
}

// A handler given a whpk_ public key processes v1a deliveries, once, and
// refuses with 401 a v1a delivery whose body, id or signature was changed,
// storing nothing.
func TestHandlerVerifiesV1a(t *testing.T) {
	t.Parallel()
	f := v1aFixture(t, false)
	req, id := f.newRequest()
	if sig := req.Header.Get("Webhook-Signature"); !strings.HasPrefix(sig, "v1a,") {
		t.Fatalf("the fixture signs %q, want a v1a signature", sig)
	}
	f.wantAnswer(req, http.StatusOK, "processed")
	f.wantAnswer(f.request(id.String(), payload(id), time.Now()), http.StatusOK, "duplicate")
	if n := f.effectsOf(id); n != 1 {
		t.Fatalf("applied %d times, want once", n)
	}

	tampered := v1aFixture(t, false)
	for name, build := range map[string]func() *http.Request{
		"body changed": func() *http.Request {
			id := postbox.NewID()
			req := tampered.request(id.String(), payload(id), time.Now())
			forged := bytes.Replace(payload(id), []byte("9900"), []byte("9999"), 1)
			req.Body, req.ContentLength = readCloser(forged), int64(len(forged))
			return req
		},
		"id changed": func() *http.Request {
			req, _ := tampered.newRequest()
			req.Header.Set("Webhook-Id", postbox.NewID().String())
			return req
		},
		"signature bit flipped": func() *http.Request {
			req, _ := tampered.newRequest()
			sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(req.Header.Get("Webhook-Signature"), "v1a,"))
			if err != nil {
				t.Fatal(err)
			}
			sig[10] ^= 1
			req.Header.Set("Webhook-Signature", "v1a,"+base64.StdEncoding.EncodeToString(sig))
			return req
		},
		"signed with the whsec_ the handler does not hold": func() *http.Request {
			req, id := tampered.newRequest()
			other, err := signature.NewSigner(signature.Standard, standardSecret)
			if err != nil {
				t.Fatal(err)
			}
			if err := other.Sign(req.Header, id.String(), time.Now(), payload(id)); err != nil {
				t.Fatal(err)
			}
			return req
		},
	} {
		t.Run(name, func(t *testing.T) {
			tampered.wantAnswer(build(), http.StatusUnauthorized, "unauthorized")
		})
	}
	tampered.wantNothingStored()
}

// During a move from v1 to v1a the handler holds the whsec_ and the whpk_:
// deliveries signed with either, or both, are processed.
func TestHandlerAcceptsV1AndV1aDuringTheMove(t *testing.T) {
	t.Parallel()
	f := v1aFixture(t, true)
	v1a := f.signer
	v1, err := signature.NewSigner(signature.Standard, standardSecret)
	if err != nil {
		t.Fatal(err)
	}
	for name, signer := range map[string]*signature.Signer{"v1": v1, "v1a": v1a} {
		f.signer = signer
		req, id := f.newRequest()
		f.wantAnswer(req, http.StatusOK, "processed")
		if n := f.effectsOf(id); n != 1 {
			t.Fatalf("%s: applied %d times, want once", name, n)
		}
	}
}

// A handler given the private key refuses to start, and says why.
func TestNewHandlerRefusesPrivateKey(t *testing.T) {
	secretKey, _, err := signature.GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	_, err = inbox.NewHandler(inbox.HandlerConfig{Secrets: []string{secretKey}, Process: func(context.Context, *inbox.Event) (inbox.Outcome, error) {
		t.Error("Process called")
		return 0, nil
	}})
	if !errors.Is(err, signature.ErrWrongKeyKind) {
		t.Fatalf("got %v, want ErrWrongKeyKind", err)
	}
}
