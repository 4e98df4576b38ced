package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Listen holds one dedicated connection (outside the pool) on LISTEN and
// calls notify for every notification of new events. The outbox trigger
// notifies at most once per committing transaction, and skips when another
// transaction is notifying at that moment (see migrations/0001_outbox.sql). Poolers in transaction mode cannot LISTEN: run the relay
// without it and it polls.
func (s *Store) Listen(ctx context.Context, ready, notify func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("postgres: listen: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "listen "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return fmt.Errorf("postgres: listen: %w", err)
	}
	ready()
	for {
		_, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("postgres: listen: %w", err)
		}
		notify()
	}
}
