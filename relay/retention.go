package relay

import (
	"context"
	"time"

	"github.com/postbox-go/postbox/store"
)

// expireDelivered is retention: at start, then once a minute, it calls
// the store's Expire until it has no more to do, removing delivered events
// older than the Retention (each handed to the Archive first, when set),
// the dedup keys whose hold (DedupWindow) has ended and, on a partitioned
// outbox, dropping old partitions and creating the next ones. Without a
// positive Retention it removes no event: delivered rows in the table are
// another relay's kept history (or this one's, kept for ever). Each step
// is bounded by storeCallTimeout, or by expireArchiveTimeout when it
// writes to an archive.
func (r *Relay) expireDelivered(ctx context.Context) {
	const batch = 1000
	timeout := storeCallTimeout
	if r.cfg.Archive != nil {
		timeout = expireArchiveTimeout
	}
	for first := true; first || sleep(ctx, time.Minute); first = false {
		p := store.ExpireParams{Limit: batch, Keep: r.cfg.Archive}
		if r.cfg.Retention > 0 {
			p.Before = time.Now().Add(-r.cfg.Retention)
		}
		for ctx.Err() == nil {
			callCtx, cancel := context.WithTimeout(ctx, timeout)
			res, err := r.cfg.Store.Expire(callCtx, p)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					r.log.Error("retention failed", "error", logError(err))
				}
				break
			}
			for _, name := range res.Created {
				r.log.Info("partition created", "partition", name)
			}
			for _, name := range res.Dropped {
				r.log.Info("partition dropped", "partition", name, "archived", p.Keep != nil)
			}
			if !res.More {
				break
			}
		}
	}
}
