package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/store/postgres"
)

// config is what the command line sets.
type config struct {
	// DB is the PostgreSQL URL (--db, or $DB_DSN).
	DB string
	// Schema holds the shipments table and the inbox (--schema).
	Schema string
	// AMQP is the RabbitMQ server (--amqp, or $AMQP_URL).
	AMQP string
	// Exchange is where the relay publishes (--exchange); Queue is this
	// service's queue (--queue), bound to it with "order.*".
	Exchange, Queue string
	// FailRate is the share of handler runs that fail on purpose after
	// writing, to show that a failure leaves no trace (--fail-rate).
	FailRate float64
	// RedeliveryMin is the first delay before a failed message is
	// requeued, doubled at each failure (--redelivery-min).
	RedeliveryMin time.Duration
}

const amqpDefault = "amqp://guest:guest@127.0.0.1:5672/"

// parseConfig reads the flags in args, with getenv for the environment
// variables they fall back to; usage goes to out. It returns flag.ErrHelp
// for -h.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("shipping", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.DB, "db", "", "PostgreSQL URL, postgres://... ($DB_DSN)")
	fs.StringVar(&cfg.Schema, "schema", postgres.SchemaDefault, "PostgreSQL schema of the shipments table and the inbox")
	fs.StringVar(&cfg.AMQP, "amqp", "", "RabbitMQ URL, amqp://USER:PASS@HOST:PORT/VHOST ($AMQP_URL; default "+amqpDefault+")")
	fs.StringVar(&cfg.Exchange, "exchange", "orders", "exchange the relay publishes to (--sink amqp://...?exchange=NAME)")
	fs.StringVar(&cfg.Queue, "queue", "shipping", "this service's quorum queue; NAME.dead holds the messages it can never process")
	fs.Float64Var(&cfg.FailRate, "fail-rate", 0, "share of handler runs, 0 to 1, that fail on purpose after writing")
	fs.DurationVar(&cfg.RedeliveryMin, "redelivery-min", inbox.RedeliveryMinDefault, "first delay before a failed message is requeued, doubled at each failure")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: shipping --db URL [--amqp URL] [--exchange NAME] [--queue NAME] [--fail-rate R] [--redelivery-min D]\n\n"+
			"Books one shipment per order.created event read from RabbitMQ, exactly once.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	// The environment is read after the flags rather than as their
	// defaults, so that -h never prints a password.
	if cfg.DB == "" {
		cfg.DB = getenv("DB_DSN")
	}
	if cfg.AMQP == "" {
		cfg.AMQP = getenv("AMQP_URL")
	}
	if cfg.AMQP == "" {
		cfg.AMQP = amqpDefault
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case cfg.DB == "":
		return cfg, errors.New("--db (or $DB_DSN) is required")
	case cfg.Exchange == "" || cfg.Queue == "":
		return cfg, errors.New("--exchange and --queue must not be empty")
	case cfg.RedeliveryMin <= 0:
		return cfg, fmt.Errorf("--redelivery-min %v: want a positive duration", cfg.RedeliveryMin)
	case !(cfg.FailRate >= 0 && cfg.FailRate <= 1):
		return cfg, fmt.Errorf("--fail-rate %v: want a number from 0 to 1", cfg.FailRate)
	}
	return cfg, nil
}
