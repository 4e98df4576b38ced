package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/store/postgres"
)

// dbFlags are the flags that choose the store.
type dbFlags struct {
	url    string
	schema string
}

func (d *dbFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.url, "db", "", "database URL: postgres://..., mysql://user:pass@host:3306/db (MariaDB 10.6+, MySQL 8.0+; the database is created unless the command only reads) or sqlite:PATH")
	fs.StringVar(&d.schema, "schema", postgres.SchemaDefault, "PostgreSQL schema of the postbox tables (PostgreSQL only)")
}

// open connects to the store named by --db; command names the connections
// in pg_stat_activity. A read-only command never creates a database.
func (d *dbFlags) open(ctx context.Context, command string, readOnly bool) (*dburl.DB, error) {
	if err := required("db", d.url); err != nil {
		return nil, err
	}
	s, err := dburl.Open(ctx, d.url, dburl.Options{
		Schema: d.schema, ApplicationName: "postbox " + command, MustExist: readOnly,
	})
	switch {
	case errors.Is(err, dburl.ErrUnknownScheme):
		return nil, fmt.Errorf("%w: --db %v", errUsage, err)
	case readOnly && isSQLite(d.url) && errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("--db: %w (postbox migrate --db %s creates it)", err, dburl.Redact(d.url))
	case err != nil:
		return nil, fmt.Errorf("--db: %w", err)
	}
	return s, nil
}

// isSQLite reports whether url names a SQLite file.
func isSQLite(url string) bool {
	_, ok := dburl.SQLitePath(url)
	return ok
}
