// Package relaytest runs a relay for a test: Start builds one from a
// relay.Config and runs it in a goroutine until the test ends, when it is
// stopped and waited for, so that no relay outlives its test (and its
// schema); an error from Run fails the test.
//
// It knows the relay only through relay.Config: the store is any
// store.Source (an outbox, an endpoint's lane), the sink any sink.Sink.
package relaytest

import (
	"context"
	"testing"

	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
)

// Running is a relay that runs until its test ends or Stop is called. The
// relay is embedded: its Stats, Ready, SinkAvailable and Offer are the
// running relay's.
type Running struct {
	*relay.Relay
	cancel context.CancelFunc
	// done is closed when Run returned.
	done chan struct{}
}

// New returns a relay built from cfg, not running, failing t if cfg is
// refused. A nil cfg.Logger drops the relay's logs (testlog.Discard)
// rather than writing them to slog.Default, as relay.New would.
func New(t testing.TB, cfg relay.Config) *relay.Relay {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testlog.Discard()
	}
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatalf("relaytest: relay.New: %v", err)
	}
	return r
}

// Start builds a relay from cfg (as New does) and runs it until t ends or
// Stop is called.
func Start(t testing.TB, cfg relay.Config) *Running {
	t.Helper()
	return Run(t, New(t, cfg))
}

// Run runs r until t ends or Stop is called: for a relay the test uses
// before it runs (an Offer refused while it does not). An error from Run
// (a relay that cannot start) fails t as soon as Run returns it, not at
// the end of a test that would wait for deliveries until its timeout.
func Run(t testing.TB, r *relay.Relay) *Running {
	ctx, cancel := context.WithCancel(context.Background())
	running := &Running{Relay: r, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(running.done)
		if err := r.Run(ctx); err != nil {
			t.Errorf("relaytest: relay.Run: %v", err)
		}
	}()
	t.Cleanup(running.Stop)
	return running
}

// Stop cancels the relay's run and waits for Run to return, after its
// graceful shutdown (relay.Config.ShutdownTimeout). Stopping again, or at
// the test's end, only waits for that return. It may be called from any
// goroutine.
func (r *Running) Stop() {
	r.cancel()
	<-r.done
}
