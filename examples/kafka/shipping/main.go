// Command shipping is the consumer of the Kafka example: it reads the
// order.created events that `postbox relay --sink kafka://...` (or
// Debezium's Outbox Event Router) publishes to the topic
// "outbox.event.order", as the consumer group "shipping", and ships each
// order exactly once, however often Kafka delivers its record.
//
//	shipping --db postgres://postgres@127.0.0.1:5432/postgres --brokers 127.0.0.1:9092
//
// Each record goes through the inbox (package inbox/kafka): the event's
// inbox row and its shipment are written in one transaction, and the
// record's offset is committed only after it. --fail-rate makes the handler
// fail after writing, on purpose: nothing of the failed try stays, and the
// record is processed again later. It creates the postbox tables and its
// shipments table at start. SIGINT or SIGTERM stops it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/inbox/kafka"
	"github.com/postbox-go/postbox/store/postgres"
)

// config is what the command line sets.
type config struct {
	DB       string   // --db, or $DB_DSN
	Brokers  []string // --brokers, comma-separated
	Group    string   // --group
	Topic    string   // --topic
	FailRate float64  // --fail-rate, 0 to 1
	Schema   string   // --schema of the inbox and shipments tables
	// RedeliveryMin and RedeliveryMax bound the wait before a failed
	// record is processed again (--redelivery-min, --redelivery-max).
	RedeliveryMin, RedeliveryMax time.Duration
}

func parseConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	cfg := config{}
	var brokers string
	fs := flag.NewFlagSet("shipping", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.DB, "db", "", "PostgreSQL URL, postgres://... ($DB_DSN)")
	fs.StringVar(&brokers, "brokers", "127.0.0.1:9092", "Kafka brokers, HOST:PORT,...")
	fs.StringVar(&cfg.Group, "group", "shipping", "consumer group")
	fs.StringVar(&cfg.Topic, "topic", "outbox.event.order", "topic of the order events")
	fs.Float64Var(&cfg.FailRate, "fail-rate", 0, "probability (0 to 1) that the handler fails after writing, to demonstrate redeliveries")
	fs.StringVar(&cfg.Schema, "schema", postgres.SchemaDefault, "PostgreSQL schema of the inbox and shipments tables")
	fs.DurationVar(&cfg.RedeliveryMin, "redelivery-min", inbox.RedeliveryMinDefault, "first wait before a failed record is processed again; doubled at each failure")
	fs.DurationVar(&cfg.RedeliveryMax, "redelivery-max", inbox.RedeliveryMaxDefault, "longest wait before a failed record is processed again")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if cfg.DB == "" {
		cfg.DB = getenv("DB_DSN")
	}
	cfg.Brokers = strings.Split(brokers, ",")
	switch {
	case cfg.DB == "":
		return cfg, errors.New("--db (or $DB_DSN) is required")
	case cfg.FailRate < 0 || cfg.FailRate > 1:
		return cfg, fmt.Errorf("--fail-rate %v: want 0 to 1", cfg.FailRate)
	}
	return cfg, nil
}

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
	defer stop()
	if err := run(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		fmt.Fprintln(os.Stderr, "shipping:", err)
		os.Exit(1)
	}
}

// orderCreated is the part of the order.created payload (examples/orders)
// that shipping needs.
type orderCreated struct {
	OrderID uuid.UUID `json:"order_id"`
}

// run consumes until ctx ends.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	pool, err := pgxpool.New(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := postgres.New(pool, postgres.Config{Schema: cfg.Schema})
	if err != nil {
		return err
	}
	if _, err := st.Migrate(ctx); err != nil {
		return err
	}
	// No unique constraint, on purpose: a duplicate effect would show as
	// a second row.
	shipments := st.Table("shipments")
	if _, err := pool.Exec(ctx, "create table if not exists "+shipments+
		" (event_id uuid not null, order_id uuid not null, shipped_at timestamptz not null default now())"); err != nil {
		return err
	}

	routes := inbox.NewRouter[pgx.Tx]()
	routes.SetUnknown(inbox.UnknownIgnore) // other event types: recorded, nothing shipped
	inbox.Handle(routes, "order.created", func(ctx context.Context, tx pgx.Tx, ev *inbox.Event, o orderCreated) error {
		if o.OrderID == uuid.Nil {
			return inbox.Reject(errors.New("order_id is missing"))
		}
		if _, err := tx.Exec(ctx, "insert into "+shipments+" (event_id, order_id) values ($1, $2)", ev.ID, o.OrderID); err != nil {
			return err
		}
		if rand.Float64() < cfg.FailRate {
			return errors.New("injected failure after the shipment was written")
		}
		return nil
	})
	c, err := kafka.New(kafka.Config{
		Brokers: cfg.Brokers, Group: cfg.Group, Topics: []string{cfg.Topic},
		Process: inbox.New(st.Driver()).Processor(routes.Apply), Logger: log,
		RedeliveryMin: cfg.RedeliveryMin, RedeliveryMax: cfg.RedeliveryMax,
	})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}
