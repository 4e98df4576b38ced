// Package consume is what the inbox's broker consumers (packages
// inbox/nats, inbox/amqp, inbox/kafka) share, so that they are configured,
// decide and log alike: the Config fields they all have, with their checks
// and defaults; how a message is settled after processing and the line
// logged about it; and the context in which the messages in progress at a
// stop may finish.
package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/postbox-go/postbox/inbox"
)

// Defaults of the Settings left zero.
const (
	ConcurrencyDefault     = 16
	ShutdownTimeoutDefault = 10 * time.Second
)

// Settings are the Config fields every broker consumer has, under these
// names; each consumer's Config documents them.
type Settings struct {
	Process                      func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error)
	Concurrency                  int
	RedeliveryMin, RedeliveryMax time.Duration
	ShutdownTimeout              time.Duration
	Logger                       *slog.Logger

	// pkg names the consumer in errors and log lines ("inbox/nats").
	pkg string
}

// Check returns s with the defaults of the fields left zero, or an error
// naming the field that is wrong, prefixed with pkg (the consumer's
// package, "inbox/nats").
func (s Settings) Check(pkg string) (Settings, error) {
	s.pkg = pkg
	switch {
	case s.Process == nil:
		return s, fmt.Errorf("%s: Config.Process is nil", pkg)
	case s.Concurrency < 0:
		return s, fmt.Errorf("%s: Config.Concurrency %d is negative", pkg, s.Concurrency)
	case s.RedeliveryMin < 0:
		return s, fmt.Errorf("%s: Config.RedeliveryMin %v is negative", pkg, s.RedeliveryMin)
	case s.RedeliveryMax < 0:
		return s, fmt.Errorf("%s: Config.RedeliveryMax %v is negative", pkg, s.RedeliveryMax)
	case s.ShutdownTimeout < 0:
		return s, fmt.Errorf("%s: Config.ShutdownTimeout %v is negative", pkg, s.ShutdownTimeout)
	}
	if s.Concurrency == 0 {
		s.Concurrency = ConcurrencyDefault
	}
	if s.RedeliveryMin == 0 {
		s.RedeliveryMin = inbox.RedeliveryMinDefault
	}
	if s.RedeliveryMax == 0 {
		s.RedeliveryMax = max(inbox.RedeliveryMaxDefault, s.RedeliveryMin)
	}
	if s.RedeliveryMin > s.RedeliveryMax {
		return s, fmt.Errorf("%s: Config.RedeliveryMin %v is above RedeliveryMax %v", pkg, s.RedeliveryMin, s.RedeliveryMax)
	}
	if s.ShutdownTimeout == 0 {
		s.ShutdownTimeout = ShutdownTimeoutDefault
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return s, nil
}

// Processing returns the context in which messages are processed: it
// ends ShutdownTimeout after ctx does, so that the messages in progress
// when the consumer is stopped may finish and be settled; past it, their
// processing is cancelled, and rolls back. Call cancel once the consumer
// has stopped.
func (s Settings) Processing(ctx context.Context) (context.Context, context.CancelFunc) {
	processing, cancelProcessing := context.WithCancel(context.WithoutCancel(ctx))
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(s.ShutdownTimeout, cancelProcessing) })
	return processing, func() {
		stopGrace()
		cancelProcessing()
	}
}

// Verdict returns how to settle a message whose decoding or processing
// returned err (inbox.VerdictOf), at its delivery-th delivery (1 for the
// first), and for a redelivery the delay before it (inbox.RedeliveryDelay
// within RedeliveryMin and RedeliveryMax). It logs a discarded message
// (warning) and a failure (warning; information for an event that comes
// early, is claimed elsewhere, or was interrupted by the stop), with ev's
// id and type when it decoded, the error, and where, the attributes that
// place the message in the broker. Payloads are never logged.
func (s Settings) Verdict(ev *inbox.Event, err error, delivery int, where ...slog.Attr) (inbox.Verdict, time.Duration) {
	verdict := inbox.VerdictOf(err)
	if verdict == inbox.Ack {
		return verdict, 0
	}
	attrs := append(slices.Clip(where), slog.Int("delivery", delivery))
	if ev != nil {
		attrs = append(attrs, slog.String("event_id", ev.ID.String()), slog.String("event_type", ev.EventType))
	}
	if verdict == inbox.Discard {
		attrs = append(attrs, slog.Any("error", err))
		s.Logger.LogAttrs(context.Background(), slog.LevelWarn, s.pkg+": discarding a message that can never be processed", attrs...)
		return verdict, 0
	}
	delay := inbox.RedeliveryDelay(delivery, s.RedeliveryMin, s.RedeliveryMax)
	attrs = append(attrs, slog.Duration("delay", delay.Round(time.Millisecond)), slog.Any("error", err))
	level := slog.LevelWarn
	if expected(err) {
		level = slog.LevelInfo
	}
	s.Logger.LogAttrs(context.Background(), level, s.pkg+": processing failed; the message will be delivered again", attrs...)
	return verdict, delay
}

// expected reports whether err is a failure that is no fault (an event
// out of order or claimed by another consumer, processing interrupted by
// the stop), which a later delivery is meant to get past.
func expected(err error) bool {
	return errors.Is(err, inbox.ErrOutOfOrder) || errors.Is(err, inbox.ErrInProgress) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Unsent logs a settlement (what: "ack", "requeue", "commit") that did
// not reach the broker: the broker delivers the message again, and the
// inbox answers it as a duplicate if it was applied.
func (s Settings) Unsent(what string, err error, where ...slog.Attr) {
	attrs := append(slices.Clip(where), slog.Any("error", err))
	s.Logger.LogAttrs(context.Background(), slog.LevelWarn, s.pkg+": "+what+" not sent; the message will be delivered again", attrs...)
}
