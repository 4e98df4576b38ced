package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/store"
)

// errClosed is returned by Listen when the store is closed.
var errClosed = errors.New("mysql: listen: store closed")

// The wake-up poll's pace: pollFast while events keep arriving, then
// slower and slower, up to pollIdle.
const (
	pollFast = 5 * time.Millisecond
	pollIdle = 250 * time.Millisecond
)

// listeningChannel is what Listen reports it listens on.
const listeningChannel = "poll of the outbox's newest seq (every 5ms to 250ms), and the in-process signal of this store's writes"

// Listen calls notify whenever new events may be available, until ctx is
// done (it then returns nil) or the store is closed. MySQL has no
// LISTEN/NOTIFY: Listen polls the newest seq of the outbox (newest_seq,
// read from the end of the primary key alone), every 5 ms while it keeps
// changing, backing off to every 250 ms when nothing arrives, and notifies
// when it changed; Enqueue, and Notify, wake it at once. ready is called
// once the first poll has answered, before any notify; its Dozer is nil.
// Wake-ups are coalesced. A failing poll is retried at the idle pace; the
// relay polls the outbox on its own meanwhile.
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
	last, err := d.newestSeq(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("mysql: listen: the poll of the outbox's newest seq failed (run postbox migrate if the table is missing): %w", err)
	}
	ready(store.Listening{Channel: listeningChannel})
	every := pollIdle
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.closed:
			return errClosed
		case <-ch:
			notify()
			every = pollFast
		case <-timer.C:
			seq, err := d.newestSeq(ctx)
			switch {
			case err != nil:
				every = pollIdle
			case seq != last:
				last = seq
				notify()
				every = pollFast
			default:
				every = min(every*2, pollIdle)
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(every)
	}
}

// newestSeq reads the newest event's seq (0 when the outbox is empty).
func (d *Driver) newestSeq(ctx context.Context) (int64, error) {
	var seq int64
	err := d.queryRow(ctx, d.db, "newest_seq").Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

// Notify wakes the store's listeners. Enqueue and Requeue call it after
// their commits; call it after committing events written with EnqueueTx or
// plain SQL to wake this process's relays before their next poll.
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
