package endpoint

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/postbox-go/postbox/sink"
)

// rateLimited is the sink middleware of an endpoint's rate limit
// (store.Endpoint.RatePerSecond): each publish takes a token of a bucket
// first, waiting for one while the endpoint's rate is reached.
type rateLimited struct {
	next   sink.Sink
	bucket *tokenBucket
}

func (r *rateLimited) Publish(ctx context.Context, m *sink.Message) error {
	if err := r.bucket.wait(ctx); err != nil {
		return fmt.Errorf("endpoint: waiting for the endpoint's rate limit: %w", err)
	}
	return r.next.Publish(ctx, m)
}

func (r *rateLimited) String() string {
	return fmt.Sprintf("%s, at most %g deliveries/s", r.next.String(), r.bucket.rate)
}

func (r *rateLimited) Destination() sink.Destination { return r.next.Destination() }

// tokenBucket limits the deliveries started per second: it holds up to
// burst tokens, refilled at rate per second; each start takes one.
type tokenBucket struct {
	rate  float64
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newTokenBucket(rate float64) *tokenBucket {
	burst := math.Max(1, math.Ceil(rate))
	return &tokenBucket{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

// wait takes a token, waiting for one if none is left, or returns ctx's
// cause once it ends.
func (b *tokenBucket) wait(ctx context.Context) error {
	for {
		b.mu.Lock()
		now := time.Now()
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
		if b.tokens >= 1 {
			b.tokens--
			b.mu.Unlock()
			return nil
		}
		need := time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
		b.mu.Unlock()
		t := time.NewTimer(need)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}
