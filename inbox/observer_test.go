package inbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// handlings is an Observer that keeps every Handling.
type handlings struct {
	mu   sync.Mutex
	seen []inbox.Handling
}

func (o *handlings) Handled(h inbox.Handling) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, h)
}

// The observer sees every call of Process with its result: processed,
// duplicate, failed (a handler error; the retry is processed), rejected
// (a Reject, an invalid event), and whether and how long the handler ran.
func TestObserverSeesEveryResult(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	obs := &handlings{}
	ib := inbox.New(s.Driver(), inbox.WithObserver(obs))
	ctx := context.Background()
	fail := true
	fn := func(_ context.Context, _ pgx.Tx, ev *inbox.Event) error {
		switch {
		case ev.EventType == "order.bad":
			return inbox.Reject(errors.New("bad order"))
		case ev.EventType == "order.flaky" && fail:
			fail = false
			return errors.New("lock timeout")
		}
		return nil
	}
	event := func(typ string) *inbox.Event {
		return &inbox.Event{ID: postbox.NewID(), EventType: typ, AggregateType: "order", AggregateID: "1", Payload: []byte(`{}`)}
	}
	ok, flaky := event("order.created"), event("order.flaky")
	calls := []struct {
		ev   *inbox.Event
		want inbox.Outcome
		ran  bool
	}{
		{ok, inbox.Processed, true},
		{ok, inbox.Duplicate, false},
		{flaky, inbox.Failed, true},
		{flaky, inbox.Processed, true},
		{event("order.bad"), inbox.Rejected, true},
		{&inbox.Event{EventType: "order.zero-id"}, inbox.Rejected, false},
	}
	for _, c := range calls {
		_, _ = ib.Process(ctx, c.ev, fn)
	}
	if len(obs.seen) != len(calls) {
		t.Fatalf("observed %d calls, want %d", len(obs.seen), len(calls))
	}
	for i, c := range calls {
		h := obs.seen[i]
		if h.Outcome != c.want || h.EventType != c.ev.EventType || h.HandlerRan != c.ran || (h.HandlerDuration > 0) != c.ran {
			t.Errorf("call %d (%s): observed %+v, want result %v, handler ran %v", i, c.ev.EventType, h, c.want, c.ran)
		}
	}
}
