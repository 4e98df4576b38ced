// Command producer is the producing side of the NATS example: the shop of
// the orders example, whose orders are written with their "order.created"
// event in one transaction, plus the JetStream stream ORDERS that a relay
// publishes those events into. It creates the stream, the orders table and
// the outbox at start, then creates orders at a steady rate.
//
//	producer --db postgres://postgres@127.0.0.1:5432/postgres --nats nats://127.0.0.1:4222 --rate 10 --count 100
//
// The relay is the postbox command:
//
//	postbox relay --db "$DB_DSN" --sink 'nats://127.0.0.1:4222?subject=orders.{event_type}'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/examples/internal/order"
	"github.com/postbox-go/postbox/examples/nats/orderstream"
	"github.com/postbox-go/postbox/store/postgres"
)

func main() {
	fs := flag.NewFlagSet("producer", flag.ContinueOnError)
	db := fs.String("db", "", "PostgreSQL URL, postgres://... ($DB_DSN)")
	natsURL := fs.String("nats", "nats://127.0.0.1:4222", "NATS server with JetStream")
	rate := fs.Float64("rate", 10, "orders created per second")
	count := fs.Int("count", 0, "number of orders to create; 0 creates them until interrupted")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if *db == "" {
		*db = os.Getenv("DB_DSN")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *db, *natsURL, *rate, *count); err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, db, natsURL string, rate float64, count int) error {
	if db == "" {
		return errors.New("--db (or $DB_DSN) is required")
	}
	nc, _, err := orderstream.Open(ctx, natsURL, "shop")
	if err != nil {
		return err
	}
	defer nc.Close()
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := postgres.New(pool, postgres.Config{})
	if err != nil {
		return err
	}
	shop := order.NewService(st)
	if err := shop.Migrate(ctx); err != nil {
		return err
	}
	fmt.Printf("stream %s ready; creating orders at %g/s: relay them with\n  postbox relay --db \"$DB_DSN\" --sink '%s?subject=%s'\n",
		orderstream.Stream, rate, natsURL, orderstream.SubjectTemplate)
	created, err := shop.Produce(ctx, order.ProduceParams{Rate: rate, Count: count, Report: func(p order.Progress) {
		fmt.Printf("%d orders created\n", p.Total)
	}})
	fmt.Printf("created %d orders\n", created)
	return err
}
