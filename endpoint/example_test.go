package endpoint_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store/postgres"
)

// The wiring of postbox relay --endpoints: a relay drains the outbox into
// the supervisor's fan-out, which writes one delivery per matching endpoint
// and wakes their lanes; each lane, a relay of its own, delivers its
// endpoint's deliveries.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	s, err := postgres.New(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	// Client: give it the SSRF-guarded client in production.
	sup, err := endpoint.New(endpoint.Config{Store: s, Relay: relay.Config{MaxAttempts: 10}})
	if err != nil {
		log.Fatal(err)
	}
	r, err := relay.New(relay.Config{Store: s, Sink: sup.FanOut(), PublishBatch: 100})
	if err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := sup.Run(ctx); err != nil {
			log.Fatal(err)
		}
	})
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
	wg.Wait()
}

// An endpoint's filter is a list of globs on the event type; an empty one
// takes every event.
func ExampleMatches() {
	filter := []string{"order.*", "payment.succeeded"}
	for _, t := range []string{"order.created", "payment.succeeded", "payment.failed"} {
		fmt.Println(t, endpoint.Matches(filter, t))
	}
	fmt.Println("anything", endpoint.Matches(nil, "anything"))
	// Output:
	// order.created true
	// payment.succeeded true
	// payment.failed false
	// anything true
}
