package relay

import "time"

// claimSize is the most events the claim loop asks for: Config.BatchSize
// at first, halved after each claim that timed out (down to one event),
// doubled back after each claim that the limit bounded and that returned
// well within its deadline. A claim that times out may well have taken
// its events all the same (they come back when their lease expires, one
// attempt counted): asking for the same number again would time out again,
// and again, with every one of them (64 events of 12 MB, claimed 64 at a
// time, were never delivered).
type claimSize struct {
	limit, most int
}

func newClaimSize(most int) claimSize { return claimSize{limit: most, most: most} }

// timedOut halves the limit after a claim that timed out, and reports
// whether it did (it is one event already otherwise).
func (c *claimSize) timedOut() bool {
	if c.limit <= 1 {
		return false
	}
	c.limit = max(1, c.limit/2)
	return true
}

// succeeded grows the limit back after a claim of asked events (the
// limit, or fewer when fewer slots were free) that returned full, in took
// of its deadline timeout: twice as many would still take well under the
// deadline.
func (c *claimSize) succeeded(asked int, full bool, took, timeout time.Duration) {
	if asked == c.limit && full && took < timeout/4 {
		c.limit = min(c.most, c.limit*2)
	}
}
