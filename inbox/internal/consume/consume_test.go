package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/inbox"
)

func process(context.Context, *inbox.Event) (inbox.Outcome, error) { return inbox.Processed, nil }

func TestCheckDefaults(t *testing.T) {
	s, err := Settings{Process: process}.Check("inbox/test")
	if err != nil {
		t.Fatal(err)
	}
	if s.Concurrency != ConcurrencyDefault || s.ShutdownTimeout != ShutdownTimeoutDefault || s.Logger == nil ||
		s.RedeliveryMin != inbox.RedeliveryMinDefault || s.RedeliveryMax != inbox.RedeliveryMaxDefault {
		t.Errorf("defaults: %+v", s)
	}
	// A RedeliveryMin above the default maximum raises the maximum with it.
	s, err = Settings{Process: process, RedeliveryMin: time.Hour}.Check("inbox/test")
	if err != nil || s.RedeliveryMax != time.Hour {
		t.Errorf("RedeliveryMin 1h alone: max %v, %v; want 1h", s.RedeliveryMax, err)
	}
	_, err = Settings{Process: process, RedeliveryMin: time.Hour, RedeliveryMax: time.Minute}.Check("inbox/test")
	if err == nil || !strings.HasPrefix(err.Error(), "inbox/test: Config.RedeliveryMin") {
		t.Errorf("RedeliveryMin above RedeliveryMax: %v", err)
	}
}

func TestVerdictLogs(t *testing.T) {
	var b strings.Builder
	s, err := Settings{Process: process, RedeliveryMin: time.Second, RedeliveryMax: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&b, nil))}.Check("inbox/test")
	if err != nil {
		t.Fatal(err)
	}
	ev := &inbox.Event{ID: uuid.New(), EventType: "order.created"}
	where := slog.String("queue", "q")
	for _, c := range []struct {
		err     error
		verdict inbox.Verdict
		line    string // "" for none
	}{
		{nil, inbox.Ack, ""},
		{fmt.Errorf("wrapped: %w", inbox.ErrDuplicate), inbox.Ack, ""},
		{inbox.Reject(errors.New("no")), inbox.Discard, "level=WARN msg=\"inbox/test: discarding a message that can never be processed\" queue=q delivery=3 event_id=" + ev.ID.String()},
		{errors.New("boom"), inbox.Redeliver, "level=WARN msg=\"inbox/test: processing failed; the message will be delivered again\" queue=q delivery=3"},
		{&inbox.OrderError{Err: inbox.ErrOutOfOrder}, inbox.Redeliver, "level=INFO msg=\"inbox/test: processing failed"},
		{context.Canceled, inbox.Redeliver, "level=INFO"},
	} {
		b.Reset()
		verdict, delay := s.Verdict(ev, c.err, 3, where)
		if verdict != c.verdict {
			t.Errorf("%v: verdict %v, want %v", c.err, verdict, c.verdict)
		}
		if verdict == inbox.Redeliver && (delay < time.Second || delay > 4*time.Second) {
			t.Errorf("%v: delay %v at the third delivery, want within 1s and 4s", c.err, delay)
		}
		if got := b.String(); c.line == "" && got != "" || !strings.Contains(got, c.line) {
			t.Errorf("%v: logged %q, want %q", c.err, got, c.line)
		}
	}
}
