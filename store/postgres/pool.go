package postgres

import (
	"cmp"
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// How ConfigurePool finds dead connections. A peer that vanished without a
// FIN or a RST (a failover behind a virtual IP, a NAT or a firewall that
// dropped its state) leaves a connection that looks open: only the client's
// own timeouts end it.
const (
	// An idle connection is probed after keepAliveIdle of silence, every
	// keepAliveInterval, and dropped after keepAliveCount unanswered
	// probes: within 25 s (the LISTEN connection, idle pool connections).
	keepAliveIdle     = 10 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	// userTimeout drops a connection whose sent data stays unacknowledged
	// that long (TCP_USER_TIMEOUT, Linux only): longer than any statement
	// deadline of the relay, so it catches what no deadline watches (a
	// Terminate sent on a dead link, a LISTEN connection's writes).
	userTimeout = 20 * time.Second
	// pingTimeout bounds the check of a connection idle for over a second
	// before the pool hands it out: a dead one is dropped, and the next
	// one tried, instead of holding the caller until its deadline.
	pingTimeout = 2 * time.Second
	// dialTimeout bounds a TCP connect when the URL sets no
	// connect_timeout: a peer that does not answer a SYN for that long is
	// gone (it also bounds the cancel request pgx sends, on a connection
	// of its own, when it drops a connection whose statement was cut
	// short).
	dialTimeout = 5 * time.Second
	// closeDrain bounds how long pgx drains a connection it drops after
	// cutting a statement short (15 s in pgx). The pool counts a dropped
	// connection against its size until the drain ends, so on a dead link
	// every such connection would take a slot of the pool for 15 s.
	closeDrain = time.Second
)

// errSocketsClosed is the error of a dial after Sockets.Close.
var errSocketsClosed = errors.New("postgres: the pool's connections are closed")

// ConfigurePool sets up cfg for the store (postbox's command line opens
// every PostgreSQL pool with it; call it on a pool of your own before
// pgxpool.NewWithConfig):
//
//   - a cancelled or expired context ends a statement at once: the
//     connection's deadline is set, the statement returns, and the
//     connection is dropped (pgconn.DeadlineContextWatcherHandler, set
//     whatever cfg held: pgconn.CancelRequestContextWatcherHandler would
//     first wait for a cancel request sent on a new connection, which on
//     a dead link waits on a server that does not answer). pgx then sends
//     the cancel request and drains the dropped connection's link in the
//     background, for up to 15 s, and the pool counts the connection
//     against its size meanwhile: the drain is cut to 1 s, and the cancel
//     request's connect to the dial timeout, so that dead links do not
//     starve the pool;
//   - its connections are opened with TCP keepalives and, on Linux,
//     TCP_USER_TIMEOUT, so that connections to a vanished peer are found
//     and dropped (it replaces cfg.ConnConfig.DialFunc, keeping its
//     connect timeout, 5 s when the URL sets none);
//   - a connection idle for over a second is pinged with a timeout before
//     it is handed out (unless cfg.PingTimeout is set).
//
// It returns the pool's sockets: close the pool with ClosePool, so that a
// connection that drains a dead link does not hold the close up.
func ConfigurePool(cfg *pgxpool.Config) *Sockets {
	ctx, stop := context.WithCancel(context.Background())
	s := &Sockets{
		dialer: net.Dialer{
			Timeout: cmp.Or(cfg.ConnConfig.ConnectTimeout, dialTimeout),
			KeepAliveConfig: net.KeepAliveConfig{
				Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
			},
			Control: setUserTimeout,
		},
		ctx:  ctx,
		stop: stop,
		open: map[*trackedConn]struct{}{},
	}
	cfg.ConnConfig.DialFunc = s.dial
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = pingTimeout
	}
	return s
}

// ClosePool closes pool, whose config ConfigurePool set up with sockets.
// A connection closed after its statement was cut short (a deadline, a
// cancelled context) drains its link for up to 15 s in pgx, and closing the
// pool waits for it: on a dead link it would wait all that time. ClosePool
// waits grace for the pool to close cleanly, then closes every socket of
// the pool, which ends the drains at once.
func ClosePool(pool *pgxpool.Pool, sockets *Sockets, grace time.Duration) {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		pool.Close()
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
	}
	sockets.Close()
	<-closed
}

// Sockets are the network connections of the pool ConfigurePool set up.
// It is safe for concurrent use.
type Sockets struct {
	dialer net.Dialer
	// ctx ends with Close: it cuts short the dials under way.
	ctx  context.Context
	stop context.CancelFunc

	mu     sync.Mutex
	open   map[*trackedConn]struct{}
	closed bool
}

// dial is the pool's DialFunc: a TCP connection with keepalives and a user
// timeout, recorded until it is closed.
func (s *Sockets) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	c, err := s.dialer.DialContext(ctx, network, addr)
	if err != nil {
		if s.ctx.Err() != nil {
			return nil, errSocketsClosed
		}
		return nil, err
	}
	tc := &trackedConn{Conn: c, sockets: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return nil, errSocketsClosed
	}
	s.open[tc] = struct{}{}
	return tc, nil
}

// Close closes every open socket of the pool, at once, and refuses new
// ones: what reads or writes them fails. Close the pool first (ClosePool
// does both).
func (s *Sockets) Close() {
	s.stop()
	s.mu.Lock()
	s.closed = true
	open := s.open
	s.open = map[*trackedConn]struct{}{}
	s.mu.Unlock()
	for c := range open {
		_ = c.Conn.Close()
	}
}

// Open is how many sockets of the pool are open.
func (s *Sockets) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// trackedConn is a socket of the pool, forgotten by its Sockets once
// closed.
type trackedConn struct {
	net.Conn
	sockets *Sockets
}

// SetDeadline sets the socket's deadline; one more than closeDrain away is
// shortened to closeDrain. pgx sets no other: its statements' contexts set
// deadlines due at once, or clear them; only its close of a connection
// whose statement was cut short sets one 15 s away, to drain the link
// (which on a dead link would keep the connection's slot of the pool all
// that time).
func (c *trackedConn) SetDeadline(t time.Time) error {
	if limit := time.Now().Add(closeDrain); t.After(limit) {
		t = limit
	}
	return c.Conn.SetDeadline(t)
}

func (c *trackedConn) Close() error {
	c.sockets.mu.Lock()
	delete(c.sockets.open, c)
	c.sockets.mu.Unlock()
	return c.Conn.Close()
}
