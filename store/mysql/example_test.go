package mysql_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/postboxtest/mysqltest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/mysql"
)

// A program in any language writes the article's plain SQL insert, without
// an id or any column postbox added; the relay claims the event, with a
// time-ordered id that MySQL made.
func Example_plainSQLInsert() {
	ctx := context.Background()
	dsn, drop := exampleDatabase(ctx)
	defer drop()

	s, err := mysql.Open(ctx, dsn, mysql.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	_, err = s.DB().ExecContext(ctx, `insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key) values ('order', '42', 'order.created', '{"order_id": 42}', 'order.created:42');`)
	if err != nil {
		log.Fatal(err)
	}

	got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "relay-1", Limit: 10, Lease: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range got {
		fmt.Println(e.EventType, e.AggregateType, e.AggregateID, string(e.Payload), "attempt", e.Attempt)
		fmt.Println("id version", e.ID.Version(), "made", time.Since(time.Unix(e.ID.Time().UnixTime())) < time.Minute)
	}
	rec, err := s.GetByDedupKey(ctx, "order.created:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Status, rec.ID == got[0].ID)
	// Output:
	// order.created order 42 {"order_id": 42} attempt 1
	// id version VERSION_7 made true
	// processing true
}

// exampleDatabase creates a database on the test server (mysqltest.URL)
// and returns its URL and what drops it. An unreachable server fails the
// example.
func exampleDatabase(ctx context.Context) (string, func()) {
	server, err := url.Parse(mysqltest.URL())
	if err != nil {
		log.Fatal(err)
	}
	admin, err := mysql.Open(ctx, strings.TrimSuffix(server.String(), "/")+"/mysql", mysql.Config{})
	if err != nil {
		log.Fatalf("MariaDB or MySQL is not reachable at %s (start it, or set TEST_MYSQL_URL): %v", server.Redacted(), err)
	}
	name := "pbexample_" + strings.ReplaceAll(uuid.NewString()[:13], "-", "")
	if _, err := admin.DB().ExecContext(ctx, "create database "+name); err != nil {
		log.Fatal(err)
	}
	server.Path = "/" + name
	return server.String(), func() {
		_, _ = admin.DB().ExecContext(context.Background(), "drop database "+name)
		admin.Close()
	}
}
