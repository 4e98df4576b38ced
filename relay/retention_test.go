package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// cardNumber is in every kept event's payload: no log line may show it.
const cardNumber = "4111111111111111"

// keptDone writes n delivered events kept in the outbox, processed at
// processed, as plain SQL, and returns their ids.
func keptDone(t *testing.T, s *postgres.Driver, n int, processed time.Time) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = postbox.NewID()
		q := "insert into " + s.Schema() + ".outbox_events (id, event_type, payload, status, processed_at) values ($1, 'order.paid', $2, 'done', $3)"
		payload := fmt.Sprintf(`{"card": %q, "n": %d}`, cardNumber, i)
		if _, err := s.Pool().Exec(context.Background(), q, ids[i], payload, processed); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// archive is a relay.Config.Archive that records what it is handed, and
// fails with fail when set.
type archive struct {
	t    *testing.T
	s    store.Outbox
	fail error

	mu     sync.Mutex
	calls  int
	handed map[uuid.UUID]int
	// left is, for each call, how long its ctx had left (0: no deadline).
	left []time.Duration
}

func (a *archive) keep(ctx context.Context, events []store.HistoryEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	var left time.Duration
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	a.left = append(a.left, left)
	if a.fail != nil {
		return a.fail
	}
	for _, ev := range events {
		a.handed[ev.ID]++
		// Handed before it is gone.
		if r, err := a.s.Get(ctx, ev.ID); err != nil || r.Status != store.StatusDone {
			a.t.Errorf("event %s handed to the archive: %+v, %v; want still in the outbox, done", ev.ID, r, err)
		}
		if !strings.Contains(string(ev.Payload), cardNumber) {
			a.t.Errorf("event %s handed with payload %s, want the whole event", ev.ID, ev.Payload)
		}
	}
	return nil
}

func (a *archive) counts() (calls int, handed map[uuid.UUID]int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	handed = map[uuid.UUID]int{}
	for id, n := range a.handed {
		handed[id] = n
	}
	return a.calls, handed
}

// With a Retention and an Archive, the delivered events older than the
// retention are handed to the archive, each once, while still in the
// outbox, and deleted after; younger ones stay and are not handed.
func TestRetentionArchivesBeforeDeleting(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	old := keptDone(t, s, 5, time.Now().Add(-2*time.Hour))
	young := keptDone(t, s, 2, time.Now())
	a := &archive{t: t, s: s, handed: map[uuid.UUID]int{}}
	rcv := receiver.New(t, secret, nil)
	_, stop := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), PollInterval: 20 * time.Millisecond,
		Retention: time.Hour, Archive: a.keep})
	defer stop()
	waitFor(t, "the old events deleted", 10*time.Second, func() bool { return stats(t, s).Done == int64(len(young)) })
	stop()
	_, handed := a.counts()
	for _, id := range old {
		if handed[id] != 1 {
			t.Errorf("old event %s handed to the archive %d times, want once", id, handed[id])
		}
		if _, err := s.Get(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("old event %s: %v, want deleted", id, err)
		}
	}
	for _, id := range young {
		if handed[id] != 0 {
			t.Errorf("young event %s handed to the archive, want kept in the outbox only", id)
		}
	}
}

// A retention step that hands events to the archive gets as long as the
// archive may take to write an object to object storage (its own bounds:
// a minute per small call, ten per object), not the few seconds of a
// store call: a slow bucket is not cut short mid-object.
func TestRetentionGivesArchiveTime(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	keptDone(t, s, 2, time.Now().Add(-2*time.Hour))
	a := &archive{t: t, s: s, handed: map[uuid.UUID]int{}}
	rcv := receiver.New(t, secret, nil)
	_, stop := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), PollInterval: 20 * time.Millisecond,
		Retention: time.Hour, Archive: a.keep})
	defer stop()
	waitFor(t, "the old events deleted", 10*time.Second, func() bool { return stats(t, s).Done == 0 })
	stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.left) == 0 {
		t.Fatal("the archive was never called")
	}
	for i, left := range a.left {
		if left == 0 || left < 5*time.Minute || left > 10*time.Minute {
			t.Errorf("archive call %d: its context had %v left, want a deadline of up to 10 minutes (more than 5 left)", i, left)
		}
	}
}

// An archive that fails leaves every delivered event in the outbox, and
// each failure is logged once, without what the events hold.
func TestRetentionArchiveFailureDeletesNothing(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	old := keptDone(t, s, 3, time.Now().Add(-2*time.Hour))
	a := &archive{t: t, s: s, fail: errors.New("archive: put events/2026/12/02/07/x.ndjson.gz: bucket unreachable"), handed: map[uuid.UUID]int{}}
	logs := newCapture()
	rcv := receiver.New(t, secret, nil)
	_, stop := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), PollInterval: 20 * time.Millisecond,
		Retention: time.Hour, Archive: a.keep, Logger: logs.logger()})
	defer stop()
	waitFor(t, "the failure logged", 10*time.Second, func() bool { return len(logs.matching("retention failed")) > 0 })
	stop()
	calls, handed := a.counts()
	failed := logs.matching("retention failed")
	if calls == 0 || len(failed) != calls || len(handed) != 0 {
		t.Errorf("archive called %d times (handed %d events), %d failures logged: want each failure logged once", calls, len(handed), len(failed))
	}
	for _, r := range failed {
		if !strings.Contains(r.attrs["error"], "bucket unreachable") {
			t.Errorf("logged %q, want the archive's error", r.attrs["error"])
		}
	}
	for _, r := range logs.all() {
		if strings.Contains(fmt.Sprint(r.msg, r.attrs), cardNumber) {
			t.Errorf("a log line shows an event's payload: %s %v", r.msg, r.attrs)
		}
	}
	for _, id := range old {
		if r, err := s.Get(context.Background(), id); err != nil || r.Status != store.StatusDone {
			t.Errorf("event %s after the archive failed: %+v, %v; want kept, done", id, r, err)
		}
	}
}

// An Archive needs a positive Retention: without one delivered events
// are deleted when delivered (zero) or never (negative).
func TestArchiveNeedsRetention(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, nil)
	keep := func(context.Context, []store.HistoryEvent) error { return nil }
	for _, retention := range []time.Duration{0, -1} {
		_, err := relay.New(relay.Config{Store: s, Sink: newSink(t, rcv.URL, time.Second), Retention: retention, Archive: keep})
		if err == nil || !strings.Contains(err.Error(), "Retention") {
			t.Errorf("relay.New with an Archive and Retention %v: %v, want refused naming Retention", retention, err)
		}
	}
	if _, err := relay.New(relay.Config{Store: s, Sink: newSink(t, rcv.URL, time.Second), Retention: time.Hour, Archive: keep}); err != nil {
		t.Errorf("relay.New with an Archive and a Retention: %v", err)
	}
}
