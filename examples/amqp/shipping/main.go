// Command shipping is the RabbitMQ consumer of the postbox examples: it
// reads the order.created events that `postbox relay --sink amqp://...`
// publishes from the orders example's outbox, and books one shipment per
// order, exactly once, through an inbox in its PostgreSQL database.
//
//	shipping --db postgres://postgres@127.0.0.1:5432/postgres --amqp amqp://guest:guest@127.0.0.1:5672/
//
// At start it creates its shipments table, runs the postbox migrations and
// declares its RabbitMQ topology: the exchange the relay publishes to
// (topic, durable), its durable quorum queue bound to "order.*", and a
// dead-letter queue for messages it can never process. SIGINT or SIGTERM
// stops it once the messages in flight are settled.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
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
		fmt.Fprintln(os.Stderr, "shipping:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	if err := run(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		fmt.Fprintln(os.Stderr, "shipping:", err)
		os.Exit(1)
	}
}
