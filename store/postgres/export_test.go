package postgres

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// DozeLock is the advisory-lock class of dozing relays, for the tests of
// package postgres_test.
const DozeLock = dozeLock

// Expand fills the placeholders of a query or migration, for tests.
func (s *Store) Expand(sql string) string { return s.expand(sql) }

// Query returns the text of a named query of queries.sql, for tests that
// EXPLAIN it.
func (s *Store) Query(name string) string { return s.sql.Get(name) }

// Claim is the claim Follow hands its start with a batch of ids written by
// the transactions xids, for tests.
func (w *WAL) Claim(ctx context.Context, p store.ClaimParams, ids []uuid.UUID, xids []int64) ([]store.ClaimedEvent, error) {
	return w.claim(ctx, p, ids, xids)
}

// EnqueueError exports enqueueError.
var EnqueueError = enqueueError

// TypesRegexp exports typesRegexp.
var TypesRegexp = typesRegexp

// RequeueKeptSQL is requeue_kept as RequeueKept runs it.
func (s *Store) RequeueKeptSQL() string { return s.requeueKeptSQL() }

// DropPartition runs the drop of the outbox's partition name as a
// retention step with Before now does, for tests of a step that finds it
// gone (another relay's step dropped or detached it first).
func (s *Store) DropPartition(ctx context.Context, name string) (store.ExpireResult, error) {
	var res store.ExpireResult
	_, err := s.dropPartition(ctx, store.ExpireParams{Before: time.Now(), Limit: 1000}, name, &res)
	return res, err
}

// PID is the process id of the Listener's backend (0 before it connects),
// for tests that count or terminate it.
func (l *Listener) PID() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess == nil {
		return 0
	}
	return l.sess.pid.Load()
}

// LockKey exports lockKey.
func (s *Store) LockKey(work string) int64 { return s.lockKey(work) }
