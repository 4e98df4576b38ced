package relay

import (
	"math/rand/v2"
	"time"
)

// backoff is the delay before the attempt after attempt: a uniform choice
// ("full jitter") between lo and lo·2^attempt, capped at hi, so retries of
// many events spread out instead of arriving together.
func backoff(attempt int, lo, hi time.Duration) time.Duration {
	ceiling := hi
	if attempt < 40 && lo > 0 && lo<<attempt > 0 && lo<<attempt < hi {
		ceiling = lo << attempt
	}
	if ceiling <= lo {
		return lo
	}
	return lo + rand.N(ceiling-lo+1)
}

// retryAfterDelay honours a destination's Retry-After within [lo, hi].
func retryAfterDelay(wish, lo, hi time.Duration) time.Duration {
	return min(max(wish, lo), hi)
}
