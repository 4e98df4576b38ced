package webhook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
)

func Example() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

	// The partner's endpoint verifies every request.
	verifier, err := signature.NewVerifier(signature.Standard, 0, secret)
	if err != nil {
		panic(err)
	}
	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, _, err := verifier.Verify(r.Header, body)
		if err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		fmt.Printf("partner got %s %s: %s\n", r.Header.Get("Postbox-Event-Type"), id, body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer partner.Close()

	s, err := webhook.New(webhook.Config{URL: partner.URL, Secrets: []string{secret}})
	if err != nil {
		panic(err)
	}
	err = s.Publish(context.Background(), &sink.Message{
		Event: postbox.Event{
			ID:          uuid.MustParse("0192d2a4-7c1e-7b3a-9f00-5d2b8c1e4a10"),
			EventType:   "order.created",
			AggregateID: "42",
			Payload:     []byte(`{"order_id": 42}`),
		},
		Attempt: 1,
	})
	fmt.Println("published:", err)
	// Output:
	// partner got order.created 0192d2a4-7c1e-7b3a-9f00-5d2b8c1e4a10: {"order_id": 42}
	// published: <nil>
}

// The relay turns a failure into its next step with sink.Classify.
func Example_classify() {
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "this endpoint was removed", http.StatusGone)
	}))
	defer gone.Close()

	s, err := webhook.New(webhook.Config{URL: gone.URL, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
	if err != nil {
		panic(err)
	}
	err = s.Publish(context.Background(), &sink.Message{Event: postbox.Event{ID: uuid.New(), EventType: "order.created", Payload: []byte(`{}`)}, Attempt: 1})
	kind, _, status := sink.Classify(err)
	fmt.Println(kind, status)
	fmt.Println(err)
	// Output:
	// permanent 410
	// permanent: status 410: webhook: Gone: response "this endpoint was removed\n"
}

// A partner's endpoint behind OAuth2 client credentials and mutual TLS,
// which also wants an API key header and Svix's header names. (Not run:
// the PEM and the secrets come from a secret store.)
func ExampleConfig_partner() {
	var certPEM, keyPEM, caPEM []byte // from the secret store
	cert, err := webhook.ParseClientCertificate(certPEM, keyPEM)
	if err != nil {
		panic(err)
	}
	roots, err := webhook.ParseCertPool(caPEM)
	if err != nil {
		panic(err)
	}
	s, err := webhook.New(webhook.Config{
		URL:         "https://hooks.partner.example/postbox",
		Secrets:     []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		HeaderNames: signature.SvixNames,
		Headers:     map[string]string{"X-Api-Key": "from-the-secret-store"},
		Auth: webhook.Auth{OAuth2: &webhook.OAuth2{
			TokenURL:     "https://auth.partner.example/oauth/token",
			ClientID:     "postbox",
			ClientSecret: "from-the-secret-store",
			Scopes:       []string{"events:write"},
			Params:       map[string][]string{"audience": {"https://hooks.partner.example"}},
		}},
		ClientCertificate: &cert,
		RootCAs:           roots,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(s)
}
