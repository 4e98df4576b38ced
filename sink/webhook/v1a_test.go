package webhook_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
)

// captured is the one request a v1aEndpoint received.
type captured struct {
	header http.Header
	body   []byte
}

// v1aEndpoint is a real HTTP endpoint on 127.0.0.1 that keeps the requests
// it receives and answers 204.
func v1aEndpoint(t *testing.T) (*httptest.Server, <-chan captured) {
	t.Helper()
	got := make(chan captured, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- captured{r.Header.Clone(), body}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func publishOne(t *testing.T, secrets ...string) captured {
	t.Helper()
	srv, got := v1aEndpoint(t)
	s, err := webhook.New(webhook.Config{URL: srv.URL, Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Publish(context.Background(), &sink.Message{
		Event: postbox.Event{
			ID:          uuid.MustParse("0192d2a4-7c1e-7b3a-9f00-5d2b8c1e4a10"),
			EventType:   "order.created",
			AggregateID: "42",
			Payload:     []byte(`{"order_id":42,"amount":9900}`),
		},
		Attempt: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return <-got
}

// A sink given a whsk_ key signs v1a: the request verifies with the whpk_
// public key alone, and not once its body is changed.
func TestSinkSignsV1a(t *testing.T) {
	secretKey, publicKey, err := signature.GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	req := publishOne(t, secretKey)
	if sig := req.header.Get("Webhook-Signature"); !strings.HasPrefix(sig, "v1a,") || strings.Contains(sig, " ") {
		t.Fatalf("signature %q, want one v1a entry", sig)
	}
	v, err := signature.NewVerifier(signature.Standard, 0, publicKey)
	if err != nil {
		t.Fatal(err)
	}
	if id, _, err := v.Verify(req.header, req.body); err != nil || id != "0192d2a4-7c1e-7b3a-9f00-5d2b8c1e4a10" {
		t.Fatalf("verify with the public key: id %q, %v", id, err)
	}
	if _, _, err := v.Verify(req.header, append(req.body, ' ')); !errors.Is(err, signature.ErrNoMatchingSignature) {
		t.Fatalf("a changed body verified: %v", err)
	}
}

// During a move from v1 to v1a the sink signs with both keys: receivers
// holding either one verify.
func TestSinkSignsV1AndV1aDuringTheMove(t *testing.T) {
	hmacSecret, err := signature.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	secretKey, publicKey, err := signature.GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	req := publishOne(t, hmacSecret, secretKey)
	entries := strings.Fields(req.header.Get("Webhook-Signature"))
	if len(entries) != 2 || !strings.HasPrefix(entries[0], "v1,") || !strings.HasPrefix(entries[1], "v1a,") {
		t.Fatalf("signature entries %q, want v1 then v1a", entries)
	}
	for _, receiverKey := range []string{hmacSecret, publicKey} {
		v, err := signature.NewVerifier(signature.Standard, 0, receiverKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := v.Verify(req.header, req.body); err != nil {
			t.Errorf("receiver with a %.5s key: %v", receiverKey, err)
		}
	}
}

// A sink given a public key, or an ed25519 key in the x-signature scheme,
// refuses to start.
func TestSinkRefusesKeysThatCannotSign(t *testing.T) {
	secretKey, publicKey, err := signature.GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []webhook.Config{
		{URL: "http://127.0.0.1:1/hook", Secrets: []string{publicKey}},
		{URL: "http://127.0.0.1:1/hook", Secrets: []string{secretKey}, Scheme: signature.XSignature},
	} {
		if _, err := webhook.New(c); !errors.Is(err, signature.ErrWrongKeyKind) {
			t.Errorf("scheme %v: got %v, want ErrWrongKeyKind", c.Scheme, err)
		}
	}
}
