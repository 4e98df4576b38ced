package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// A producer opens the database, migrates it, and writes an order and its
// event in one transaction; the relay then claims the event.
func ExampleStore_EnqueueTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "postbox-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), sqlite.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	applied, err := s.Migrate(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("applied migrations", applied)
	if _, err := s.DB().ExecContext(ctx, `create table orders (id integer primary key, total integer not null)`); err != nil {
		log.Fatal(err)
	}

	// The business change and its event commit together, or not at all.
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `insert into orders (id, total) values (?, ?)`, 42, 1000); err != nil {
		log.Fatal(err)
	}
	err = s.EnqueueTx(ctx, tx, postbox.Event{
		AggregateType: "order",
		AggregateID:   "42",
		EventType:     "order.created",
		Payload:       []byte(`{"order_id": 42, "total": 1000}`),
		DedupKey:      "order.created:42",
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil { // wakes the relay of this process
		log.Fatal(err)
	}

	// What the relay sees.
	deliveries, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "relay-1", Limit: 10, Lease: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range deliveries {
		fmt.Println(d.EventType, d.AggregateType, d.AggregateID, string(d.Payload), "attempt", d.Attempt)
	}
	// Output:
	// applied migrations [1 2 3 4 5 6 7 8 9 10 11 12 13 14]
	// order.created order 42 {"order_id": 42, "total": 1000} attempt 1
}

// A consumer applies an event in the same transaction as its inbox row; the
// sender's second delivery of it is a duplicate.
func Example_inbox() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "postbox-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := sqlite.Open(ctx, filepath.Join(dir, "consumer.db"), sqlite.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `create table shipments (order_id integer primary key)`); err != nil {
		log.Fatal(err)
	}

	ib := inbox.New(s.Driver())
	ev := &inbox.Event{
		ID:            uuid.MustParse("0190f0b2-7b4c-7cc0-8d2e-3f1c9a4b5d6e"),
		EventType:     "order.paid",
		AggregateType: "order",
		AggregateID:   "42",
		Payload:       []byte(`{"order_id": 42}`),
	}
	ship := func(ctx context.Context, tx *sql.Tx, ev *inbox.Event) error {
		_, err := tx.ExecContext(ctx, `insert into shipments (order_id) values (json_extract(?, '$.order_id'))`, string(ev.Payload))
		return err
	}
	for range 2 { // at-least-once delivery: the same event twice
		out, err := ib.Process(ctx, ev, ship)
		if err != nil {
			log.Fatal(err) // answer "retry later": nothing of it was kept
		}
		fmt.Println(out)
	}
	var n int
	if err := s.DB().QueryRowContext(ctx, `select count(*) from shipments`).Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("shipments:", n)
	// Output:
	// processed
	// duplicate
	// shipments: 1
}
