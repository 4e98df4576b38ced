package endpoint_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store/postgres"
)

// The wiring of postbox relay --endpoints: the relay publishes each event
// to the fan-out, which writes one delivery per matching endpoint and wakes
// the dispatcher; the dispatcher delivers them, endpoint by endpoint.
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
	d, err := endpoint.NewDispatcher(endpoint.Config{Store: s})
	if err != nil {
		log.Fatal(err)
	}
	fanOut, err := endpoint.NewFanOut(endpoint.FanOutConfig{Store: s, Written: d.Wake})
	if err != nil {
		log.Fatal(err)
	}
	r, err := relay.New(relay.Config{Store: s, Sink: fanOut})
	if err != nil {
		log.Fatal(err)
	}
	go d.Run(ctx)
	log.Fatal(r.Run(ctx))
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
