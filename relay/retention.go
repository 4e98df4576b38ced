package relay

import (
	"context"
	"time"
)

// purgeDelivered deletes delivered events older than the retention, and
// the dedup keys whose hold (DedupWindow) has ended, in batches: at start,
// then once a minute. Without a positive Retention it deletes no event:
// delivered rows in the table are another relay's kept history (or this
// one's, kept for ever).
func (r *Relay) purgeDelivered(ctx context.Context) {
	const batch = 1000
	for first := true; first || sleep(ctx, time.Minute); first = false {
		var before time.Time // before every event
		if r.cfg.Retention > 0 {
			before = time.Now().Add(-r.cfg.Retention)
		}
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
