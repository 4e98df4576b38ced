package console_test

import (
	"context"
	"log"
	"net/http"
	"time"

	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/store/sqlite"
)

// Serve the console of an SQLite outbox on a loopback address, read-only:
// what "postbox console --db sqlite:app.db --read-only" does.
func ExampleNew() {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, "app.db", sqlite.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	c, err := console.New(console.Config{Store: s, ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	addr := "127.0.0.1:8080"
	if err := console.CheckAddr(addr, ""); err != nil { // a loopback address needs no token
		log.Fatal(err)
	}
	go c.Run(ctx) // samples the outbox for the overview
	srv := &http.Server{Addr: addr, Handler: c, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
