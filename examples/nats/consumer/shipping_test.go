package main

import (
	"context"
	"testing"
	"time"

	"github.com/postbox-go/postbox/examples/internal/order"
	"github.com/postbox-go/postbox/examples/nats/orderstream"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/service"
	sinknats "github.com/postbox-go/postbox/sink/nats"
)

// The example end to end, on a NATS server of the test's own: the shop's
// orders, a relay with the NATS sink, and the shipping service failing 30%
// of its handler runs; every order is shipped exactly once.
func TestEveryOrderShippedOnce(t *testing.T) {
	const n = 200
	ctx := t.Context()
	srv := natstest.StartServer(t)
	_, js := natstest.Connect(t, srv.URL)
	if _, err := orderstream.Ensure(ctx, js); err != nil { // as the producer does
		t.Fatal(err)
	}

	shop := pgtest.Store(t)
	orders := order.NewService(shop)
	if err := orders.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if created, err := orders.Produce(ctx, order.ProduceParams{Rate: 10_000, Count: n}); err != nil || created != n {
		t.Fatalf("Produce: %d orders, %v", created, err)
	}

	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	quiet := testlog.Discard()
	consuming := make(chan error, 1)
	consumerCtx, stopConsumer := context.WithCancel(ctx)
	go func() {
		consuming <- run(consumerCtx, config{DB: pgtest.URL(), Schema: schema, NATS: srv.URL, FailRate: 0.3}, quiet)
	}()

	cfg, err := sinknats.ParseURL(srv.URL + "?subject=" + orderstream.SubjectTemplate)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := sinknats.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close()
	r, err := service.NewRelay(ctx, service.RelayConfig{Outbox: shop.Driver(), Sink: sk, Presence: &service.PresenceConfig{Store: shop.Driver()},
		Relay: relay.Config{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	relaying := make(chan error, 1)
	go func() { relaying <- r.Run(relayCtx) }()

	var shipped, distinct int
	deadline := time.Now().Add(60 * time.Second)
	for shipped < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		err := pool.QueryRow(ctx, "select count(*), count(distinct order_id) from "+schema+".shipments").Scan(&shipped, &distinct)
		if err != nil {
			shipped = 0 // the table is not created yet
		}
	}
	stopRelay()
	stopConsumer()
	if err := <-relaying; err != nil {
		t.Errorf("relay: %v", err)
	}
	if err := <-consuming; err != nil {
		t.Errorf("consumer: %v", err)
	}
	if shipped != n || distinct != n {
		t.Fatalf("%d shipments of %d distinct orders, want %d of %d", shipped, distinct, n, n)
	}
}
