package relaytest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink/webhook"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func webhookSink(t *testing.T, url string) *webhook.Sink {
	t.Helper()
	s, err := webhook.New(webhook.Config{URL: url, Secrets: []string{secret}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A started relay delivers; the end of its test stops it, and Run has
// returned by the time the test's cleanups are done.
func TestStartRunsUntilTheTestEnds(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	rcv := receiver.New(t, secret, nil)
	var r *relaytest.Running
	t.Run("relay", func(t *testing.T) {
		r = relaytest.Start(t, relay.Config{Store: s.Driver(), Sink: webhookSink(t, rcv.URL)})
		if err := s.Enqueue(context.Background(), postbox.Event{EventType: "order.created", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		rcv.WaitAccepted(t, 1, 10*time.Second)
	})
	if got := r.Stats().PollingReason; got != "the relay is not running" {
		t.Fatalf("after its test, the relay's PollingReason is %q: it still runs", got)
	}
	r.Stop() // again: returns at once
}

// An error from Run fails the test as soon as Run returns it, while the
// test goes on waiting.
func TestRunErrorFailsTheTestAtOnce(t *testing.T) {
	t.Parallel()
	// An ordered relay on an outbox without the index of ordered claims
	// does not start.
	s := pgtest.Store(t)
	rt := &recordingT{TB: t}
	relaytest.Start(rt, relay.Config{Store: s.Driver(), Sink: webhookSink(t, "http://127.0.0.1:1"), Ordered: true})
	deadline := time.Now().Add(10 * time.Second)
	for len(rt.errors()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := rt.errors(); len(got) != 1 || !strings.Contains(got[0], "relay.Run") {
		t.Fatalf("errors reported: %q, want relay.Run's", got)
	}
}

// recordingT records the errors reported, instead of failing the test.
type recordingT struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingT) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingT) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}
