package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Retention.
const (
	// RetentionKeepDefault is how long done rows are kept: 7 days, well
	// beyond a postbox relay's default retry schedule (25 attempts, backoff
	// up to 10 minutes: a few hours), with room for an event to wait in
	// the sender's dead-letter state for a few days before it is retried.
	RetentionKeepDefault = 7 * 24 * time.Hour
	// RetentionEveryDefault is the time between the starts of two passes:
	// an hour.
	RetentionEveryDefault = time.Hour
	// RetentionBatchDefault is the most rows one delete statement removes.
	RetentionBatchDefault = 1000
)

// Retention configures RunRetention. The zero value of every field means
// its default.
type Retention struct {
	// Keep is how long a done row is kept after it was processed (default
	// RetentionKeepDefault, 7 days). The inbox recognises a duplicate only
	// while its row exists, so keep rows longer than any sender may deliver
	// an event again: its whole retry schedule, plus the longest time an
	// event may wait in its dead-letter state before someone retries it.
	// Within that window every duplicate is caught; after it, a late
	// duplicate would be applied again (an ordered event is still refused
	// by its aggregate's sequence, see DeleteProcessedBefore).
	Keep time.Duration

	// Every is the time from the start of one pass to the start of the
	// next (default RetentionEveryDefault, an hour). The first pass runs
	// at once.
	Every time.Duration

	// Batch is the most rows one delete statement removes (default
	// RetentionBatchDefault, 1000); a pass deletes batch after batch until
	// one deletes fewer. Smaller batches hold locks for shorter times.
	Batch int

	// Logger receives a line per pass that deleted rows (Info), per pass
	// that found none (Debug) and per failure (Error). Default
	// slog.Default().
	Logger *slog.Logger
}

// withDefaults returns cfg with its defaults filled in, or an error naming
// the field that is wrong.
func (cfg Retention) withDefaults() (Retention, error) {
	switch {
	case cfg.Keep < 0:
		return cfg, fmt.Errorf("inbox: Retention.Keep %v is negative", cfg.Keep)
	case cfg.Every < 0:
		return cfg, fmt.Errorf("inbox: Retention.Every %v is negative", cfg.Every)
	case cfg.Batch < 0:
		return cfg, fmt.Errorf("inbox: Retention.Batch %d is negative", cfg.Batch)
	}
	if cfg.Keep == 0 {
		cfg.Keep = RetentionKeepDefault
	}
	if cfg.Every == 0 {
		cfg.Every = RetentionEveryDefault
	}
	if cfg.Batch == 0 {
		cfg.Batch = RetentionBatchDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

// RunRetention deletes done rows older than cfg.Keep, at once and then
// every cfg.Every, until ctx ends; then it returns nil. Run it in a
// goroutine of the consumer service:
//
//	go ib.RunRetention(ctx, inbox.Retention{Keep: 14 * 24 * time.Hour})
//
// Each pass calls DeleteProcessedBefore, batch after batch, until a batch
// deletes fewer than cfg.Batch rows. Failed and pending rows are kept,
// rejected events included. A failed pass is logged and never ends the
// run: the next pass tries again. Several instances of a service may each
// run it; passes at once only share the work.
//
// It returns an error, at once, only for an invalid cfg.
func (ib *Inbox[TTx]) RunRetention(ctx context.Context, cfg Retention) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	tick := time.NewTicker(cfg.Every)
	defer tick.Stop()
	for {
		ib.retentionPass(ctx, cfg)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// retentionPass deletes the done rows processed before now - cfg.Keep, in
// batches, and logs what it did.
func (ib *Inbox[TTx]) retentionPass(ctx context.Context, cfg Retention) {
	before := time.Now().Add(-cfg.Keep)
	deleted, batches := 0, 0
	for ctx.Err() == nil {
		n, err := ib.DeleteProcessedBefore(ctx, before, cfg.Batch)
		deleted += n
		batches++
		if err != nil {
			if ctx.Err() != nil {
				break // stopping: not a failure
			}
			cfg.Logger.LogAttrs(ctx, slog.LevelError, "inbox retention: pass failed; the next pass tries again",
				slog.Int("deleted", deleted), slog.Duration("next_in", cfg.Every), slog.Any("error", err))
			return
		}
		if n < cfg.Batch {
			break
		}
	}
	level, msg := slog.LevelInfo, "inbox retention: deleted done rows"
	if deleted == 0 {
		level, msg = slog.LevelDebug, "inbox retention: nothing to delete"
	}
	cfg.Logger.LogAttrs(ctx, level, msg,
		slog.Int("deleted", deleted), slog.Int("batches", batches), slog.Time("processed_before", before))
}
