package main

import (
	"context"
	"testing"
	"time"

	"github.com/postbox-go/postbox/examples/internal/order"
	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/service"
	"github.com/postbox-go/postbox/sink/kafka"
	"github.com/postbox-go/postbox/store/postgres"
)

// The whole example: orders written with their outbox events, a relay
// publishing them to Kafka with the sink's defaults (Debezium's topic
// outbox.event.order), and shipping consuming them with a handler that
// fails 30% of the time: every order is shipped exactly once.
func TestEveryOrderShippedOnceThroughKafka(t *testing.T) {
	const n = 200
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	shop, err := postgres.New(pool, postgres.Config{Schema: schema})
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

	_, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "outbox.event.order", 3)
	sk, err := kafka.New(ctx, kafka.Config{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close()
	quiet := testlog.Discard()
	r, err := service.NewRelay(ctx, service.RelayConfig{Outbox: shop.Driver(), Sink: sk, Presence: &service.PresenceConfig{Store: shop.Driver()},
		Relay: relay.Config{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = r.Run(runCtx) }()

	// The consumer shares the database here; in production it has its own.
	cfg := config{DB: pgtest.URL(), Brokers: brokers, Group: "shipping", Topic: "outbox.event.order", FailRate: 0.3, Schema: schema,
		RedeliveryMin: 10 * time.Millisecond, RedeliveryMax: 100 * time.Millisecond}
	shipped := make(chan error, 1)
	go func() { shipped <- run(runCtx, cfg, quiet) }()

	deadline := time.Now().Add(time.Minute)
	var rows, distinct, strays int
	for {
		err := pool.QueryRow(ctx, "select count(*), count(distinct order_id), count(*) filter (where order_id not in (select id from "+
			orders.Table()+")) from "+shop.Table("shipments")).Scan(&rows, &distinct, &strays)
		if err == nil && distinct == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: %d orders shipped (%v)", distinct, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := <-shipped; err != nil {
		t.Fatalf("run: %v", err)
	}
	if rows != n || strays != 0 {
		t.Fatalf("%d shipments for %d orders (%d of unknown orders): some shipped twice", rows, n, strays)
	}
}
