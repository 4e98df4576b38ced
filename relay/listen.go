package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/store"
)

// listenRetryMax caps the wait between attempts to listen again.
const listenRetryMax = 30 * time.Second

// listen wakes the claim loop on every notification, and tries again with
// backoff when the store cannot listen for now (the claim loop polls
// meanwhile). It logs how the relay finds events: listening on a channel,
// or polling, and why.
func (r *Relay) listen(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		ready := func(l store.Listening) {
			if failures > 0 {
				r.log.Info("listening again for new events", "channel", l.Channel)
			} else {
				r.log.Info(fmt.Sprintf("listening for new events on %s; polling every %s as well", l.Channel, r.cfg.PollInterval))
			}
			failures = 0
			r.finding.Store(&finding{listening: true, channel: l.Channel})
			if l.Dozer != nil {
				r.dozer.Store(&l.Dozer)
			}
			r.notify() // events may have come while not listening
		}
		err := r.cfg.Store.Listen(ctx, ready, r.notify)
		r.dozer.Store(nil)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the store stopped listening")
		}
		r.finding.Store(&finding{pollingReason: err.Error()})
		if errors.Is(err, store.ErrCannotListen) {
			r.log.Warn(fmt.Sprintf("polling every %s: %s", r.cfg.PollInterval, logError(err)))
			return
		}
		failures++
		delay := backoff(failures, 100*time.Millisecond, listenRetryMax)
		if failures == 1 || failures%10 == 0 {
			r.log.Warn(fmt.Sprintf("polling every %s until listening works: %s", r.cfg.PollInterval, logError(err)),
				"failures", failures, "retry_in", delay)
		}
		sleep(ctx, delay)
	}
}
