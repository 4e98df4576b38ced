package kafka_test

import (
	"context"
	"log"
	"log/slog"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/inbox/kafka"
	"github.com/postbox-go/postbox/store/postgres"
)

// A shipping service consumes the "outbox.event.order" topic, which the
// relay's Kafka sink (or Debezium's Outbox Event Router) fills, and ships
// each paid order once, however many times Kafka delivers the record.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	pgStore, err := postgres.New(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ib := inbox.New(pgStore.Driver())

	c, err := kafka.New(kafka.Config{
		Brokers: []string{"127.0.0.1:9092"},
		Group:   "shipping",
		Topics:  []string{"outbox.event.order"},
		Process: ib.Processor(func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
			// Runs in the inbox's transaction: both commit, or neither.
			_, err := tx.Exec(ctx, "insert into shipments (order_id) values (($1::jsonb->>'order_id')::bigint)", ev.Payload)
			return err // an error rolls back; the record is processed again later
		}),
		Logger: slog.Default(),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(ctx); err != nil { // until Ctrl-C
		log.Fatal(err)
	}
}
