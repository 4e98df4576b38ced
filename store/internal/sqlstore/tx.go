package sqlstore

import (
	"context"
	"errors"
)

// Transactor begins and ends one store's transactions. T is the
// transaction as the store's statements take it (pgx.Tx, *sql.Tx, or a
// store's own type around one).
type Transactor[T any] interface {
	// Begin starts a read-write transaction. A store whose database has
	// one writer at a time (SQLite) takes the write lock here.
	Begin(ctx context.Context) (T, error)
	// Commit commits tx.
	Commit(ctx context.Context, tx T) error
	// Rollback ends tx without committing it. It returns nil when tx has
	// ended already (after Commit, or when its context ended it).
	Rollback(ctx context.Context, tx T) error
}

// InTx runs fn in a transaction of tr and commits it; when fn fails, it
// rolls back and returns fn's error (joined with the rollback's, if that
// failed too).
func InTx[T any](ctx context.Context, tr Transactor[T], fn func(tx T) error) error {
	tx, err := tr.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		if rerr := tr.Rollback(context.WithoutCancel(ctx), tx); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return tr.Commit(ctx, tx)
}
