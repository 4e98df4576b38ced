package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/examples/internal/order"
	"github.com/postbox-go/postbox/store/postgres"
)

// config is what the command line sets.
type config struct {
	// DB is the PostgreSQL URL (--db, or $DB_DSN).
	DB string
	// Schema holds the orders table and the outbox (--schema, default
	// public).
	Schema string
	// Rate is the number of orders per second (--rate, default 10).
	Rate float64
	// Count is the number of orders to create, 0 for "until interrupted"
	// (--count).
	Count int
}

// parseConfig reads the flags in args, with getenv for the environment
// variables they fall back to; usage goes to out. It returns flag.ErrHelp
// for -h.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.DB, "db", "", "PostgreSQL URL, postgres://... ($DB_DSN)")
	fs.StringVar(&cfg.Schema, "schema", postgres.SchemaDefault, "PostgreSQL schema of the orders table and the outbox")
	fs.Float64Var(&cfg.Rate, "rate", 10, "orders created per second")
	fs.IntVar(&cfg.Count, "count", 0, "number of orders to create; 0 creates them until interrupted")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: orders --db URL [--rate N] [--count N] [--schema NAME]\n\n"+
			"Creates orders, each with its order.created outbox event in the same transaction.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	// The environment is read after the flags rather than as their
	// defaults, so that -h never prints a database password.
	if cfg.DB == "" {
		cfg.DB = getenv("DB_DSN")
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case cfg.DB == "":
		return cfg, errors.New("--db (or $DB_DSN) is required")
	case !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 0):
		return cfg, fmt.Errorf("--rate %v: want a positive number", cfg.Rate)
	case cfg.Count < 0:
		return cfg, fmt.Errorf("--count %d: want 0 or more", cfg.Count)
	}
	return cfg, nil
}

// run connects, migrates and creates orders until cfg.Count are created or
// ctx ends, printing the progress to out every second.
func run(ctx context.Context, cfg config, out io.Writer) error {
	pool, err := pgxpool.New(ctx, cfg.DB)
	if err != nil {
		return fmt.Errorf("--db: %w", err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("cannot reach the database: %w", err)
	}
	st, err := postgres.New(pool, postgres.Config{Schema: cfg.Schema})
	if err != nil {
		return err
	}
	svc := order.NewService(st)
	if err := svc.Migrate(ctx); err != nil {
		return err
	}
	total, err := svc.Produce(ctx, order.ProduceParams{
		Rate:  cfg.Rate,
		Count: cfg.Count,
		Report: func(p order.Progress) {
			fmt.Fprintf(out, "%s created %d orders (%d in total)\n", p.Elapsed.Round(time.Second), p.Created, p.Total)
		},
	})
	fmt.Fprintf(out, "%d orders created\n", total)
	return err
}
