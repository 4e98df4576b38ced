package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/tracecontext"
)

// cancelTimeout bounds the cancel request Transact sends when its context
// ends while the batch is on its way.
const cancelTimeout = 5 * time.Second

// Transact runs fn in a transaction on a connection of the store's pool and
// commits it. The events fn adds to out are written in the same round trip
// as the COMMIT: one pgx.Batch of their INSERTs (one per thousand events)
// followed by COMMIT, sent on the transaction's connection. A business
// transaction with events thus costs one round trip fewer than one that
// calls EnqueueTx before committing.
//
// It is all or nothing:
//   - When fn returns an error, or panics, the transaction is rolled back
//     and nothing is written; fn's error is returned as it is, and the
//     panic goes on after the rollback.
//   - When fn adds no event, the transaction is simply committed.
//   - When an event's DedupKey is already in the outbox, or an event id or
//     dedup key repeats, nothing commits, not even fn's business change
//     (unlike EnqueueTx, which skips the duplicate and lets the caller
//     commit the rest). The error matches postbox.ErrDuplicate and is a
//     *postbox.DuplicateError listing the dedup keys that were taken or
//     repeated, or the word "id" for a repeated event id.
//   - When fn ends the transaction itself (tx.Commit, tx.Rollback) or leaves
//     it aborted by a failed statement whose error it ignored, events are not
//     written and an error is returned.
//
// The tx given to fn must not be used after fn returns, nor out kept: as
// with pgx.BeginFunc, the connection goes back to the pool. The connection
// is never put back in a transaction: a failed batch is rolled back when
// PostgreSQL is still in the transaction, and a connection whose context
// ended mid-way is closed by pgx. When ctx ends while the batch is on its
// way, Transact also asks the server to cancel it, so that an INSERT
// waiting on a lock does not commit later; as with any interrupted COMMIT,
// though, an error from a context that ended does not prove that nothing
// committed.
//
// When ctx carries a span, its trace context is stored in the headers of
// the events without a traceparent of their own, as EnqueueTx does: the
// context of ctx, the one Transact was given (Add has no context).
//
// Errors other than fn's start with "postgres: transact: ".
func (s *Store) Transact(ctx context.Context, fn func(tx pgx.Tx, out *Outgoing) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: transact: %w", err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: transact: begin: %w", err)
	}
	out := &Outgoing{trace: tracecontext.FromContext(ctx)}
	if err := runTransactFn(ctx, tx, out, fn); err != nil {
		return err
	}
	args, keys := out.close()
	if len(keys) == 0 {
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("postgres: transact: commit: %w", err)
		}
		return nil
	}
	switch conn.Conn().PgConn().TxStatus() {
	case 'T':
	case 'E':
		rollback(ctx, tx)
		return fmt.Errorf("postgres: transact: a statement of the transaction failed, events not written: %w", pgx.ErrTxCommitRollback)
	default:
		return errors.New("postgres: transact: the transaction was ended inside fn: events not written")
	}

	b := &pgx.Batch{}
	for start := 0; start < len(keys); start += enqueueChunk {
		n := min(enqueueChunk, len(keys)-start)
		b.Queue(s.insertSQL(n, false), args[start*enqueueColumns:(start+n)*enqueueColumns]...)
	}
	b.Queue("commit")
	commit := b.Len() - 1
	failed, err := runBatch(conn.Conn().SendBatch(ctx, b), b.Len())
	if err == nil {
		return nil
	}
	s.abandon(ctx, conn, tx)
	if failed < commit && isUniqueViolation(err) {
		return s.duplicates(ctx, conn, keys, err)
	}
	if failed < commit {
		return fmt.Errorf("postgres: transact: insert events: %w", err)
	}
	return fmt.Errorf("postgres: transact: commit: %w", err)
}

// runTransactFn runs fn and rolls tx back if fn fails or panics.
func runTransactFn(ctx context.Context, tx pgx.Tx, out *Outgoing, fn func(tx pgx.Tx, out *Outgoing) error) error {
	ok := false
	defer func() {
		if !ok { // fn panicked (or called runtime.Goexit)
			out.close()
			rollback(ctx, tx)
		}
	}()
	err := fn(tx, out)
	ok = true
	if err != nil {
		out.close()
		rollback(ctx, tx)
		return err
	}
	return nil
}

// runBatch reads the n results of the batch and closes it. It returns the
// index of the statement that failed (n-1 when only closing failed) and its
// error.
func runBatch(br pgx.BatchResults, n int) (failed int, err error) {
	for i := range n {
		tag, err := br.Exec()
		if err == nil && i == n-1 && tag.String() == "ROLLBACK" {
			err = pgx.ErrTxCommitRollback // COMMIT of an aborted transaction
		}
		if err != nil {
			_ = br.Close()
			return i, err
		}
	}
	return n - 1, br.Close()
}

// abandon ends what is left of a transaction whose batch failed, so that the
// connection goes back to the pool idle. If the COMMIT itself failed, the
// transaction is already over and nothing is sent. If pgx closed the
// connection because ctx ended while the batch was on its way, the server
// may still be running it: it is asked to cancel, so that an INSERT waiting
// on a lock does not go on to the COMMIT queued behind it.
func (s *Store) abandon(ctx context.Context, conn *pgxpool.Conn, tx pgx.Tx) {
	pg := conn.Conn().PgConn()
	if pg.IsClosed() {
		if ctx.Err() != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
			defer cancel()
			_ = pg.CancelRequest(cctx)
		}
		return
	}
	if st := pg.TxStatus(); st == 'T' || st == 'E' {
		rollback(ctx, tx) // on failure pgx closes the connection
	}
}

// duplicates reports a unique violation of the batch's INSERT: the events'
// dedup keys that are taken (by an event, or held after one's delivery),
// found after the rollback with one query, and
// those repeated among the events; or "id" when none is (a repeated id).
func (s *Store) duplicates(ctx context.Context, conn *pgxpool.Conn, keys []string, cause error) error {
	var wanted []string
	seen := make(map[string]bool, len(keys))
	repeated := map[string]bool{}
	for _, k := range keys {
		if k == "" {
			continue
		}
		if seen[k] {
			repeated[k] = true
			continue
		}
		seen[k] = true
		wanted = append(wanted, k)
	}
	taken := map[string]bool{}
	if len(wanted) > 0 {
		rows, err := conn.Query(ctx, s.sql.Get("taken_dedup_keys"), wanted)
		if err == nil {
			var found []string
			found, err = pgx.CollectRows(rows, pgx.RowTo[string])
			for _, k := range found {
				taken[k] = true
			}
		}
		if err != nil {
			return fmt.Errorf("postgres: transact: %w, nothing committed (looking up the taken dedup keys: %v): %v", postbox.ErrDuplicate, err, cause)
		}
	}
	dup := &postbox.DuplicateError{}
	for _, k := range wanted {
		if taken[k] || repeated[k] {
			dup.Keys = append(dup.Keys, k)
		}
	}
	if len(dup.Keys) == 0 {
		dup.Keys = []string{"id"}
	}
	return fmt.Errorf("postgres: transact: %w, nothing committed: %v", dup, cause)
}

// Outgoing collects the events of a Transact transaction. Its methods are
// safe for concurrent use; it is valid only until fn returns.
type Outgoing struct {
	mu     sync.Mutex
	closed bool
	trace  tracecontext.Headers // Transact's, set before fn runs
	args   []any                // the INSERT parameters, enqueueColumns per event
	keys   []string             // the dedup key of each event ("" for none)
}

// Add validates events (postbox.Event.Validate) and keeps them, to be
// written with the COMMIT. Events without an ID get a UUIDv7, written back
// into the slice when it is passed as events... (set IDs with
// postbox.NewID to know them beforehand). If one of events is invalid, Add
// keeps none of them and returns the validation error at once: return it
// from fn to roll back, or go on without them. Add after fn has returned
// is an error.
func (o *Outgoing) Add(events ...postbox.Event) error {
	args := make([]any, 0, len(events)*enqueueColumns)
	keys := make([]string, 0, len(events))
	for i := range events {
		a, err := enqueueArgs(&events[i], o.trace)
		if err != nil {
			return fmt.Errorf("postgres: transact: event %d: %w", i, err)
		}
		args = append(args, a...)
		keys = append(keys, events[i].DedupKey)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return errors.New("postgres: transact: Add after the transaction's fn returned")
	}
	o.args = append(o.args, args...)
	o.keys = append(o.keys, keys...)
	return nil
}

// close ends Add and returns what it kept.
func (o *Outgoing) close() (args []any, keys []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	return o.args, o.keys
}

// rollback rolls tx back even when ctx has ended, so that the connection
// goes back to the pool rather than being closed; cancelTimeout bounds it.
func rollback(ctx context.Context, tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer cancel()
	_ = tx.Rollback(rctx)
}
