package replay

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/store"
)

// source hands out a reader's events in id order, a batch at a time; an
// empty batch is its end.
type source interface {
	next(ctx context.Context) ([]store.HistoryEvent, error)
}

// tableSource reads the delivered events the outbox keeps, page by page.
type tableSource struct {
	h    store.History
	p    store.HistoryParams
	done bool
}

func (t *tableSource) next(ctx context.Context) ([]store.HistoryEvent, error) {
	if t.done {
		return nil, nil
	}
	events, err := t.h.HistoryRead(ctx, t.p)
	if err != nil {
		return nil, err
	}
	// A short page is the last: no query to learn that the next is empty.
	// The pages' order is checked by stream.head: each event after the
	// one before, so that each page starts after the last.
	t.done = len(events) < t.p.Limit
	if len(events) > 0 {
		t.p.After, t.p.Resume = events[len(events)-1].ID, true // a page may end on the all-zero id
	}
	return events, nil
}

// readFunc is archive.Archive.Read.
type readFunc func(ctx context.Context, p archive.ReadParams, fn func([]store.HistoryEvent) error) error

// archiveSource runs the archive's Read (which calls back with its batches)
// in a goroutine that hands them over one at a time: one batch waits in
// the channel while the merge works on another, so memory stays bounded
// by a few batches.
type archiveSource struct {
	batches chan []store.HistoryEvent
	// result holds Read's error once batches is closed.
	result chan error
	err    error
	ended  bool
	cancel context.CancelFunc
}

func startArchive(ctx context.Context, read readFunc, p archive.ReadParams) *archiveSource {
	ctx, cancel := context.WithCancel(ctx)
	a := &archiveSource{batches: make(chan []store.HistoryEvent), result: make(chan error, 1), cancel: cancel}
	go func() {
		defer close(a.batches)
		a.result <- read(ctx, p, func(events []store.HistoryEvent) error {
			// Handed over as is: Read makes a new slice for each batch.
			select {
			case a.batches <- events:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
	}()
	return a
}

func (a *archiveSource) next(ctx context.Context) ([]store.HistoryEvent, error) {
	for !a.ended {
		select {
		case b, ok := <-a.batches:
			if !ok {
				a.ended, a.err = true, <-a.result
				break
			}
			if len(b) > 0 {
				return b, nil
			}
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	return nil, a.err
}

// stop ends the archive's Read, if it still runs, and waits for its
// goroutine.
func (a *archiveSource) stop() {
	a.cancel()
	for range a.batches {
	}
}

// stream is one source with its current batch: the head of the merge.
type stream struct {
	what string
	src  source
	buf  []store.HistoryEvent
	last uuid.UUID
	seen bool // last is set (the all-zero id is an id too)
	done bool
}

// head returns the stream's next event after after (from the first when
// from is set: the all-zero id is an event's id too), nil at its end.
// Events at or before after are dropped (a resumed run's After); others
// must come in strictly increasing id order.
func (s *stream) head(ctx context.Context, after uuid.UUID, from bool) (*store.HistoryEvent, error) {
	for {
		for !from && len(s.buf) > 0 && !before(after, s.buf[0].ID) {
			s.buf = s.buf[1:]
		}
		if len(s.buf) > 0 || s.done {
			break
		}
		b, err := s.src.next(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the %s: %w", s.what, err)
		}
		if len(b) == 0 {
			s.done = true
			break
		}
		for _, e := range b {
			if s.seen && !before(s.last, e.ID) {
				return nil, fmt.Errorf("read the %s: event %s came after %s: not in id order", s.what, e.ID, s.last)
			}
			s.last, s.seen = e.ID, true
		}
		s.buf = b
	}
	if len(s.buf) == 0 {
		return nil, nil
	}
	return &s.buf[0], nil
}

// merge merges the table's and the archive's streams (either may be nil)
// by id, each id once.
type merge struct {
	table, archive *stream
	// after is the id of the last event handed out (Params.After first);
	// from, that none was and Params.After is zero: from the first.
	after uuid.UUID
	from  bool
}

// batch is what one call of merge.next hands out.
type batch struct {
	events []store.HistoryEvent
	// archived counts the events of events only the archive held, both
	// those both streams held (the table's copy is kept: its row is the
	// one a requeue makes pending again).
	archived, both int
}

// next returns the next at most n events in id order; none at the end.
func (m *merge) next(ctx context.Context, n int) (batch, error) {
	var b batch
	for len(b.events) < n {
		var t, a *store.HistoryEvent
		var err error
		if m.table != nil {
			if t, err = m.table.head(ctx, m.after, m.from); err != nil {
				return b, err
			}
		}
		if m.archive != nil {
			if a, err = m.archive.head(ctx, m.after, m.from); err != nil {
				return b, err
			}
		}
		var e store.HistoryEvent
		switch {
		case t == nil && a == nil:
			return b, nil
		case a == nil || (t != nil && before(t.ID, a.ID)):
			e = *t
		case t == nil || before(a.ID, t.ID):
			e = *a
			b.archived++
		default: // the same event, archived and still kept: once
			e = *t
			b.both++
		}
		b.events = append(b.events, e)
		m.after, m.from = e.ID, false
	}
	return b, nil
}

// ahead reads a merge's batches one ahead of the caller, so that the next
// batch is read while the last one is sent (two round trips of the
// database, or the archive's reads, at once rather than one after the
// other).
type ahead struct {
	batches chan aheadBatch
	cancel  context.CancelFunc
	done    chan struct{}
}

// aheadBatch is one merge.next's result.
type aheadBatch struct {
	b   batch
	err error
}

// readAhead starts reading m's batches of n, until its end, an error, ctx's
// end or stop.
func readAhead(ctx context.Context, m *merge, n int) *ahead {
	ctx, cancel := context.WithCancel(ctx)
	a := &ahead{batches: make(chan aheadBatch), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for {
			b, err := m.next(ctx, n)
			select {
			case a.batches <- aheadBatch{b, err}:
			case <-ctx.Done():
				return
			}
			if err != nil || len(b.events) == 0 {
				return
			}
		}
	}()
	return a
}

// next is the next batch, in order; an empty one at the end.
func (a *ahead) next(ctx context.Context) (batch, error) {
	select {
	case r := <-a.batches:
		return r.b, r.err
	case <-ctx.Done():
		return batch{}, context.Cause(ctx)
	}
}

// stop ends the reading and waits for it: a batch read ahead and not
// taken is dropped (Progress.Last never passed it).
func (a *ahead) stop() {
	a.cancel()
	<-a.done
}
