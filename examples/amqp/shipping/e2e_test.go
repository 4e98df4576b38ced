package main

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox/examples/internal/order"
	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	relayservice "github.com/postbox-go/postbox/service"
	"github.com/postbox-go/postbox/sink/amqp"
	"github.com/postbox-go/postbox/store/postgres"
)

// The pair end to end: orders written by the orders example's code, a
// relay publishing them to RabbitMQ, and this service booking them while
// its handler fails 30% of the time: every order is booked exactly once.
func TestEveryOrderShippedOnce(t *testing.T) {
	const n = 200
	ctx := context.Background()
	pool := pgtest.Pool(t)
	shop, err := postgres.New(pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	orders := order.NewService(shop)
	if err := orders.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if created, err := orders.Produce(ctx, order.ProduceParams{Rate: 10000, Count: n}); err != nil || created != n {
		t.Fatalf("Produce: %d orders, %v", created, err)
	}

	srv := amqptest.Connect(t)
	cfg := config{
		DB: pgtest.URL(), Schema: pgtest.Schema(t, pool), AMQP: amqptest.URL(),
		Exchange: amqptest.Name("pbtest_orders"), Queue: amqptest.Name("pbtest_shipping"), FailRate: 0.3, RedeliveryMin: 10 * time.Millisecond,
	}
	t.Cleanup(func() {
		srv.Do("delete the topology", func(ch *amqp091.Channel) error {
			for _, q := range []string{cfg.Queue, cfg.Queue + ".dead"} {
				if _, err := ch.QueueDelete(q, false, false, false); err != nil {
					return err
				}
			}
			if err := ch.ExchangeDelete(cfg.Queue+".dead", false, false); err != nil {
				return err
			}
			return ch.ExchangeDelete(cfg.Exchange, false, false)
		})
	})
	if err := declareTopology(cfg); err != nil { // as run does, before the relay publishes
		t.Fatal(err)
	}
	quiet := testlog.Discard()
	consumerCtx, stopConsumer := context.WithCancel(ctx)
	consumed := make(chan error, 1)
	go func() { consumed <- run(consumerCtx, cfg, quiet) }()
	defer func() {
		stopConsumer()
		if err := <-consumed; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	shipments := cfg.Schema + ".shipments"

	sink, err := amqp.New(ctx, amqp.Config{URL: amqptest.URL(), Exchange: cfg.Exchange})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	r, err := relayservice.NewRelay(ctx, relayservice.RelayConfig{Outbox: shop.Driver(), Sink: sink, Presence: &relayservice.PresenceConfig{Store: shop.Driver()},
		Relay: relay.Config{Logger: quiet, Retention: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(relayCtx) }()
	defer func() {
		stopRelay()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	var booked, orphans, doubled int
	waitFor(t, "every order booked", func() bool {
		err := pool.QueryRow(ctx, `select
  (select count(distinct order_id) from `+shipments+`),
  (select count(*) from `+shipments+` s where not exists (select 1 from `+orders.Table()+` o where o.id = s.order_id)),
  (select count(*) - count(distinct order_id) from `+shipments+`)`).Scan(&booked, &orphans, &doubled)
		return err == nil && booked == n
	})
	if orphans != 0 || doubled != 0 {
		t.Fatalf("%d shipments of unknown orders, %d booked twice", orphans, doubled)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 60s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
