package relay

import "time"

// Deadlines of the relay's store calls. On a connection whose peer vanished
// (a half-open link) a statement waits until its deadline, so the deadlines
// bound how long such a fault stalls the relay.
const (
	// storeCallTimeout bounds each store call whose result does not expire
	// with a lease (the checks at start, a purge), so that a connection
	// that hangs does not hold the relay up; it is also the ceiling of
	// leasedCallTimeout.
	storeCallTimeout = 10 * time.Second
	// expireArchiveTimeout bounds a retention step (Store.Expire) that
	// hands events to Config.Archive: it writes to object storage, whose
	// calls the archive bounds itself (archive.Archive: a minute per
	// small call, ten per object), so the step gets as long as writing an
	// object may take. Without an archive a step is bounded by
	// storeCallTimeout.
	expireArchiveTimeout = 10 * time.Minute
	// minLeasedCallTimeout is the floor of leasedCallTimeout: with a very
	// short lease, a loaded database still gets that long.
	minLeasedCallTimeout = time.Second
)

// leasedCallTimeout bounds a store call whose work is moot once a lease
// has run out: a claim (its events are leased from the claim's start, so a
// claim that outlasts the lease returns expired events), the recording of
// outcomes (retried until it succeeds, or the leases expire and the events
// are delivered again), a reclaim (repeated twice per lease). It is the
// lease, within minLeasedCallTimeout and storeCallTimeout.
func leasedCallTimeout(lease time.Duration) time.Duration {
	return min(max(lease, minLeasedCallTimeout), storeCallTimeout)
}
