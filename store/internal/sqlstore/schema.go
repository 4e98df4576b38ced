package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/postbox-go/postbox/store"
)

// RowReader runs a statement that returns one row, outside any
// transaction, and scans the row into dest.
type RowReader interface {
	ReadRow(ctx context.Context, query string, dest ...any) error
}

// CheckSchema is a store's CheckSchema verdict on its migrations (see
// store.CheckApplied): it reads whether the migrations table exists, and
// the highest version it records, with the store's queries named
// migrations_table_exists and migrated_version. where names the tables in
// the error (a schema, a file); storeName prefixes the errors of the
// reading.
func CheckSchema(ctx context.Context, storeName, where string, db RowReader, q Queries, migrations Migrations) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	var exists bool
	var version int
	err = db.ReadRow(ctx, q.Get("migrations_table_exists"), &exists)
	if err == nil && exists {
		err = db.ReadRow(ctx, q.Get("migrated_version"), &version)
	}
	if err != nil {
		return fmt.Errorf("%s: check the schema: %w", storeName, err)
	}
	return store.CheckApplied(where, exists, version, all)
}

// CollectRows scans every row of a one-column database/sql result, and
// closes rows. It takes the query's error as well, so that it can wrap the
// call: CollectRows[string](tx.QueryContext(ctx, q)).
func CollectRows[V any](rows *sql.Rows, err error) ([]V, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []V
	for rows.Next() {
		var v V
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
