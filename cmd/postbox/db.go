package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
	"github.com/postbox-go/postbox/store/sqlite"
)

// dbFlags are the flags that choose the store.
type dbFlags struct {
	url    string
	schema string
}

func (d *dbFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.url, "db", "", "database URL: postgres://... or sqlite:PATH")
	fs.StringVar(&d.schema, "schema", postgres.SchemaDefault, "PostgreSQL schema of the postbox tables (PostgreSQL only)")
}

// migratingStore is what every store of the command line offers.
type migratingStore interface {
	store.Outbox
	Migrate(ctx context.Context) ([]int, error)
}

// orderedStore is a store whose ordered claims need an index that Migrate
// leaves out (PostgreSQL).
type orderedStore interface {
	MigrateOrdered(ctx context.Context) error
	OrderedReady(ctx context.Context) error
}

var _ orderedStore = (*postgres.Store)(nil)

// openedStore is a store with what closes it.
type openedStore struct {
	migratingStore
	close func()
}

// open connects to the store named by --db.
func (d *dbFlags) open(ctx context.Context) (*openedStore, error) {
	if err := required("db", d.url); err != nil {
		return nil, err
	}
	switch {
	case strings.HasPrefix(d.url, "postgres://"), strings.HasPrefix(d.url, "postgresql://"):
		pool, err := pgxpool.New(ctx, d.url)
		if err != nil {
			return nil, fmt.Errorf("--db: %w", err)
		}
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("cannot reach the database: %w", err)
		}
		s, err := postgres.New(pool, postgres.Config{Schema: d.schema})
		if err != nil {
			pool.Close()
			return nil, err
		}
		return &openedStore{migratingStore: s, close: pool.Close}, nil
	case strings.HasPrefix(d.url, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(d.url, "sqlite:"), "//")
		if path == "" {
			return nil, fmt.Errorf("%w: --db sqlite:PATH needs a file path", errUsage)
		}
		s, err := sqlite.Open(ctx, path, sqlite.Config{})
		if err != nil {
			return nil, err
		}
		return &openedStore{migratingStore: s, close: func() { _ = s.Close() }}, nil
	default:
		return nil, fmt.Errorf("%w: --db %q: want postgres://... or sqlite:PATH", errUsage, redact(d.url))
	}
}

// redact hides a password in a database URL before it is printed.
func redact(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	creds, host, ok := strings.Cut(rest, "@")
	if !ok {
		return url
	}
	user, _, hasPass := strings.Cut(creds, ":")
	if !hasPass {
		return url
	}
	return scheme + "://" + user + ":xxxxx@" + host
}
