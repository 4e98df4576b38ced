package endpoint_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// The wiring of postbox relay --endpoints: a relay drains the outbox into
// the supervisor's fan-out, which offers each event to the lanes of the
// matching endpoints measured fast, and writes one delivery for
// each of the others (or an offer that did not deliver), waking their
// lanes; each lane, a relay of its own, delivers its endpoint's events,
// signed with the endpoint's secret. SupervisorStats.Direct counts the deliveries
// made without a delivery written, SupervisorStats.Written those written first.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL()) // in an application: its own database URL
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	schema := fmt.Sprintf("example_%d", time.Now().UnixNano())
	s, err := postgres.New(pool, postgres.Config{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Exec(ctx, "drop schema "+pgx.Identifier{schema}.Sanitize()+" cascade")
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	// The operator's secrets key: in production, from POSTBOX_SECRETS_KEY
	// or a key file (keyring.Load), made once by postbox keys generate
	// --type secrets-key.
	keys, err := keyring.Parse(keyring.GenerateKey())
	if err != nil {
		log.Fatal(err)
	}

	// A partner's endpoint, registered as postbox endpoints add does: its
	// secrets sealed, so that the database holds none in clear.
	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Println("partner received", r.Header.Get("Postbox-Event-Type"), r.Header.Get("X-Partner-Key"), string(body))
	}))
	defer partner.Close()
	e := store.Endpoint{Name: "partner", URL: partner.URL, Types: []string{"order.*"}, Filter: `payload.order_id > 40`, Concurrency: 8}
	err = endpoint.Seal(keys, &e, endpoint.Credentials{Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		Headers: map[string]string{"X-Partner-Key": "k-123"}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err = s.EndpointCreate(ctx, e); err != nil {
		log.Fatal(err)
	}

	quiet := slog.New(slog.DiscardHandler) // default: slog.Default()
	// Client: give it the SSRF-guarded client (package sink/webhook/guard) in
	// production; Relay configures every lane as a relay.
	sup, err := endpoint.New(endpoint.SupervisorConfig{Store: s.Driver(), Keyring: keys, Logger: quiet, Relay: relay.Config{MaxAttempts: 10}})
	if err != nil {
		log.Fatal(err)
	}
	r, err := relay.New(relay.Config{Store: s.Driver(), Sink: sup.FanOut(), PublishBatch: 100, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	running.Go(func() {
		if err := sup.Run(runCtx); err != nil {
			log.Fatal(err)
		}
	})
	running.Go(func() {
		if err := r.Run(runCtx); err != nil {
			log.Fatal(err)
		}
	})

	err = s.Enqueue(ctx, postbox.Event{AggregateType: "order", AggregateID: "42", EventType: "order.created", Payload: []byte(`{"order_id": 42}`)},
		postbox.Event{AggregateType: "audit", AggregateID: "7", EventType: "audit.logged", Payload: []byte(`{}`)})
	if err != nil {
		log.Fatal(err)
	}
	for sup.Stats().Delivered < 1 || sup.Stats().Unrouted < 1 {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	running.Wait()
	st := sup.Stats()
	fmt.Println("unrouted", st.Unrouted, "delivered", st.Delivered, "failed", st.Failed)
	// Output:
	// partner received order.created k-123 {"order_id": 42}
	// unrouted 1 delivered 1 failed 0
}

// An endpoint's filter is a list of globs on the event type; an empty one
// takes every event but postbox's own operator events, which only a glob
// that begins with "postbox." takes.
func ExampleMatches() {
	filter := []string{"order.*", "payment.succeeded"}
	for _, t := range []string{"order.created", "payment.succeeded", "payment.failed"} {
		fmt.Println(t, endpoint.Matches(filter, t))
	}
	fmt.Println("anything", endpoint.Matches(nil, "anything"))
	fmt.Println("operator event, no filter", endpoint.Matches(nil, endpoint.EventEndpointDisabled))
	fmt.Println("operator event, *", endpoint.Matches([]string{"*"}, endpoint.EventEndpointDisabled))
	fmt.Println("operator event, postbox.endpoint.*", endpoint.Matches([]string{"postbox.endpoint.*"}, endpoint.EventEndpointDisabled))
	// Output:
	// order.created true
	// payment.succeeded true
	// payment.failed false
	// anything true
	// operator event, no filter false
	// operator event, * false
	// operator event, postbox.endpoint.* true
}
