// Command orders is the producer of the postbox examples, after the
// article: it creates orders at a steady rate, each written to the orders
// table together with its "order.created" event in the outbox, in one
// transaction. A relay (postbox relay) then delivers the events, for
// instance to the warehouse example.
//
//	orders --db postgres://postgres@127.0.0.1:5432/postgres --rate 10 --count 100
//
// It creates its orders table and runs the postbox migrations at start, and
// prints a line a second with the number of orders created. SIGINT or
// SIGTERM stops it after the order under way; a second signal exits at
// once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}
