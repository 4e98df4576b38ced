package demo

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/postbox-go/postbox/sink"
)

// errInjected is the handler failure the demo injects.
var errInjected = errors.New("injected handler failure")

// fault is one kind of injected failure of a delivery.
type fault int

const (
	noFault          fault = iota
	faultServerError       // the receiver answers 503 before processing
	faultHandler           // the handler fails after the inbox insert
	faultDropBefore        // the connection drops before processing
	faultDropAfter         // the connection drops after the event was applied
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

// pick chooses the fault of one delivery: none with probability 1-rate,
// otherwise one of the four kinds.
func (f *faults) pick() fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rnd.Float64() >= f.rate {
		return noFault
	}
	return fault(1 + f.rnd.IntN(4))
}

type faultKey struct{}

// handlerFault reports whether the handler of this request must fail.
func handlerFault(ctx context.Context) bool {
	v, _ := ctx.Value(faultKey{}).(fault)
	return v == faultHandler
}

// middleware injects the receiver's faults in front of the inbox handler.
func (f *faults) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch kind := f.pick(); kind {
		case faultServerError:
			http.Error(w, "injected failure", http.StatusServiceUnavailable)
		case faultDropBefore:
			dropConnection(w)
		case faultDropAfter:
			// Apply the event, then lose the answer: the sender retries
			// and the inbox must absorb the duplicate.
			next.ServeHTTP(httptest.NewRecorder(), r)
			dropConnection(w)
		default:
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), faultKey{}, kind)))
		}
	})
}

func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
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
