package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/replay"
)

// Replay's goal and settings.
const (
	// replayRatioGoal: a replay runs at 0.8 of the drain rate of the same
	// sink, at least.
	replayRatioGoal = 0.8
	// replayRetention is the relays' Retention in replay: the delivered
	// events are kept, marked done, for the replay to find.
	replayRetention = 7 * 24 * time.Hour
	// replayName is the replay's name: the value of its header.
	replayName = "postbox-bench"
)

// runReplay drains a backlog to a no-op sink with the relay library in
// process (defaults, but for a Retention that keeps the delivered events),
// vacuums the outbox, then replays every event it kept with replay.Run
// (from the table, default batches) while a fresh relay of the same
// settings drains the replays to a fresh no-op sink. The replay's rate
// runs from the start of replay.Run until every replay is delivered and
// settled; the drain's from the relay's start until its backlog is. Every
// event must reach the second sink once, marked as a replay.
func runReplay(ctx context.Context, e *env, p *progress) error {
	n := e.cfg.ReplayEvents
	sc, err := e.filled(ctx, p, "replay", n)
	if err != nil {
		return err
	}
	outbox := sc.outbox()
	first := &noopSink{}
	drain, err := libraryDrain(ctx, p, "the relay library, delivered events kept", outbox,
		relay.Config{Sink: first, Retention: replayRetention}, first.n.Load, n)
	if err != nil {
		return err
	}
	p.printf("the relay library drained %d events in %s: %.0f events/s", n, drain.Round(time.Millisecond), rate(n, drain))
	stats, err := outbox.Stats(ctx)
	if err != nil {
		return err
	}
	if stats.Done != int64(n) {
		return fmt.Errorf("%d events kept delivered after the drain, want %d", stats.Done, n)
	}
	if err := sc.prepare(ctx); err != nil {
		return fmt.Errorf("prepare %s: %w", sc.name(), err)
	}

	again := &noopSink{}
	start := time.Now()
	rl, err := startLibraryRelay(ctx, p, relay.Config{Store: outbox, Sink: again, Retention: replayRetention})
	if err != nil {
		return err
	}
	type outcome struct {
		pr  replay.Progress
		d   time.Duration
		err error
	}
	replayed := make(chan outcome, 1)
	replayCtx, stopReplay := context.WithCancel(ctx)
	defer stopReplay()
	// A replay that fails stops the wait for its deliveries at once.
	waitCtx, stopWait := context.WithCancel(ctx)
	defer stopWait()
	go func() {
		pr, err := replay.Run(replayCtx, replay.Config{Outbox: outbox}, replay.Params{Table: true, Name: replayName})
		if err != nil {
			stopWait()
		}
		replayed <- outcome{pr, time.Since(start), err}
	}()
	d, err := waitDrained(waitCtx, p, "the replay", outbox, again.n.Load, n, start)
	if err != nil {
		stopReplay()
	}
	out := <-replayed
	if cerr := rl.close(); err == nil {
		err = cerr
	}
	switch {
	case out.err != nil:
		return fmt.Errorf("replay: %w", out.err)
	case err != nil:
		return err
	case out.pr.Requeued != n:
		return fmt.Errorf("replay: %+v: want %d events requeued", out.pr, n)
	case again.n.Load() != int64(n) || again.replays.Load() != int64(n):
		return fmt.Errorf("the replay published %d messages, %d of them marked as replays: want %d, all marked", again.n.Load(), again.replays.Load(), n)
	}
	if err := e.release(ctx, sc); err != nil {
		return err
	}
	p.printf("replayed %d events in %s (replay.Run took %s): %.0f events/s", n, d.elapsed.Round(time.Millisecond), out.d.Round(time.Millisecond), rate(n, d.elapsed))

	r := e.rep
	r.add(ScenarioReplay, "replay.drain", fmt.Sprintf("relay library, no-op sink, defaults but Retention %s", replayRetention), rate(n, drain), UnitEventsPerSec, nil)
	r.add(ScenarioReplay, "replay.replay", "replay.Run of the kept events, drained by the same relay settings: start to last delivery", rate(n, d.elapsed), UnitEventsPerSec, nil)
	r.add(ScenarioReplay, "replay.requeue", "replay.Run alone: its own time, the relay draining", rate(n, out.d), UnitEventsPerSec, nil)
	r.add(ScenarioReplay, "replay.ratio", "replay / drain", rate(n, d.elapsed)/rate(n, drain), UnitRatio, atLeast(replayRatioGoal))
	return nil
}
