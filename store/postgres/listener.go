package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/store"
)

// errListenerClosed is what Listen returns once its Listener is closed: it
// wraps store.ErrCannotListen, so a relay polls from then on instead of
// trying again.
var errListenerClosed = fmt.Errorf("postgres: listen: the Listener is closed: %w", store.ErrCannotListen)

// A Listener is one listening connection shared by the stores of several
// schemas on one pool: give it to each of them as Config.Listener, and the
// relays of all those schemas together hold one connection of the database
// for their notifications, instead of one each (one relay process draining
// a hundred schemas would otherwise take a hundred connections, PostgreSQL's
// default max_connections).
//
// It connects (outside the pool, with the pool's connection settings) when
// a store's Listen first subscribes, and keeps the connection until Close
// or until the connection fails. One goroutine owns the connection: it
// waits for notifications and hands each to the stores listening on its
// channel, and between waits it runs the stores' LISTEN, UNLISTEN, doze and
// wake statements. When the connection fails the Listen of every store on
// it returns the error (the relay listens again after a back-off), and the
// next Listen connects again.
//
// Several Listen calls of one channel (two relays of one schema) each get
// every notification of it, and its doze mark is held while any of them
// dozes. A Listener is safe for concurrent use.
type Listener struct {
	pool *pgxpool.Pool
	// private marks the Listener a store's Listen makes for itself when
	// its Config has none: closed when that Listen returns, which ends
	// its subscription with the connection.
	private bool

	mu     sync.Mutex
	closed bool
	sess   *session
}

// NewListener returns a Listener for the stores on pool (see Listener). It
// does not connect yet.
func NewListener(pool *pgxpool.Pool) *Listener {
	return &Listener{pool: pool}
}

// Close closes the Listener's connection and waits until it is closed. The
// Listen calls of the stores on it return, and later ones return an error
// wrapping store.ErrCannotListen: a relay still running polls from then on,
// so close it after the relays that use it have stopped.
func (l *Listener) Close() {
	l.mu.Lock()
	l.closed = true
	sess := l.sess
	l.mu.Unlock()
	if sess != nil {
		sess.stop()
		<-sess.done
	}
}

// current returns the Listener's live session, starting one (which
// connects) when there is none.
func (l *Listener) current() (*session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errListenerClosed
	}
	if l.sess == nil || l.sess.ended() {
		l.sess = startSession(l.pool)
	}
	return l.sess, nil
}

// listen is Driver.Listen on the Listener: it subscribes st's channel,
// probes it, and calls notify for each notification of the channel until
// ctx ends (nil) or the connection fails (its error).
func (l *Listener) listen(ctx context.Context, st *Store, ready func(store.Listening), notify func()) error {
	sess, err := l.current()
	if err != nil {
		return err
	}
	sub := st.newSubscription(sess)
	defer close(sub.gone)
	if _, err := sess.call(ctx, &request{kind: reqSubscribe, sub: sub}); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if !l.private {
		// The connection stays: end the subscription on it, so that
		// producers stop notifying this channel (its doze ends) and the
		// session stops listening on it.
		defer func() { _, _ = sess.call(context.Background(), &request{kind: reqUnsubscribe, sub: sub}) }()
	}
	if err := st.probe(ctx, sub); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	ready(store.Listening{Channel: st.channel, Dozer: sub})
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sess.done:
			if ctx.Err() != nil {
				return nil
			}
			return sess.err
		case <-sub.signal:
			for n := sub.take(); n > 0; n-- {
				notify()
			}
		}
	}
}

// session is one connection of a Listener, from its connect to its end.
type session struct {
	pool     *pgxpool.Pool
	stopCtx  context.Context
	stop     context.CancelFunc
	requests chan *request
	// done is closed when the session has ended and its connection is
	// closed; err says why it ended.
	done chan struct{}
	err  error
	// pid is the backend's process id once connected, for tests.
	pid atomic.Uint32

	// Used by the session's goroutine only.
	conn *pgx.Conn
	subs map[string][]*subscription
}

// subscription is one Listen call's channel on a session. It is the
// store.Dozer that Listen hands the relay.
type subscription struct {
	channel string
	sess    *session
	// probe is the payload of the test notification; probed is closed
	// when the session sees it.
	probe  string
	probed chan struct{}
	// signal says that pending notifications wait for Listen's notify.
	signal  chan struct{}
	mu      sync.Mutex
	pending int
	// gone is closed when the Listen call returns.
	gone chan struct{}
	// the statements, for this channel
	markSQL, unmarkSQL, barrierSQL string
	// pool runs the barrier of a relay already marked dozing (Doze).
	pool *pgxpool.Pool

	// Used by the session's goroutine only: subscribed, probed.
	joined, active bool
	// marked: holding the doze mark; written by the session's goroutine
	// only, read by Doze.
	marked atomic.Bool
}

// post counts one notification for Listen's notify.
func (sub *subscription) post() {
	sub.mu.Lock()
	sub.pending++
	sub.mu.Unlock()
	select {
	case sub.signal <- struct{}{}:
	default:
	}
}

// take returns the count of notifications posted since it last ran.
func (sub *subscription) take() int {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	n := sub.pending
	sub.pending = 0
	return n
}

type requestKind int

const (
	reqSubscribe requestKind = iota
	reqUnsubscribe
	reqDoze
	reqWake
)

// request asks the session's goroutine, which owns the connection, to run
// statements for a subscription.
type request struct {
	kind requestKind
	sub  *subscription
	// ctx is the caller's, for doze and wake: the statements run without
	// its cancellation, bounded by dozeTimeout.
	ctx   context.Context
	reply chan reply
}

type reply struct {
	ready bool
	err   error
}

func startSession(pool *pgxpool.Pool) *session {
	s := &session{
		pool: pool, requests: make(chan *request), done: make(chan struct{}),
		subs: map[string][]*subscription{},
	}
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	go s.run()
	return s
}

func (s *session) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// call hands req to the session's goroutine and waits for its answer. ctx
// bounds the hand-over only: once the goroutine has the request, its
// statements run (bounded by their own timeouts) and call waits for them,
// so that a subscription is never left behind unknown to its Listen.
func (s *session) call(ctx context.Context, req *request) (bool, error) {
	req.reply = make(chan reply, 1)
	select {
	case s.requests <- req:
	case <-s.done:
		return false, s.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.ready, r.err
	case <-s.done:
		return false, s.err
	}
}

// run connects, serves, and closes the connection.
func (s *session) run() {
	defer close(s.done)
	connectCtx, cancel := context.WithTimeout(s.stopCtx, listenSetupTimeout)
	conn, err := pgx.ConnectConfig(connectCtx, s.pool.Config().ConnConfig.Copy())
	cancel()
	if err != nil {
		if s.stopCtx.Err() != nil {
			s.err = errListenerClosed
		} else {
			s.err = fmt.Errorf("postgres: listen: connect: %w", err)
		}
		return
	}
	s.conn = conn
	s.pid.Store(conn.PgConn().PID())
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), dozeTimeout)
		_ = conn.Close(closeCtx)
		cancel()
	}()
	s.err = s.serve()
}

// serve waits for notifications on the connection, hands them to the
// subscriptions of their channel, and runs the requests of the
// subscriptions, until the Listener closes or the connection fails.
func (s *session) serve() error {
	conn := s.conn
	for {
		waitCtx, stopWaiting := context.WithCancel(s.stopCtx)
		var req *request
		interrupted := make(chan struct{})
		go func() {
			defer close(interrupted)
			select {
			case r := <-s.requests:
				req = r
				stopWaiting()
			case <-waitCtx.Done():
			}
		}()
		n, err := conn.WaitForNotification(waitCtx)
		stopWaiting()
		<-interrupted
		if s.stopCtx.Err() != nil {
			if req != nil {
				req.reply <- reply{err: errListenerClosed}
			}
			return errListenerClosed
		}
		switch {
		case err == nil:
			s.dispatch(n)
		case req == nil:
			return fmt.Errorf("postgres: listen: %w", err)
		}
		if req != nil {
			// A request cut the wait short; a notification that arrived
			// meanwhile is kept by pgx for the next wait.
			r := s.handle(req)
			req.reply <- r
			if r.err != nil && (conn.IsClosed() || req.kind == reqUnsubscribe) {
				// An UNLISTEN or unmark that failed would leave producers
				// notifying for nobody: end the connection instead.
				return fmt.Errorf("postgres: listen: %w", r.err)
			}
		}
	}
}

// dispatch hands a notification to the subscriptions of its channel. A
// subscription sees none before its own test notification; test
// notifications wake nobody.
func (s *session) dispatch(n *pgconn.Notification) {
	for _, sub := range s.subs[n.Channel] {
		switch {
		case !sub.active:
			if n.Payload == sub.probe {
				sub.active = true
				close(sub.probed)
			}
		case !strings.HasPrefix(n.Payload, probePrefix):
			sub.post()
		}
	}
}

// handle runs one request's statements, each bounded by its timeout and
// not by the caller's context (a statement cut short closes the
// connection).
func (s *session) handle(req *request) reply {
	sub := req.sub
	switch req.kind {
	case reqSubscribe:
		if len(s.subs[sub.channel]) == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), listenSetupTimeout)
			_, err := s.conn.Exec(ctx, "listen "+pgx.Identifier{sub.channel}.Sanitize())
			cancel()
			if err != nil {
				return reply{err: fmt.Errorf("postgres: listen: %w", err)}
			}
		}
		s.subs[sub.channel] = append(s.subs[sub.channel], sub)
		sub.joined = true
		return reply{}
	case reqUnsubscribe:
		return reply{err: s.unsubscribe(sub)}
	}
	if !sub.joined {
		return reply{err: errListenerGone}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.ctx), dozeTimeout)
	defer cancel()
	var r reply
	if req.kind == reqWake {
		r.err = sub.unmark(ctx, s.conn)
	} else {
		r.ready, r.err = sub.doze(ctx, s.conn)
	}
	return r
}

// unsubscribe ends sub's doze and, when it was the channel's last
// subscription, listens on the channel no more.
func (s *session) unsubscribe(sub *subscription) error {
	if !sub.joined {
		return nil
	}
	sub.joined = false
	ctx, cancel := context.WithTimeout(context.Background(), dozeTimeout)
	err := sub.unmark(ctx, s.conn)
	cancel()
	if err != nil {
		return err
	}
	subs := slices.DeleteFunc(s.subs[sub.channel], func(o *subscription) bool { return o == sub })
	if len(subs) > 0 {
		s.subs[sub.channel] = subs
		return nil
	}
	delete(s.subs, sub.channel)
	ctx, cancel = context.WithTimeout(context.Background(), listenSetupTimeout)
	defer cancel()
	if _, err := s.conn.Exec(ctx, "unlisten "+pgx.Identifier{sub.channel}.Sanitize()); err != nil {
		return fmt.Errorf("postgres: unlisten: %w", err)
	}
	return nil
}
