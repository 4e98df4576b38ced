package demo

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"

	"github.com/postbox-go/postbox/postboxtest/httpfault"
	"github.com/postbox-go/postbox/sink"
)

// faults injects failures at a rate.
type faults struct {
	rate float64
	mu   sync.Mutex
	rnd  *rand.Rand
}

func newFaults(rate float64) *faults {
	return &faults{rate: rate, rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
}

func (f *faults) hit() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rnd.Float64() < f.rate
}

// receiverFaults are the receiver's faults, picked with equal chance.
var receiverFaults = [...]httpfault.Fault{httpfault.ServerError, httpfault.HandlerFailure, httpfault.DropBefore, httpfault.DropAfter}

// pick chooses the fault of one delivery: none with probability 1-rate,
// otherwise one of receiverFaults.
func (f *faults) pick() httpfault.Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rnd.Float64() >= f.rate {
		return httpfault.None
	}
	return receiverFaults[f.rnd.IntN(len(receiverFaults))]
}

// middleware injects the receiver's faults in front of the inbox handler.
func (f *faults) middleware(next http.Handler) http.Handler {
	return httpfault.Middleware(f.pick, 0, next)
}

// duplicating sends a message a second time at the fault rate, as a network
// that delivers twice would.
func (f *faults) duplicating(next sink.Sink) sink.Sink {
	return sinkFunc(func(ctx context.Context, m *sink.Message) error {
		err := next.Publish(ctx, m)
		if err == nil && f.hit() {
			_ = next.Publish(ctx, m)
		}
		return err
	})
}

type sinkFunc func(ctx context.Context, m *sink.Message) error

func (f sinkFunc) Publish(ctx context.Context, m *sink.Message) error { return f(ctx, m) }

func (f sinkFunc) String() string { return "the demo's fault injector" }

func (f sinkFunc) Destination() sink.Destination {
	return sink.Destination{System: "demo", Name: "fault injector"}
}

// countingSink counts deliveries and failed attempts for the progress line.
type countingSink struct {
	next sink.Sink
	c    *counters
}

func (s *countingSink) Publish(ctx context.Context, m *sink.Message) error {
	err := s.next.Publish(ctx, m)
	if err != nil {
		s.c.retried.Add(1)
	} else {
		s.c.delivered.Add(1)
	}
	return err
}

func (s *countingSink) String() string { return s.next.String() + ", counted for the progress line" }

func (s *countingSink) Destination() sink.Destination { return s.next.Destination() }
