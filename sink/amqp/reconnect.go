package amqp

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

var errSinkClosed = errors.New("the sink is closed")

// supervise watches sess until its connection or one of its channels
// closes, then reconnects with backoff, until Close. Publishes fail at once
// while it reconnects.
func (k *Sink) supervise(sess *session) {
	defer close(k.stopped)
	// ctx ends on Close, so that a dial in progress gives up.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-k.stop
		cancel()
	}()
	for {
		reason := k.watch(sess)
		k.setDown(reason)
		sess.close()
		if errors.Is(reason, errSinkClosed) {
			return
		}
		k.s.Logger.Warn("rabbitmq connection lost; publishes fail until it is back", "sink", k.String(), "error", reason)
		lostAt := time.Now()
		for attempt := 1; ; attempt++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(k.reconnectDelay(attempt)):
			}
			next, err := k.connect(ctx)
			if err == nil {
				sess = next
				break
			}
			if ctx.Err() != nil {
				return
			}
			k.setDown(err)
			k.s.Logger.Warn("rabbitmq: reconnecting failed", "sink", k.String(), "attempt", attempt, "error", err)
		}
		k.setUp(sess.pubs)
		k.s.Logger.Info("rabbitmq connection is back", "sink", k.String(), "down_for", time.Since(lostAt).Round(time.Millisecond))
	}
}

// watch returns why sess ended: its connection or one of its channels
// closed, or the sink was closed. It logs the server's flow control on
// the way.
func (k *Sink) watch(sess *session) error {
	for {
		select {
		case <-k.stop:
			return errSinkClosed
		case e, ok := <-sess.closed:
			if !ok || e == nil {
				return errors.New("the connection closed")
			}
			return e
		case err := <-sess.lost:
			return err
		case b, ok := <-sess.blocked:
			if !ok {
				sess.blocked = nil
				continue
			}
			k.blocked.Store(b.Active)
			if b.Active {
				k.s.Logger.Warn("rabbitmq blocks publishing (a resource alarm on the server); publishes fail until it lifts", "sink", k.String(), "reason", b.Reason)
			} else {
				k.s.Logger.Info("rabbitmq unblocked publishing", "sink", k.String())
			}
		}
	}
}

// setDown makes publishes fail at once, saying why.
func (k *Sink) setDown(reason error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pubs, k.down = nil, reason
	k.blocked.Store(false)
}

// setUp makes publishes use pubs.
func (k *Sink) setUp(pubs []*publisher) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pubs, k.down = pubs, nil
}

// reconnectDelay is the wait before reconnection attempt n (from 1):
// ReconnectMin doubled each attempt up to ReconnectMax, less up to a fifth
// at random so that many relays do not reconnect in step.
func (k *Sink) reconnectDelay(n int) time.Duration {
	d := k.s.ReconnectMin
	for i := 1; i < n && d < k.s.ReconnectMax; i++ {
		d *= 2
	}
	d = min(d, k.s.ReconnectMax)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}
