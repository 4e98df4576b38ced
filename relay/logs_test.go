package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// logLineMax bounds what one logged field may take: the relay's cap (200
// bytes) and its "… (N bytes)" marker.
const logLineMax = 200 + len("… (1000000 bytes)")

// Producers and receivers write what the relay logs of an event: its type,
// its aggregate, the receiver's answer. A 100,000-byte aggregate id, escape
// sequences in the type and a receiver's error full of control characters
// are logged capped, with the control characters escaped, whatever the
// handler does with them.
func TestLoggedFieldsAreCappedAndEscaped(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	logs := newCapture()
	e := postbox.Event{
		ID: postbox.NewID(), AggregateType: "order\x1b]0;owned\x07", AggregateID: strings.Repeat("4", 100_000),
		EventType: "order.created\x1b[2J\r\nlevel=INFO msg=fake", Payload: []byte(`{}`),
	}
	answer := "bad request: " + strings.Repeat("\x1b[31mred\r", 500)
	fake := &scriptedSink{publish: func(context.Context, *sink.Message) error {
		return &sink.Error{Kind: sink.Permanent, Err: errors.New(answer)}
	}}
	start(t, relay.Config{Store: s, Sink: fake, Logger: logs.logger(), PollInterval: 20 * time.Millisecond})
	if err := s.Enqueue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the event failed", 10*time.Second, func() bool { return record(t, s, e.ID).Status == store.StatusFailed })
	failed := logs.matching("failed permanently")
	if len(failed) != 1 {
		t.Fatalf("%d records of the failure, want 1", len(failed))
	}
	for _, key := range []string{"event_type", "aggregate_type", "aggregate_id", "error"} {
		v, ok := failed[0].attrs[key]
		if !ok {
			t.Fatalf("the failure's record has no %s: %v", key, failed[0].attrs)
		}
		if len(v) > logLineMax {
			t.Errorf("%s logged with %d bytes, want at most %d", key, len(v), logLineMax)
		}
		if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
			t.Errorf("%s logged with the control character %q: %q", key, v[i], v[:min(len(v), 300)])
		}
	}
	if got, want := failed[0].attrs["aggregate_id"], "… (100000 bytes)"; !strings.HasSuffix(got, want) {
		t.Errorf("aggregate_id logged as %q (%d bytes), want it to end with %q", got[:min(len(got), 300)], len(got), want)
	}
	if got, want := failed[0].attrs["event_type"], `order.created\x1b[2J\r\nlevel=INFO msg=fake`; got != want {
		t.Errorf("event_type logged as %q, want %q", got, want)
	}
	for _, r := range logs.all() {
		for k, v := range r.attrs {
			if len(v) > logLineMax || strings.IndexFunc(v, unicode.IsControl) >= 0 {
				t.Errorf("%q logged %s = %q (%d bytes)", r.msg, k, v[:min(len(v), 300)], len(v))
			}
		}
		if len(r.msg) > 1000 || strings.IndexFunc(r.msg, unicode.IsControl) >= 0 {
			t.Errorf("message %q (%d bytes)", r.msg[:min(len(r.msg), 300)], len(r.msg))
		}
	}
}
