package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
)

// Observers tells every observer everything, nil ones left out: two
// recorders behind it see the same claims and attempts as the relay's
// Stats, and the same outage.
func TestObserversTellEachObserver(t *testing.T) {
	t.Parallel()
	if relay.Observers() != nil || relay.Observers(nil, nil) != nil {
		t.Fatal("Observers of none is not nil")
	}
	one := &recorder{}
	if relay.Observers(nil, one) != relay.Observer(one) {
		t.Fatal("Observers of one is not that one")
	}
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, nil)
	ep := newSwitchedEndpoint(t, rcv)
	a, b := &recorder{}, &recorder{}
	r := newRelay(t, relay.Config{Store: s, Sink: newSink(t, ep.url(), 2*time.Second), Observer: relay.Observers(a, nil, b),
		ProbeInterval: 20 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	relaytest.Run(t, r)
	for i := range 10 {
		if err := s.Enqueue(context.Background(), ev(fmt.Sprint(i), 0)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "10 deliveries", 10*time.Second, func() bool { return r.Stats().Delivered == 10 })
	ep.down()
	if err := s.Enqueue(context.Background(), ev("x", 0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the outage", 10*time.Second, func() bool { return !r.SinkAvailable() })
	ep.up()
	waitFor(t, "the sink back", 10*time.Second, r.SinkAvailable)
	waitFor(t, "11 deliveries", 10*time.Second, func() bool { return r.Stats().Delivered == 11 })
	for name, rec := range map[string]*recorder{"first": a, "second": b} {
		got := rec.snapshot()
		if n := got.count(relay.OutcomeDelivered); n != 11 {
			t.Errorf("%s observer saw %d deliveries, want 11", name, n)
		}
		if fmt.Sprint(got.sinkStates) != "[false true]" || got.probes < 1 || got.claimed < 11 {
			t.Errorf("%s observer saw sink states %v, %d probes, %d claimed", name, got.sinkStates, got.probes, got.claimed)
		}
	}
}
