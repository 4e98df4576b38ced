package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
	"github.com/postbox-go/postbox/store/sqlite"
)

// placeOrder is a shop's handler, written once against store.Producer: the
// order row and its event commit together, on SQLite or on PostgreSQL.
func placeOrder(ctx context.Context, db *sql.DB, orders string, out store.Producer[*sql.Tx], id string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "insert into "+orders+" (id) values ($1)", id); err != nil {
		return err
	}
	err = out.EnqueueTx(ctx, tx, postbox.Event{
		AggregateType: "order", AggregateID: id, EventType: "order.created",
		Payload: []byte(`{"order_id": "` + id + `"}`), DedupKey: "order.created:" + id,
	})
	if err != nil {
		return err
	}
	return tx.Commit()
}

// One producer call shape for every store: the same handler writes through
// the SQLite store and through the PostgreSQL store's database/sql
// producer.
func ExampleProducer() {
	ctx := context.Background()

	// SQLite: the store is the producer.
	dir, _ := os.MkdirTemp("", "producer-example")
	defer os.RemoveAll(dir)
	lite, err := sqlite.Open(ctx, filepath.Join(dir, "shop.db"), sqlite.Config{})
	if err != nil {
		panic(err)
	}
	defer lite.Close()
	if _, err := lite.Migrate(ctx); err != nil {
		panic(err)
	}
	if _, err := lite.DB().ExecContext(ctx, "create table orders (id text primary key)"); err != nil {
		panic(err)
	}
	if err := placeOrder(ctx, lite.DB(), "orders", lite, "1"); err != nil {
		panic(err)
	}

	// PostgreSQL through database/sql (pgx's stdlib driver), in a scratch
	// schema.
	pool, err := pgxpool.New(ctx, pgtest.URL())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	schema := "example_producer_" + strings.ReplaceAll(postbox.NewID().String()[24:], "-", "")
	defer pool.Exec(ctx, "drop schema "+schema+" cascade")
	pg, err := postgres.New(pool, postgres.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	if _, err := pg.Migrate(ctx); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, "create table "+pg.Table("orders")+" (id text primary key)"); err != nil {
		panic(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := placeOrder(ctx, db, pg.Table("orders"), pg.DatabaseSQL(), "1"); err != nil {
		panic(err)
	}

	for _, s := range []store.Inspector{lite, pg} {
		st, err := s.Stats(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println(st.Pending, "event pending")
	}
	// Output:
	// 1 event pending
	// 1 event pending
}
