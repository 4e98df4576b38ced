package relay

import (
	"context"
	"time"
)

// purgeDelivered deletes delivered events older than the retention, and
// the dedup keys whose hold (DedupWindow) has ended, in batches: at start,
// then once a minute.
func (r *Relay) purgeDelivered(ctx context.Context) {
	const batch = 1000
	for first := true; first || sleep(ctx, time.Minute); first = false {
		before := time.Now().Add(-r.cfg.Retention)
		for ctx.Err() == nil {
			callCtx, cancel := context.WithTimeout(ctx, storeCallTimeout)
			n, err := r.cfg.Store.PurgeDone(callCtx, before, batch)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					r.log.Error("purging delivered events failed", "error", logError(err))
				}
				break
			}
			if n < batch {
				break
			}
		}
	}
}
