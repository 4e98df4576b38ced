package relay

import (
	"context"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
)

// The doze protocol's transitions, step by step, on a PostgreSQL listening
// connection; a producer committing is a transaction that holds the
// producers' lock (migration 0004).
func TestDozeStateTransitions(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	dozers := make(chan store.Dozer, 1)
	listened := make(chan error, 1)
	go func() {
		listened <- s.Driver().Listen(ctx, func(l store.Listening) { dozers <- l.Dozer }, func() {})
	}()
	t.Cleanup(func() { cancel(); <-listened })
	var dozer store.Dozer
	select {
	case dozer = <-dozers:
	case err := <-listened:
		t.Fatalf("listen: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the store to listen")
	}

	var d doze
	d.follow(&dozer)
	check := func(step string, state dozeState, notify bool) {
		t.Helper()
		if d.state != state || d.producersNotify() != notify {
			t.Fatalf("%s: state %d (producers notify: %v), want %d (%v)", step, d.state, d.producersNotify(), state, notify)
		}
	}
	empty := func(step string, want afterEmpty) {
		t.Helper()
		if got := d.afterEmptyClaim(ctx); got != want {
			t.Fatalf("%s: next %d, want %d", step, got, want)
		}
	}
	check("a new listening connection", awake, false)

	empty("an empty claim", claimOnceMore)
	check("a doze with no producer committing", dozingConfirmed, true)
	empty("the claim after the doze finds nothing", waitForWakeUp)
	check("after waiting", dozing, true)

	d.foundEvents(ctx, 1)
	check("one event", dozing, true)
	d.foundEvents(ctx, 1)
	check("a second claim with events in a row", awakeInFlow, false)
	d.foundEvents(ctx, 1)
	check("events keep coming", awakeInFlow, false)
	empty("the first empty claim of a flow", lookAgainSoon)
	check("after the gap", awake, false)

	empty("an empty claim", claimOnceMore)
	d.foundEvents(ctx, flowBatch)
	check("a claim of flowBatch events", awakeInFlow, false)
	empty("the first empty claim of a flow", lookAgainSoon)

	// A producer is committing: it looked for dozing relays before the
	// mark, and may not have notified.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock_shared(2030, hashtext($1))", "postbox_"+s.Schema()); err != nil {
		t.Fatal(err)
	}
	empty("a doze while a producer commits", backOffWhileCommitting)
	check("a doze while a producer commits", dozing, true)
	if d.notReadyDelay() != lingerDelay {
		t.Fatalf("delay after the first doze not ready: %v, want %v", d.notReadyDelay(), lingerDelay)
	}
	for i := range dozeTries + 2 {
		empty("another doze while a producer commits", backOffWhileCommitting)
		check("another doze while a producer commits", awake, false)
		if want := lingerDelay << i; d.notReadyDelay() != want {
			t.Fatalf("delay after %d dozes not ready: %v, want %v", d.dozesNotReady, d.notReadyDelay(), want)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	empty("a doze once the producer is done", claimOnceMore)
	check("a doze once the producer is done", dozingConfirmed, true)
	if d.dozesNotReady != 0 {
		t.Fatalf("%d dozes not ready counted after a ready one", d.dozesNotReady)
	}

	d.follow(nil)
	check("no listening connection", awake, false)
	empty("an empty claim without a dozer", waitForWakeUp)
	check("an empty claim without a dozer", awake, false)
}
