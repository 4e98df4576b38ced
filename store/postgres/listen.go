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

// probePrefix begins the payload of the test notification Listen sends
// itself: such a notification wakes nobody.
const probePrefix = "postbox-probe-"

// Listen holds one dedicated connection (outside the pool) on LISTEN and
// calls notify for every notification of new events. Before it calls ready
// it sends a notification through the pool and waits for it on the listening
// connection, so that a pooler in transaction mode, which accepts LISTEN but
// never delivers, is found at once: Listen then returns an error wrapping
// ErrNotificationsLost and store.ErrCannotListen, and the relay polls for
// good and says why (run it with DisableListen to say so yourself, or
// connect it around the pooler).
//
// With Config.Listener the connection is that Listener's, shared with the
// stores of other schemas on the same pool: Listen subscribes the store's
// channel there, and UNLISTENs it (and ends its doze) when ctx ends. When
// the shared connection fails, the Listen of every store on it returns the
// error; the next Listen connects again. Without it, Listen opens a
// connection of its own and closes it when it returns.
//
// The relay tells producers when it waits through the store.Dozer it
// receives (see store.Listening): producers notify only while it dozes, so
// a relay busy claiming costs their commits nothing. The connection starts
// awake (producers do not notify it).
func (d *Driver) Listen(ctx context.Context, ready func(store.Listening), notify func()) error {
	if d.listener != nil {
		return d.listener.listen(ctx, d.Store, ready, notify)
	}
	l := NewListener(d.pool)
	l.private = true
	defer l.Close()
	return l.listen(ctx, d.Store, ready, notify)
}

// probe sends a notification through the pool and waits until sub's
// session has seen it. Notifications of events that arrive meanwhile need
// no call of notify: the relay claims once it is ready anyway.
func (s *Store) probe(ctx context.Context, sub *subscription) error {
	sendCtx, cancel := context.WithTimeout(ctx, listenSetupTimeout)
	_, err := s.pool.Exec(sendCtx, "select pg_notify($1, $2)", s.channel, sub.probe)
	cancel()
	if err != nil {
		return fmt.Errorf("postgres: listen: send a test notification: %w", err)
	}
	timer := time.NewTimer(probeTimeout)
	defer timer.Stop()
	select {
	case <-sub.probed:
		return nil
	case <-timer.C:
		return fmt.Errorf("%w: %w: a test notification on channel %s did not arrive within %s (a connection pooler in transaction mode?)",
			store.ErrCannotListen, ErrNotificationsLost, s.channel, probeTimeout)
	case <-sub.sess.done:
		return sub.sess.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newSubscription is the subscription of s's channel on sess.
func (s *Store) newSubscription(sess *session) *subscription {
	return &subscription{
		channel: s.channel, sess: sess,
		probe:  probePrefix + uuid.NewString(),
		probed: make(chan struct{}), signal: make(chan struct{}, 1), gone: make(chan struct{}),
		markSQL: s.expand(dozeMarkSQL), unmarkSQL: s.expand(dozeUnmarkSQL), barrierSQL: s.expand(dozeBarrierSQL),
		pool: s.pool,
	}
}

// Doze marks the relay dozing (see store.Dozer). Once marked, a relay
// dozes again (after each event of a trickle) by trying the barrier alone,
// a transaction lock that any connection may try: on a connection of the
// pool, without a turn on the listening connection, which the relays of
// every schema of a database share (Listener).
func (sub *subscription) Doze(ctx context.Context) (bool, error) {
	if !sub.marked.Load() {
		return sub.ask(ctx, reqDoze)
	}
	select {
	case <-sub.gone:
		return false, errListenerGone
	case <-sub.sess.done:
		return false, errListenerGone
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, dozeTimeout)
	defer cancel()
	return sub.barrier(ctx, sub.pool)
}

// Wake ends the doze (see store.Dozer).
func (sub *subscription) Wake(ctx context.Context) error {
	_, err := sub.ask(ctx, reqWake)
	return err
}

// ask hands a doze or wake request to the session's goroutine and waits for
// its answer.
func (sub *subscription) ask(ctx context.Context, kind requestKind) (bool, error) {
	req := &request{kind: kind, sub: sub, ctx: ctx, reply: make(chan reply, 1)}
	select {
	case sub.sess.requests <- req:
	case <-sub.gone:
		return false, errListenerGone
	case <-sub.sess.done:
		return false, errListenerGone
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.ready, r.err
	case <-sub.sess.done:
		return false, errListenerGone
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// doze marks the subscription dozing (once) and tries the producers' lock.
// Each dozing subscription of a channel holds the shared mark once (advisory
// locks count their holds per session): the channel stays marked while any
// of them dozes.
func (sub *subscription) doze(ctx context.Context, conn *pgx.Conn) (bool, error) {
	if !sub.marked.Load() {
		var ok bool
		if err := conn.QueryRow(ctx, sub.markSQL).Scan(&ok); err != nil {
			return false, fmt.Errorf("postgres: doze: %w", err)
		}
		if !ok {
			return false, nil // a producer is looking at this moment
		}
		sub.marked.Store(true)
	}
	return sub.barrier(ctx, conn)
}

// barrier tries the producers' barrier (dozeBarrierSQL) on q: true when no
// producer that looked for dozing relays before the mark is committing.
func (sub *subscription) barrier(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, error) {
	var clear bool
	if err := q.QueryRow(ctx, sub.barrierSQL).Scan(&clear); err != nil {
		return false, fmt.Errorf("postgres: doze: %w", err)
	}
	return clear, nil
}

func (sub *subscription) unmark(ctx context.Context, conn *pgx.Conn) error {
	if !sub.marked.Load() {
		return nil
	}
	if _, err := conn.Exec(ctx, sub.unmarkSQL); err != nil {
		return fmt.Errorf("postgres: wake: %w", err)
	}
	sub.marked.Store(false)
	return nil
}
