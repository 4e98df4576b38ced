package service_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/observe"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/service"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// What `postbox relay --sink URL --metrics-addr ADDR` runs, in a program
// of one's own: a relay over the outbox (SQLite here, PostgreSQL alike)
// publishing signed webhooks, its row in the presence table that postbox
// status reads, and its metrics and /healthz on a registry of the
// program's.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "postbox-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "outbox.db"), sqlite.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	// A partner's webhook endpoint.
	received := make(chan struct{})
	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Println("partner received", r.Header.Get("Postbox-Event-Type"), string(body))
		close(received)
	}))
	defer partner.Close()
	sk, err := webhook.New(webhook.Config{URL: partner.URL, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
	if err != nil {
		log.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	r, err := service.NewRelay(ctx, service.RelayConfig{
		Outbox:   s.Driver(), // the store's engine side
		Sink:     sk,
		Presence: &service.PresenceConfig{Store: s.Driver(), Version: "example"},
		Metrics:  reg,
		Relay:    relay.Config{Logger: slog.New(slog.DiscardHandler)}, // default: slog.Default()
	})
	if err != nil {
		log.Fatal(err)
	}
	// Serve GET /metrics and GET /healthz on a listener of their own.
	metrics := httptest.NewServer(observe.Handler(reg, r.Health()))
	defer metrics.Close()

	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(runCtx) }()
	if err := s.Enqueue(ctx, postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: "42",
		EventType: "order.created", Payload: []byte(`{"order_id":"42"}`)}); err != nil {
		log.Fatal(err)
	}
	<-received
	stop() // a graceful stop: the presence row is deleted
	if err := <-ran; err != nil {
		log.Fatal(err)
	}
	// Output:
	// partner received order.created {"order_id":"42"}
}

// What `postbox relay --endpoints` runs: the relay drains the outbox into
// the fan-out to the webhook endpoints of the database (postbox endpoints
// add), each endpoint's requests signed with its own secret and going
// through the SSRF guard, which lets this one reach 127.0.0.1 because it
// was added with AllowPrivate.
func Example_endpoints() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "postbox-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "outbox.db"), sqlite.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	received := make(chan struct{})
	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Println("partner received", r.Header.Get("Postbox-Event-Type"), string(body))
		close(received)
	}))
	defer partner.Close()
	// The secrets key seals the endpoints' secrets (postbox relay reads it
	// from POSTBOX_SECRETS_KEY or --secrets-key-file: keyring.Load).
	keys, err := keyring.Parse(keyring.GenerateKey())
	if err != nil {
		log.Fatal(err)
	}
	e := store.Endpoint{Name: "partner", URL: partner.URL, Types: []string{"order.*"}, Concurrency: 8, AllowPrivate: true}
	if err := endpoint.Seal(keys, &e, endpoint.Credentials{Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}); err != nil {
		log.Fatal(err)
	}
	if _, err = s.EndpointCreate(ctx, e); err != nil {
		log.Fatal(err)
	}

	r, err := service.NewRelay(ctx, service.RelayConfig{
		Outbox:    s.Driver(),
		Endpoints: &service.EndpointsConfig{Keyring: keys, Store: s.Driver()},
		Presence:  &service.PresenceConfig{Store: s.Driver()},
		Relay:     relay.Config{Logger: slog.New(slog.DiscardHandler), PublishBatch: 32},
	})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(runCtx) }()
	if err := s.Enqueue(ctx, postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: "42",
		EventType: "order.created", Payload: []byte(`{"order_id":"42"}`)}); err != nil {
		log.Fatal(err)
	}
	<-received
	stop()
	if err := <-ran; err != nil {
		log.Fatal(err)
	}
	// Output:
	// partner received order.created {"order_id":"42"}
}
