package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store/postgres"
)

// exampleStore connects to the test server and returns a migrated store in
// a schema of its own, on the connection search path, with the application
// table shipments(order_id); close drops it all.
func exampleStore() (s *postgres.Store, close func()) {
	ctx := context.Background()
	schema := fmt.Sprintf("example_%d", time.Now().UnixNano())
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		log.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	if s, err = postgres.New(pool, postgres.Config{Schema: schema}); err != nil {
		log.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "create table shipments (order_id bigint primary key)"); err != nil {
		log.Fatal(err)
	}
	return s, func() {
		_, _ = pool.Exec(ctx, "drop schema "+pgx.Identifier{schema}.Sanitize()+" cascade")
		pool.Close()
	}
}

// shipOrder is the application's handler: it applies an "order.paid" event
// in the inbox's transaction.
func shipOrder(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
	var order struct {
		OrderID int64 `json:"order_id"`
	}
	if err := json.Unmarshal(ev.Payload, &order); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "insert into shipments (order_id) values ($1)", order.OrderID)
	return err
}

// A consumer applies an event and gets its duplicate.
func ExampleInbox_Process() {
	pgStore, close := exampleStore()
	defer close()
	ctx := context.Background()

	ib := inbox.New(pgStore.Driver())
	ev := &inbox.Event{
		ID:            uuid.MustParse("0190f0b2-7b4c-7cc0-8d2e-3f1c9a4b5d6e"),
		EventType:     "order.paid",
		AggregateType: "order",
		AggregateID:   "42",
		Payload:       []byte(`{"event_id": "0190f0b2-7b4c-7cc0-8d2e-3f1c9a4b5d6e", "order_id": 42}`),
	}
	for range 2 { // at-least-once delivery: the same event twice
		out, err := ib.Process(ctx, ev, shipOrder)
		if err != nil {
			log.Fatal(err) // answer "retry later": nothing of it was kept
		}
		fmt.Println(out)
	}

	var shipments int
	_ = pgStore.Pool().QueryRow(ctx, "select count(*) from shipments").Scan(&shipments)
	fmt.Println("shipments:", shipments)
	// Output:
	// processed
	// duplicate
	// shipments: 1
}

// Ordered events: an event that comes before its predecessor is refused,
// and applied when the sender retries it after the predecessor.
func ExampleInbox_Process_ordered() {
	pgStore, close := exampleStore()
	defer close()
	ctx := context.Background()
	ib := inbox.New(pgStore.Driver())

	event := func(seq int64) *inbox.Event {
		return &inbox.Event{ID: uuid.New(), AggregateType: "order", AggregateID: "42", Seq: seq}
	}
	apply := func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
		fmt.Println("applied", ev.Seq)
		return nil
	}
	first, second := event(1), event(2)
	_, err := ib.Process(ctx, second, apply)
	fmt.Println("out of order:", errors.Is(err, inbox.ErrOutOfOrder)) // HTTP 503, Retry-After
	_, _ = ib.Process(ctx, first, apply)
	_, _ = ib.Process(ctx, second, apply) // the sender's retry
	// Output:
	// out of order: true
	// applied 1
	// applied 2
}

// Retention: done rows older than the sender's retry horizon are removed in
// batches, for instance by a daily job.
func ExampleInbox_DeleteProcessedBefore() {
	pgStore, close := exampleStore()
	defer close()
	ctx := context.Background()
	ib := inbox.New(pgStore.Driver())

	retention := 30 * 24 * time.Hour // longer than any sender retries
	total := 0
	for {
		n, err := ib.DeleteProcessedBefore(ctx, time.Now().Add(-retention), 1000)
		if err != nil {
			log.Fatal(err)
		}
		total += n
		if n < 1000 {
			break
		}
	}
	fmt.Println("deleted:", total)
	// Output:
	// deleted: 0
}
