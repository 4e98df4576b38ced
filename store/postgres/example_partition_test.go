package postgres_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store/postgres"
)

// A partitioned outbox, a partition per day: the relay's retention drops
// each day's partition once its events are older than a week, instead of
// deleting them row by row. Partition converts an existing outbox online
// (a lock of at most PartitionLockTimeout, then the delivered events kept
// moved in batches) and is a no-op once done; "postbox migrate
// --partitioned" runs it.
func ExampleStore_Partition() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s, err := postgres.New(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	rep, err := s.Partition(ctx, postgres.PartitionParams{Interval: 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("converted %v: %d unfinished events moved in the switch, %d delivered after; partitions %v",
		rep.Converted, rep.Moved, rep.MovedDone, rep.Created)
	sink, err := webhook.New(webhook.Config{URL: "https://example.com/hooks", Secrets: []string{os.Getenv("WEBHOOK_SECRET")}})
	if err != nil {
		log.Fatal(err)
	}
	// The interval is stored in the schema: the relay needs no setting of
	// its own to create the next partitions and drop the old ones.
	r, err := relay.New(relay.Config{Store: s.Driver(), Sink: sink, Retention: 7 * 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
