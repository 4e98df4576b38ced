package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The connections of a Store are modernc.org/sqlite connections with two
// additions.
//
// The write lock. SQLite has one writer at a time; a transaction that finds
// the lock taken sleeps and polls (1, 2, 5, ... 100 ms) until the busy
// timeout. Under load that is unfair: a waiter can sleep through hundreds of
// commits of busier goroutines, and fail. So read-write transactions of one
// Store first queue for the Store's writeLock, in Go, and only then BEGIN
// IMMEDIATE. SQLite's busy timeout still arbitrates between processes.
//
// Wake-ups. SQLite's pre-update hook marks a connection whose transaction
// inserts into the outbox table, and its commit then wakes the Store's
// listeners. So any insert made through Store.DB() wakes the relay when it
// commits: EnqueueTx in a producer's transaction, and the article's plain
// INSERT as well. A read-write transaction wakes them once its COMMIT has
// returned. A statement outside a transaction wakes them from the commit
// hook, just before its implicit commit completes; the relay sees the rows
// anyway, because its claim is a write transaction and therefore begins
// after that commit.

// connector opens the Store's connections.
type connector struct {
	base  driver.Connector
	store *Store
}

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	inner, ok := dc.(innerConn)
	if !ok {
		dc.Close()
		return nil, fmt.Errorf("sqlite: connection of type %T lacks the driver interfaces the store needs", dc)
	}
	cn := &conn{inner: inner, store: c.store}
	inner.RegisterPreUpdateHook(func(d sqlite.SQLitePreUpdateData) {
		if d.Op == sqlite3.SQLITE_INSERT && d.TableName == c.store.outboxTable && d.DatabaseName == "main" {
			cn.outboxInsert = true
		}
	})
	inner.RegisterCommitHook(func() int32 {
		if cn.outboxInsert {
			cn.outboxInsert = false
			if cn.writeTx {
				cn.wakeAfterCommit = true // writeTx.Commit wakes once COMMIT returns
			} else {
				c.store.Notify()
			}
		}
		return 0
	})
	inner.RegisterRollbackHook(func() { cn.outboxInsert = false })
	return cn, nil
}

func (c *connector) Driver() driver.Driver { return c.base.Driver() }

// connect opens a connection, retrying for up to the busy timeout while the
// database is locked. Setting up a connection can fail that way without
// SQLite's busy handler being consulted: PRAGMA journal_mode=WAL needs an
// exclusive lock to convert a new database, which fails at once while
// another connection (or process) is opening the same file.
func (c *connector) connect(ctx context.Context) (driver.Conn, error) {
	deadline := time.Now().Add(c.store.busyTimeout)
	delay := time.Millisecond
	for {
		dc, err := c.base.Connect(ctx)
		if err == nil || !isBusy(err) || time.Now().Add(delay).After(deadline) {
			return dc, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// isBusy reports SQLITE_BUSY, whatever its extended code.
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// innerConn is what a modernc.org/sqlite connection implements and conn
// forwards.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	sqlite.HookRegisterer
}

// conn is a modernc.org/sqlite connection whose read-write transactions take
// the Store's write lock.
type conn struct {
	inner innerConn
	store *Store
	// outboxInsert is set by the pre-update hook when the current
	// transaction inserts into the outbox. writeTx is true while a
	// read-write transaction begun by BeginTx is open, and wakeAfterCommit
	// when its commit is to wake the listeners. database/sql uses a
	// connection from one goroutine at a time, and the hooks run on that
	// goroutine.
	outboxInsert    bool
	writeTx         bool
	wakeAfterCommit bool
}

var (
	_ driver.Conn               = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
)

// Unwrap returns the modernc.org/sqlite connection, for sqlite.Limit and
// other functions that see through wrappers.
func (c *conn) Unwrap() driver.Conn { return c.inner }

func (c *conn) Prepare(query string) (driver.Stmt, error) { return c.inner.Prepare(query) }
func (c *conn) Close() error                              { return c.inner.Close() }

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx begins read-only transactions at once and read-write ones after
// taking the Store's write lock.
func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.ReadOnly {
		return c.inner.BeginTx(ctx, opts)
	}
	if err := c.store.lockWrite(ctx); err != nil {
		return nil, err
	}
	tx, err := c.inner.BeginTx(ctx, opts)
	if err != nil {
		c.store.unlockWrite()
		return nil, err
	}
	c.writeTx, c.wakeAfterCommit = true, false
	return &writeTx{inner: tx, conn: c}, nil
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.inner.PrepareContext(ctx, query)
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.inner.ExecContext(ctx, query, args)
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.inner.QueryContext(ctx, query, args)
}

func (c *conn) Ping(ctx context.Context) error         { return c.inner.Ping(ctx) }
func (c *conn) ResetSession(ctx context.Context) error { return c.inner.ResetSession(ctx) }
func (c *conn) IsValid() bool                          { return c.inner.IsValid() }

// writeTx releases the write lock when the transaction ends, and wakes the
// listeners after a commit that inserted into the outbox.
type writeTx struct {
	inner driver.Tx
	conn  *conn
	ended atomic.Bool
}

func (t *writeTx) Commit() error {
	err := t.inner.Commit()
	wake := err == nil && t.conn.wakeAfterCommit
	t.end()
	if wake {
		t.conn.store.Notify()
	}
	return err
}

func (t *writeTx) Rollback() error {
	defer t.end()
	return t.inner.Rollback()
}

func (t *writeTx) end() {
	if t.ended.CompareAndSwap(false, true) {
		t.conn.writeTx, t.conn.wakeAfterCommit = false, false
		t.conn.store.unlockWrite()
	}
}

// errWriteLockTimeout is reported when a write transaction of this process
// held the write lock for longer than the busy timeout.
var errWriteLockTimeout = errors.New("database is locked")

// lockWrite waits for the write lock, at most the busy timeout.
func (s *Store) lockWrite(ctx context.Context) error {
	select {
	case s.writeLock <- struct{}{}:
		return nil
	default:
	}
	timer := time.NewTimer(s.busyTimeout)
	defer timer.Stop()
	select {
	case s.writeLock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return fmt.Errorf("%w: a write transaction of this process has held the store's write lock for longer than %v (Config.BusyTimeout); is one open on this goroutine?", errWriteLockTimeout, s.busyTimeout)
	}
}

func (s *Store) unlockWrite() { <-s.writeLock }
