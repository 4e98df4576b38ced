package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/store"
)

// ErrOrderedIndexMissing is the error of an ordered claim, and of
// CheckSchema with SchemaParams.Ordered, when
// outbox_events_aggregate_open_idx is missing or invalid. Its text says
// what to run;
// errors.Is(ErrOrderedIndexMissing, store.ErrOrderedNotReady) holds.
var ErrOrderedIndexMissing error = orderedIndexMissing{}

type orderedIndexMissing struct{}

func (orderedIndexMissing) Error() string {
	return `postgres: ordered claims need the index outbox_events_aggregate_open_idx: run "postbox migrate --ordered" (or Store.MigrateOrdered)`
}

func (orderedIndexMissing) Is(target error) bool { return target == store.ErrOrderedNotReady }

// orderedIndexOptIn is the migration that made the index of ordered claims
// opt-in (0003_ordered_index_opt_in.sql drops it).
const orderedIndexOptIn = 3

// orderedLockPoll is how often MigrateOrdered tries the lock another run
// holds.
const orderedLockPoll = 100 * time.Millisecond

// MigrateOrdered builds the index that ordered claims (store.ClaimParams
// Ordered, relay.Config Ordered, "postbox relay --ordered") need:
// outbox_events_aggregate_open_idx, which Migrate leaves out so that
// producers of unordered outboxes do not maintain it. Run it once, after
// Migrate, on an outbox relayed in ordered mode; "postbox migrate --ordered"
// runs both.
//
// The index is built with CREATE INDEX CONCURRENTLY, outside a transaction,
// so a live outbox keeps taking writes while it is built (the build waits
// for the transactions in progress). A build that failed or was cancelled
// leaves an invalid index behind; MigrateOrdered drops and rebuilds it.
// Running it again once the index is valid is a no-op; concurrent runs on
// one schema take turns. It fails if Migrate has not been run.
func (s *Store) MigrateOrdered(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate ordered: %w", err)
	}
	defer conn.Release()
	var migrated bool
	if err := conn.QueryRow(ctx, s.sql.Get("ordered_index_migrated")).Scan(&migrated); err != nil {
		return fmt.Errorf("postgres: migrate ordered: run Migrate first: %w", err)
	}
	if !migrated {
		return fmt.Errorf("postgres: migrate ordered: run Migrate first (migration %04d is not applied; it would drop the index again)", orderedIndexOptIn)
	}
	unlock, err := s.lockOrdered(ctx, conn)
	if err != nil {
		return err
	}
	defer unlock()
	exists, valid, err := s.orderedIndexState(ctx, conn)
	if err != nil {
		return err
	}
	if exists && !valid {
		if _, err := conn.Exec(ctx, s.sql.Get("ordered_index_drop")); err != nil {
			return fmt.Errorf("postgres: migrate ordered: drop the invalid index outbox_events_aggregate_open_idx: %w", err)
		}
	}
	if !valid {
		if _, err := conn.Exec(ctx, s.sql.Get("ordered_index_create")); err != nil {
			return fmt.Errorf("postgres: migrate ordered: create the index outbox_events_aggregate_open_idx: %w", err)
		}
	}
	if _, valid, err = s.orderedIndexState(ctx, conn); err != nil {
		return err
	}
	if !valid {
		// CREATE INDEX IF NOT EXISTS skips a name another relation uses.
		return fmt.Errorf("postgres: migrate ordered: outbox_events_aggregate_open_idx is still not a valid index of %s after the build: is the name taken by another relation?", s.Table("outbox_events"))
	}
	s.orderedReady.Store(true)
	return nil
}

// OrderedReady returns nil when ordered claims can run: the index
// outbox_events_aggregate_open_idx exists and is valid. Otherwise it returns
// ErrOrderedIndexMissing, whose text says what to run, or the error of the
// check. Claim runs this check before its first ordered claim, and
// CheckSchema with SchemaParams.Ordered runs it too: that is how a relay
// fails early, and how an application should check (Store.CheckSchema).
func (d *Driver) OrderedReady(ctx context.Context) error { return d.orderedIndexReady(ctx) }

// orderedIndexReady is OrderedReady, for CheckSchema and Claim.
func (s *Store) orderedIndexReady(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: check the index of ordered claims: %w", err)
	}
	defer conn.Release()
	_, valid, err := s.orderedIndexState(ctx, conn)
	if err != nil {
		return err
	}
	if !valid {
		return ErrOrderedIndexMissing
	}
	s.orderedReady.Store(true)
	return nil
}

// aggregateKey names one aggregate.
type aggregateKey struct{ typ, id string }

// claimOrdered is Claim in ordered mode (claim_ordered). When the claim
// walks the aggregates for their heads, the walk starts after the
// aggregate where the store's previous walk ended, and goes round: under a
// backlog that keeps the walk running, every aggregate gets its turn.
func (s *Store) claimOrdered(ctx context.Context, p store.ClaimParams) (out []store.ClaimedEvent, err error) {
	if err := s.checkOrdered(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.orderedReady.Store(false)
		}
	}()
	from := s.walkedTo.Load()
	if from == nil {
		from = &aggregateKey{} // before every aggregate but ("", "")
	}
	var (
		walkEnd bool
		to      *aggregateKey
	)
	out, err = s.claim(ctx, s.sql.Get("claim_ordered"), p, []any{&walkEnd}, func(d store.ClaimedEvent) {
		if walkEnd {
			to = &aggregateKey{d.AggregateType, d.AggregateID}
		}
	}, from.typ, from.id, p.MaxBytes, max(p.AggregateRun, 1))
	if err == nil && to != nil {
		s.walkedTo.Store(to)
	}
	return out, err
}

// checkOrdered is Claim's check: a positive result is remembered, a failed
// one is not (the index may be built in the meantime).
func (s *Store) checkOrdered(ctx context.Context) error {
	if s.orderedReady.Load() {
		return nil
	}
	return s.orderedIndexReady(ctx)
}

// orderedIndexState says whether the index exists, and whether it is valid.
func (s *Store) orderedIndexState(ctx context.Context, conn *pgxpool.Conn) (exists, valid bool, err error) {
	err = conn.QueryRow(ctx, s.sql.Get("ordered_index_state")).Scan(&valid)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("postgres: check the index of ordered claims: %w", err)
	}
	return true, valid, nil
}

// lockOrdered takes the session lock that makes MigrateOrdered runs on one
// schema take turns, polling for it (see ordered_index_try_lock), and
// returns what releases it.
func (s *Store) lockOrdered(ctx context.Context, conn *pgxpool.Conn) (unlock func(), err error) {
	key := s.lockKey("migrate ordered")
	for {
		var locked bool
		if err := conn.QueryRow(ctx, s.sql.Get("ordered_index_try_lock"), key).Scan(&locked); err != nil {
			return nil, fmt.Errorf("postgres: migrate ordered: lock: %w", err)
		}
		if locked {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("postgres: migrate ordered: waiting for another run: %w", ctx.Err())
		case <-time.After(orderedLockPoll):
		}
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, s.sql.Get("ordered_index_unlock"), key); err != nil {
			// A connection that may still hold the lock does not go back
			// to the pool: closing it releases the lock.
			_ = conn.Conn().Close(ctx)
		}
	}, nil
}
