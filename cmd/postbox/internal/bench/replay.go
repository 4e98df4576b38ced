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
	r.addBy(RelayInProcess, ScenarioReplay, "replay.drain", fmt.Sprintf("relay library, no-op sink, defaults but Retention %s", replayRetention), rate(n, drain), UnitEventsPerSec, nil)
	r.addBy(RelayInProcess, ScenarioReplay, "replay.replay", "replay.Run of the kept events, drained by the same relay settings: start to last delivery", rate(n, d.elapsed), UnitEventsPerSec, nil)
	r.addBy(RelayInProcess, ScenarioReplay, "replay.requeue", "replay.Run alone: its own time, the relay draining", rate(n, out.d), UnitEventsPerSec, nil)
	r.addBy(RelayInProcess, ScenarioReplay, "replay.ratio", "relay library to a no-op sink: replay / drain (the floor: nothing but the database costs, and a replay writes each row once more)", rate(n, d.elapsed)/rate(n, drain), UnitRatio, nil)
	return replayProcess(ctx, e, p, n)
}

// replayProcess is the user's path of the replay scenario: a `postbox
// relay --retention` process drains a backlog of n events as signed
// webhooks to a local receiver, then, with that relay still running, a
// `postbox replay --yes` process replays every event it kept. The drain's
// rate runs from the relay's start until its backlog is delivered and
// settled; the replay's from the start of `postbox replay` until every
// event has arrived again marked as a replay, and is settled. The goal is
// judged here: the same sink, as a user runs it.
func replayProcess(ctx context.Context, e *env, p *progress, n int) (err error) {
	sc, err := e.filled(ctx, p, "replay_process", n)
	if err != nil {
		return err
	}
	rec, err := startReceiver(0)
	if err != nil {
		return err
	}
	defer rec.close()
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() { err = relayExit(parent, ctx, err) }()

	what := fmt.Sprintf("`postbox relay --retention %s`", replayRetention)
	start := time.Now()
	rp, err := e.startRelayProcess(ctx, p, append(relayArgs(sc, rec.url, 0), "--retention", replayRetention.String()), cancel)
	if err != nil {
		return err
	}
	defer func() { _, _ = rp.stop() }()
	drained, err := waitDrained(ctx, p, what, sc.outbox(), rec.distinct, n, start)
	if err != nil {
		return err
	}
	p.printf("%s delivered %d events as signed webhooks in %s: %.0f events/s", what, n, drained.elapsed.Round(time.Millisecond), rate(n, drained.elapsed))
	if err := sc.prepare(ctx); err != nil {
		return fmt.Errorf("prepare %s: %w", sc.name(), err)
	}

	start = time.Now()
	cmd := e.cfg.Command(ctx, append([]string{"replay"}, append(sc.relayFlags(), "--yes", "--name", replayName)...)...)
	cmd.Env = relayEnv(cmd.Environ())
	cmd.Stderr = p
	replayed := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start `postbox replay`: %w", err)
	}
	go func() {
		err := cmd.Wait()
		if err != nil {
			cancel(fmt.Errorf("`postbox replay` failed: %s; its log is above", exitText(err)))
		}
		replayed <- err
	}()
	again, err := waitDrained(ctx, p, "`postbox replay --yes`", sc.outbox(), rec.replays, n, start)
	if err != nil {
		return err
	}
	if err := <-replayed; err != nil {
		return fmt.Errorf("`postbox replay`: %s", exitText(err))
	}
	if _, err := rp.stop(); err != nil {
		return err
	}
	if err := e.release(ctx, sc); err != nil {
		return err
	}
	p.printf("`postbox replay --yes` had every event delivered again, marked as a replay, in %s: %.0f events/s", again.elapsed.Round(time.Millisecond), rate(n, again.elapsed))

	r := e.rep
	r.addBy(RelayProcess, ScenarioReplay, "replay.process_drain", what+", signed webhooks to a local receiver: start to the last delivery settled", rate(n, drained.elapsed), UnitEventsPerSec, nil)
	r.addBy(RelayProcess, ScenarioReplay, "replay.process_replay", "`postbox replay --yes` while that relay runs: start to the last replay delivered and settled", rate(n, again.elapsed), UnitEventsPerSec, nil)
	r.addBy(RelayProcess, ScenarioReplay, "replay.process_ratio", "the user's path: replay / drain, same relay, same sink", rate(n, again.elapsed)/rate(n, drained.elapsed), UnitRatio, atLeast(replayRatioGoal))
	return nil
}
