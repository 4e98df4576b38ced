package postgres_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store/postgres"
)

// A relay in WAL mode: the store's WAL stream (a logical replication slot
// on the outbox table) brings each insert as it commits; the relay polls
// the table only for retries and for what the stream misses. The server
// needs wal_level = logical and the user the REPLICATION attribute: Run
// returns an error saying what to do otherwise.
func ExampleStore_WAL() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s, err := postgres.New(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	// Producers need no notification in WAL mode (postbox migrate --wal).
	if err := s.SetProducerNotify(ctx, false); err != nil {
		log.Fatal(err)
	}
	wal, err := s.WAL(postgres.WALConfig{}) // slot and publication postbox_<database>_public
	if err != nil {
		log.Fatal(err)
	}
	sink, err := webhook.New(webhook.Config{URL: "https://example.com/hooks", Secrets: []string{os.Getenv("WEBHOOK_SECRET")}})
	if err != nil {
		log.Fatal(err)
	}
	r, err := relay.New(relay.Config{Store: s.Driver(), Sink: sink, Stream: wal})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
