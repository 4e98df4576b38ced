package demo

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/service"
	"github.com/postbox-go/postbox/store"
)

// errCrashed is what a crashed relay's database calls return.
var errCrashed = errors.New("relay crashed")

// crashable is the outbox as one relay instance sees it: after crash, every
// call that writes fails, as if the relay's process had died. Its claims
// stay leased until the lease expires and another relay reclaims them.
type crashable struct {
	store.Outbox
	crashed atomic.Bool
}

func (c *crashable) check() error {
	if c.crashed.Load() {
		return errCrashed
	}
	return nil
}

func (c *crashable) Claim(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return c.Outbox.Claim(ctx, p)
}

func (c *crashable) Settle(ctx context.Context, p store.SettleParams) error {
	if err := c.check(); err != nil {
		return err
	}
	return c.Outbox.Settle(ctx, p)
}

func (c *crashable) ExtendLease(ctx context.Context, owner string, ids []uuid.UUID, lease time.Duration) ([]uuid.UUID, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return c.Outbox.ExtendLease(ctx, owner, ids, lease)
}

func (c *crashable) ReclaimExpired(ctx context.Context, p store.ReclaimParams) ([]store.Reclaimed, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return c.Outbox.ReclaimExpired(ctx, p)
}

func (c *crashable) Expire(ctx context.Context, p store.ExpireParams) (store.ExpireResult, error) {
	if err := c.check(); err != nil {
		return store.ExpireResult{}, err
	}
	return c.Outbox.Expire(ctx, p)
}

func (c *crashable) Release(ctx context.Context, owner string, ids []uuid.UUID) error {
	if err := c.check(); err != nil {
		return err
	}
	return c.Outbox.Release(ctx, owner, ids)
}

// relayRunner runs the demo's relay and crashes it once.
type relayRunner struct {
	backend *backend
	sink    *countingSink

	mu      sync.Mutex
	current *crashable
	cancel  context.CancelFunc
	// stopped is closed when the current relay's Run returns.
	stopped chan struct{}
}

func (r *relayRunner) start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &crashable{Outbox: r.backend.outbox}
	rl, err := service.NewRelay(ctx, service.RelayConfig{Outbox: st, Sink: r.sink, Relay: relayConfig()})
	if err != nil {
		panic(err) // the demo's own configuration is valid
	}
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	r.current, r.cancel, r.stopped = st, cancel, stopped
	go func() {
		defer close(stopped)
		_ = rl.Run(runCtx)
	}()
}

// crashAndRestart kills the running relay without letting it settle or
// release anything, and starts a new one at once. The crashed relay is not
// waited for, as a killed process is not: its calls fail from now on, and
// its goroutines end on their own within seconds (the relay's last attempt
// to record outcomes).
func (r *relayRunner) crashAndRestart(ctx context.Context) {
	r.mu.Lock()
	r.current.crashed.Store(true)
	r.cancel()
	r.mu.Unlock()
	r.start(ctx)
}

// stop stops the running relay gracefully and waits for it.
func (r *relayRunner) stop() {
	r.mu.Lock()
	r.cancel()
	stopped := r.stopped
	r.mu.Unlock()
	<-stopped
}
