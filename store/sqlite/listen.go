package sqlite

import (
	"context"
	"errors"

	"github.com/postbox-go/postbox/store"
)

// errClosed is returned by Listen when the store is closed.
var errClosed = errors.New("sqlite: listen: store closed")

// inProcessChannel is what Listen reports it listens on.
const inProcessChannel = "in-process signal of this store's writes"

// Listen calls notify whenever new events may be available: when a
// transaction of this Store that inserted into the outbox commits (Enqueue,
// EnqueueTx, or any INSERT through DB()), and when Notify is called. It
// blocks until ctx is done (returning nil) or the store is closed. ready is
// called once the listener is registered, before any notify; its Dozer is
// nil, since these wake-ups cost producers nothing. Wake-ups are coalesced:
// a burst of commits may produce one notify.
//
// The wake-ups are in-process only. Events written by another process, or
// through another database handle, are found by the relay's poll, unless
// that writer calls Notify.
func (d *Driver) Listen(ctx context.Context, ready func(store.Listening), notify func()) error {
	ch := make(chan struct{}, 1)
	d.listenMu.Lock()
	d.listeners[ch] = struct{}{}
	d.listenMu.Unlock()
	defer func() {
		d.listenMu.Lock()
		delete(d.listeners, ch)
		d.listenMu.Unlock()
	}()
	ready(store.Listening{Channel: inProcessChannel})
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.closed:
			return errClosed
		case <-ch:
			notify()
		}
	}
}

// Notify wakes the store's listeners. Writes through DB() wake them by
// themselves when they commit; call Notify after committing events written
// through another handle on the same file in this process.
func (s *Store) Notify() {
	s.listenMu.RLock()
	defer s.listenMu.RUnlock()
	for ch := range s.listeners {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
