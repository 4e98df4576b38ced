package endpoint

import (
	"context"
	"math"
	"sync"
	"time"
)

// tokenBucket limits the deliveries started per second: it holds up to
// burst tokens, refilled at rate per second; each start takes one.
type tokenBucket struct {
	rate  float64 // 0: no limit
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newTokenBucket(rate float64) *tokenBucket {
	burst := math.Max(1, math.Ceil(rate))
	return &tokenBucket{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

// available is how many starts may go at once now (at least 1: the
// caller waits for the rest).
func (b *tokenBucket) available() int {
	if b.rate <= 0 {
		return math.MaxInt32
	}
	return int(b.burst)
}

// wait takes a token, waiting for one if none is left.
func (b *tokenBucket) wait(ctx context.Context) error {
	if b.rate <= 0 {
		return nil
	}
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
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(need):
		}
	}
}
