package relay_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store/postgres"
)

// exampleStore connects to the test server and returns a migrated store in
// a schema of its own; drop drops the schema.
func exampleStore() (s *postgres.Store, drop func()) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL()) // in an application: its own database URL
	if err != nil {
		log.Fatal(err)
	}
	schema := fmt.Sprintf("example_%d", time.Now().UnixNano())
	if s, err = postgres.New(pool, postgres.Config{Schema: schema}); err != nil {
		log.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	return s, func() {
		_, _ = pool.Exec(ctx, "drop schema "+pgx.Identifier{schema}.Sanitize()+" cascade")
		pool.Close()
	}
}

// A relay run from Go rather than by "postbox relay": it delivers an
// outbox's events to a webhook endpoint, signed, until its context is
// cancelled. Ready and Stats tell a health check or metrics how it does;
// here they tell when the event has been delivered.
func Example() {
	s, drop := exampleStore()
	defer drop()

	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	// The partner's endpoint checks the Standard Webhooks signature.
	verifier, err := signature.NewVerifier(signature.Standard, 0, secret)
	if err != nil {
		log.Fatal(err)
	}
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if _, _, err := verifier.Verify(r.Header, body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Println("received", r.Header.Get("Postbox-Event-Type"), string(body))
	}))
	defer endpoint.Close()
	hook, err := webhook.New(webhook.Config{URL: endpoint.URL, Secrets: []string{secret}})
	if err != nil {
		log.Fatal(err)
	}

	rl, err := relay.New(relay.Config{
		Store:  s.Driver(),
		Sink:   hook,
		Logger: slog.New(slog.DiscardHandler), // default: slog.Default()
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rl.Run(ctx) }()
	for !rl.Ready() { // the relay claims from its outbox
		time.Sleep(10 * time.Millisecond)
	}

	// A producer commits an event (usually with EnqueueTx, in the
	// transaction of its business change).
	err = s.Enqueue(context.Background(), postbox.Event{
		AggregateType: "order",
		AggregateID:   "42",
		EventType:     "order.created",
		Payload:       []byte(`{"order_id": 42}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	for rl.Stats().Delivered < 1 {
		time.Sleep(10 * time.Millisecond)
	}

	// Graceful stop: Run returns once nothing is in flight.
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	st := rl.Stats()
	fmt.Println("claimed", st.Claimed, "delivered", st.Delivered, "failed", st.Failed, "in flight", st.InFlight)
	// Output:
	// received order.created {"order_id": 42}
	// claimed 1 delivered 1 failed 0 in flight 0
}

// A relay whose endpoint cannot be reached (here a closed port: every
// connection is refused) pauses: it probes with one event at a time and
// counts no attempt, so however long the outage lasts nothing is
// dead-lettered. SinkAvailable and Stats say so, for a dashboard or an
// alert; the relay logs the outage once, and resumes on its own.
func ExampleRelay_SinkAvailable() {
	s, drop := exampleStore()
	defer drop()

	endpoint := httptest.NewServer(http.NotFoundHandler())
	endpoint.Close() // down
	hook, err := webhook.New(webhook.Config{URL: endpoint.URL, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
	if err != nil {
		log.Fatal(err)
	}
	rl, err := relay.New(relay.Config{
		Store: s.Driver(), Sink: hook, Logger: slog.New(slog.DiscardHandler),
		MaxAttempts:   1,                     // one counted failure would dead-letter the event
		ProbeInterval: 50 * time.Millisecond, // default 5s
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rl.Run(ctx) }()
	err = s.Enqueue(context.Background(), postbox.Event{
		AggregateType: "order", AggregateID: "42", EventType: "order.created", Payload: []byte(`{"order_id": 42}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	for rl.SinkAvailable() || rl.Stats().Probes < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	st := rl.Stats()
	fmt.Println("sink down:", st.SinkDown, "refused:", strings.Contains(st.SinkError, "connection refused"))
	fmt.Println("failed", st.Failed, "retried", st.Retried)

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// sink down: true refused: true
	// failed 0 retried 0
}
