package inbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/signature"
)

// A webhook endpoint: the relay's webhook sink posts signed events to it.
func ExampleNewHandler() {
	pgStore, close := exampleStore()
	defer close()
	ib := inbox.New(pgStore.Driver())

	secret := "whsec_c2VjcmV0LWtleS1vZi10aGlydHktdHdvLWJ5dGVzIQ==" // os.Getenv("WEBHOOK_SECRET")
	h, err := inbox.NewHandler(inbox.HandlerConfig{
		Secrets: []string{secret},
		Process: func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
			return ib.Process(ctx, ev, shipOrder)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/postbox", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// What the sender does: sign the body with the event id and the time.
	signer, err := signature.NewSigner(signature.Standard, secret)
	if err != nil {
		log.Fatal(err)
	}
	id := "0190f0b2-7b4c-7cc0-8d2e-3f1c9a4b5d6e"
	body := []byte(`{"event_id": "` + id + `", "order_id": 42}`)
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/postbox", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(inbox.HeaderEventType, "order.paid")
		if err := signer.Sign(req.Header, id, time.Now(), body); err != nil {
			log.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(answer))
	}
	// Output:
	// 200 {"status":"processed"}
	// 200 {"status":"duplicate"}
}
