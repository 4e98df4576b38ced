package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store/postgres"
)

// A producer writes an order and its event in one transaction, the event
// sent in the same round trip as the COMMIT. A second order whose event
// repeats a dedup key commits nothing at all.
func ExampleStore_Transact() {
	ctx := context.Background()
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/postgres"
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	schema := "postbox_example_" + strconv.Itoa(os.Getpid())
	defer pool.Exec(ctx, "drop schema if exists "+schema+" cascade")
	s, err := postgres.New(pool, postgres.Config{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	orders := s.Table("orders")
	if _, err := pool.Exec(ctx, "create table "+orders+" (id bigserial primary key, total int not null)"); err != nil {
		log.Fatal(err)
	}

	placeOrder := func(total int, dedupKey string) (int64, error) {
		var id int64
		err := s.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
			if err := tx.QueryRow(ctx, "insert into "+orders+" (total) values ($1) returning id", total).Scan(&id); err != nil {
				return err
			}
			return out.Add(postbox.Event{
				AggregateType: "order",
				AggregateID:   strconv.FormatInt(id, 10),
				EventType:     "order.created",
				Payload:       fmt.Appendf(nil, `{"order_id": %d, "total": %d}`, id, total),
				DedupKey:      dedupKey,
			})
		})
		return id, err
	}

	id, err := placeOrder(1000, "checkout:basket-7")
	fmt.Println("order", id, "placed:", err == nil)
	_, err = placeOrder(1000, "checkout:basket-7") // the same basket checked out twice
	var dup *postbox.DuplicateError
	if errors.As(err, &dup) {
		fmt.Println("refused, duplicate", dup.Keys)
	}

	var n, events int
	if err := pool.QueryRow(ctx, "select (select count(*) from "+orders+"), (select count(*) from "+s.Table("outbox_events")+")").Scan(&n, &events); err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "order,", events, "event")
	// Output:
	// order 1 placed: true
	// refused, duplicate [checkout:basket-7]
	// 1 order, 1 event
}
