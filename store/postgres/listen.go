package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/store"
)

// The advisory-lock classes of dozing relays: the first key of two-key
// advisory locks whose second key is hashtext of the store's channel. They
// are written here only: queries and migrations name them {doze_lock} and
// {doze_barrier_lock}, which expand fills in. Migration 0004 (the trigger
// producers run, migrations/0004_notify_dozing_relays.sql) explains the
// protocol.
const (
	// dozeLock is held shared, at session level, by each dozing relay on
	// its listening connection: producers notify while some relay holds it.
	dozeLock = 2029
	// dozeBarrierLock is held shared by each committing producer from the
	// moment it looks for dozing relays until its commit ends; a relay
	// about to doze tries it exclusively.
	dozeBarrierLock = 2030
)

// The statements of dozing relays.
const (
	// dozeMarkSQL marks this connection's relay as dozing: producers notify.
	dozeMarkSQL = "select pg_try_advisory_lock_shared({doze_lock}, hashtext('{channel}'))"
	// dozeUnmarkSQL ends the doze: producers stop notifying for this relay.
	dozeUnmarkSQL = "select pg_advisory_unlock_shared({doze_lock}, hashtext('{channel}'))"
	// dozeBarrierSQL succeeds when no producer that looked for dozing
	// relays before the mark is still committing.
	dozeBarrierSQL = "select pg_try_advisory_xact_lock({doze_barrier_lock}, hashtext('{channel}'))"
)

// errListenerGone is returned by a Dozer whose connection is closed.
var errListenerGone = errors.New("postgres: the listening connection is closed")

// dozeTimeout bounds one doze or wake statement. They run to their end even
// when the relay stops meanwhile, so that the connection stays usable. They
// are single non-blocking advisory-lock calls, and the relay's claims wait
// for a wake: on a dead connection (a half-open link), a longer deadline
// held the relay's deliveries that much longer after the fault ended.
const dozeTimeout = 2 * time.Second

// probeTimeout bounds the wait for the notification Listen sends itself.
const probeTimeout = 3 * time.Second

// listenSetupTimeout bounds connecting the listening connection, its
// LISTEN, and sending the test notification.
const listenSetupTimeout = 10 * time.Second

// ErrNotificationsLost is wrapped by Listen's error when the notification it
// sent itself did not arrive: LISTEN was accepted but nothing is delivered
// to this connection, as behind a connection pooler in transaction mode.
var ErrNotificationsLost = errors.New("postgres: notifications do not reach the listening connection")

// Listen holds one dedicated connection (outside the pool) on LISTEN and
// calls notify for every notification of new events. Before it calls ready
// it sends a notification through the pool and waits for it on the listening
// connection, so that a pooler in transaction mode, which accepts LISTEN but
// never delivers, is found at once: Listen then returns an error wrapping
// ErrNotificationsLost and store.ErrCannotListen, and the relay polls for
// good and says why (run it with DisableListen to say so yourself, or
// connect it around the pooler).
//
// The relay tells producers when it waits through the store.Dozer it
// receives (see store.Listening): producers notify only while it dozes, so
// a relay busy claiming costs their commits nothing. The connection starts
// awake (producers do not notify it).
func (d *Driver) Listen(ctx context.Context, ready func(store.Listening), notify func()) error {
	setupCtx, cancelSetup := context.WithTimeout(ctx, listenSetupTimeout)
	defer cancelSetup()
	conn, err := pgx.ConnectConfig(setupCtx, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("postgres: listen: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(setupCtx, "listen "+pgx.Identifier{d.channel}.Sanitize()); err != nil {
		return fmt.Errorf("postgres: listen: %w", err)
	}
	if err := d.probe(ctx, conn); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	l := &listener{
		conn: conn, requests: make(chan dozeRequest), gone: make(chan struct{}),
		markSQL: d.expand(dozeMarkSQL), unmarkSQL: d.expand(dozeUnmarkSQL), barrierSQL: d.expand(dozeBarrierSQL),
	}
	defer close(l.gone)
	ready(store.Listening{Channel: d.channel, Dozer: l})
	return l.serve(ctx, notify)
}

// probe sends a notification through the pool and waits for it on conn.
// Notifications of events that arrive meanwhile need no call of notify: the
// relay claims once it is ready anyway.
func (s *Store) probe(ctx context.Context, conn *pgx.Conn) error {
	payload := "postbox-probe-" + uuid.NewString()
	sendCtx, cancel := context.WithTimeout(ctx, listenSetupTimeout)
	_, err := s.pool.Exec(sendCtx, "select pg_notify($1, $2)", s.channel, payload)
	cancel()
	if err != nil {
		return fmt.Errorf("postgres: listen: send a test notification: %w", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(waitCtx)
		switch {
		case err != nil && ctx.Err() == nil && waitCtx.Err() != nil:
			return fmt.Errorf("%w: %w: a test notification on channel %s did not arrive within %s (a connection pooler in transaction mode?)",
				store.ErrCannotListen, ErrNotificationsLost, s.channel, probeTimeout)
		case err != nil:
			return fmt.Errorf("postgres: listen: %w", err)
		case n.Payload == payload:
			return nil
		}
	}
}

// dozeRequest asks the Listen goroutine, which owns the connection, to doze
// or wake.
type dozeRequest struct {
	ctx   context.Context
	wake  bool
	reply chan dozeReply
}

type dozeReply struct {
	ready bool
	err   error
}

// serve waits for notifications on the connection and runs the doze and
// wake requests of the relay, until ctx is done or the connection fails.
func (l *listener) serve(ctx context.Context, notify func()) error {
	conn := l.conn
	for {
		waitCtx, stopWaiting := context.WithCancel(ctx)
		var req *dozeRequest
		interrupted := make(chan struct{})
		go func() {
			defer close(interrupted)
			select {
			case r := <-l.requests:
				req = &r
				stopWaiting()
			case <-waitCtx.Done():
			}
		}()
		_, err := conn.WaitForNotification(waitCtx)
		stopWaiting()
		<-interrupted
		if ctx.Err() != nil {
			if req != nil {
				req.reply <- dozeReply{err: ctx.Err()}
			}
			return nil
		}
		switch {
		case err == nil:
			notify()
		case req == nil:
			return fmt.Errorf("postgres: listen: %w", err)
		}
		if req != nil {
			// A request cut the wait short; a notification that arrived
			// meanwhile is kept by pgx for the next wait.
			var r dozeReply
			dctx, cancel := context.WithTimeout(context.WithoutCancel(req.ctx), dozeTimeout)
			if req.wake {
				r.err = l.unmark(dctx)
			} else {
				r.ready, r.err = l.doze(dctx)
			}
			cancel()
			req.reply <- r
			if r.err != nil && conn.IsClosed() {
				return fmt.Errorf("postgres: listen: %w", r.err)
			}
		}
	}
}

// listener is the state of one listening connection; only its Listen
// goroutine uses the connection. It is the store.Dozer the relay receives.
type listener struct {
	conn     *pgx.Conn
	requests chan dozeRequest
	gone     chan struct{}
	marked   bool
	// the statements, for this store's channel
	markSQL, unmarkSQL, barrierSQL string
}

// Doze marks the relay dozing (see store.Dozer).
func (l *listener) Doze(ctx context.Context) (bool, error) {
	return l.ask(ctx, false)
}

// Wake ends the doze (see store.Dozer).
func (l *listener) Wake(ctx context.Context) error {
	_, err := l.ask(ctx, true)
	return err
}

// ask hands a request to the Listen goroutine and waits for its answer.
func (l *listener) ask(ctx context.Context, wake bool) (bool, error) {
	req := dozeRequest{ctx: ctx, wake: wake, reply: make(chan dozeReply, 1)}
	select {
	case l.requests <- req:
	case <-l.gone:
		return false, errListenerGone
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.ready, r.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// doze marks the connection dozing (once) and tries the producers' lock.
func (l *listener) doze(ctx context.Context) (bool, error) {
	if !l.marked {
		var ok bool
		if err := l.conn.QueryRow(ctx, l.markSQL).Scan(&ok); err != nil {
			return false, fmt.Errorf("postgres: doze: %w", err)
		}
		if !ok {
			return false, nil // a producer is looking at this moment
		}
		l.marked = true
	}
	var clear bool
	if err := l.conn.QueryRow(ctx, l.barrierSQL).Scan(&clear); err != nil {
		return false, fmt.Errorf("postgres: doze: %w", err)
	}
	return clear, nil
}

func (l *listener) unmark(ctx context.Context) error {
	if !l.marked {
		return nil
	}
	if _, err := l.conn.Exec(ctx, l.unmarkSQL); err != nil {
		return fmt.Errorf("postgres: wake: %w", err)
	}
	l.marked = false
	return nil
}
