// Command consumer is the consuming side of the NATS example: a shipping
// service that ships each order of the stream ORDERS once, however often
// JetStream delivers its "order.created" event. Each message goes through
// an inbox (package inbox/nats): the shipment row and the inbox row commit
// in one transaction, and the message is acknowledged only after that
// commit; a failed handler rolls back and the message comes back later.
//
//	consumer --db postgres://postgres@127.0.0.1:5432/postgres --nats nats://127.0.0.1:4222 --fail-rate 0.3
//
// It creates the stream (if the producer has not yet), its durable consumer
// "shipping", the inbox tables and its shipments table at start.
// --fail-rate makes the handler fail after writing, on purpose, to show
// that nothing is shipped twice or lost. SIGINT or SIGTERM stops it once
// the messages in progress are settled.
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
	var cfg config
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.StringVar(&cfg.DB, "db", "", "PostgreSQL URL, postgres://... ($DB_DSN)")
	fs.StringVar(&cfg.Schema, "schema", "", "PostgreSQL schema of the shipments and inbox tables (default public)")
	fs.StringVar(&cfg.NATS, "nats", "nats://127.0.0.1:4222", "NATS server with JetStream")
	fs.Float64Var(&cfg.FailRate, "fail-rate", 0, "share of handler runs that fail after writing, on purpose (0 to 1)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if cfg.DB == "" {
		cfg.DB = os.Getenv("DB_DSN")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}
