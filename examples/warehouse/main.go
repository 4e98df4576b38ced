// Command warehouse is the consumer of the postbox examples, after the
// article: it reserves stock for every "order.created" event that a postbox
// relay delivers to its webhook, exactly once, however often the event is
// delivered.
//
//	warehouse --db postgres://postgres@127.0.0.1:5432/postgres --secret whsec_... [--addr 127.0.0.1:8081]
//
// POST /webhook takes the relay's signed deliveries (Standard Webhooks);
// GET / is a health check. Each event's reservation is written in the same
// transaction as its inbox row, so a duplicate is answered 200 without a
// second reservation, and a failed handler leaves no trace and is retried.
// --fail-rate makes that handler fail on purpose, to watch it happen.
//
// SIGINT or SIGTERM stops it gracefully; a second signal exits at once.
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
		fmt.Fprintln(os.Stderr, "warehouse:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, cfg, logger); err != nil {
		fmt.Fprintln(os.Stderr, "warehouse:", err)
		os.Exit(1)
	}
}
