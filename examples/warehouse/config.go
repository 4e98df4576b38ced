package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/postbox-go/postbox/store/postgres"
)

// addrDefault is where the warehouse listens unless --addr says otherwise.
const addrDefault = "127.0.0.1:8081"

// config is what the command line sets.
type config struct {
	// DB is the PostgreSQL URL (--db, or $DB_DSN).
	DB string
	// Addr is the listening address (--addr, default addrDefault).
	Addr string
	// Secret verifies the webhook signatures (--secret, or
	// $WEBHOOK_SECRET): "whsec_<base64 key>", as the relay's
	// --webhook-secret. Never logged.
	Secret string
	// FailRate is the probability, from 0 to 1, that the handler fails
	// after the event's inbox row and reservation were written
	// (--fail-rate): a fault switch for demonstrations and tests.
	FailRate float64
	// Schema holds the inbox and reservations tables (--schema, default
	// public).
	Schema string
}

// parseConfig reads the flags in args, with getenv for the environment
// variables they fall back to; usage goes to out. It returns flag.ErrHelp
// for -h. Errors never quote the secret.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("warehouse", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.DB, "db", "", "PostgreSQL URL, postgres://... ($DB_DSN)")
	fs.StringVar(&cfg.Addr, "addr", addrDefault, "HOST:PORT to listen on")
	fs.StringVar(&cfg.Secret, "secret", "", "webhook signing secret, whsec_<base64> ($WEBHOOK_SECRET)")
	fs.Float64Var(&cfg.FailRate, "fail-rate", 0, "probability (0 to 1) that the handler fails after writing, to demonstrate retries")
	fs.StringVar(&cfg.Schema, "schema", postgres.SchemaDefault, "PostgreSQL schema of the inbox and reservations tables")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: warehouse --db URL --secret whsec_... [--addr HOST:PORT] [--fail-rate F] [--schema NAME]\n\n"+
			"Reserves stock for each order.created event delivered to POST /webhook, exactly once.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	// The environment is read after the flags rather than as their
	// defaults, so that -h never prints a secret or a database password.
	if cfg.DB == "" {
		cfg.DB = getenv("DB_DSN")
	}
	if cfg.Secret == "" {
		cfg.Secret = getenv("WEBHOOK_SECRET")
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case cfg.DB == "":
		return cfg, errors.New("--db (or $DB_DSN) is required")
	case cfg.Secret == "":
		return cfg, errors.New("--secret (or $WEBHOOK_SECRET) is required")
	case cfg.Addr == "":
		return cfg, errors.New("--addr is empty")
	case !(cfg.FailRate >= 0 && cfg.FailRate <= 1):
		return cfg, fmt.Errorf("--fail-rate %v: want a number from 0 to 1", cfg.FailRate)
	}
	return cfg, nil
}
