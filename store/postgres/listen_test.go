package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// listenDozing runs Listen until the test ends and returns its Dozer and
// the channel its notifications arrive on.
func listenDozing(t *testing.T, s *postgres.Store) (store.Dozer, <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan store.Dozer, 1)
	woken := make(chan struct{}, 100)
	done := make(chan error, 1)
	go func() {
		done <- s.Driver().Listen(ctx, func(l store.Listening) { ready <- l.Dozer }, func() { woken <- struct{}{} })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Listen: %v", err)
		}
	})
	select {
	case d := <-ready:
		return d, woken
	case err := <-done:
		t.Fatalf("Listen: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Listen never became ready")
	}
	return nil, nil
}

func enqueueOne(t *testing.T, s *postgres.Store) {
	t.Helper()
	e := postbox.Event{AggregateType: "order", AggregateID: "1", EventType: "order.created", Payload: []byte(`{}`)}
	if err := s.Enqueue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

func expectNotification(t *testing.T, woken <-chan struct{}, want bool) {
	t.Helper()
	wait := 5 * time.Second
	if !want {
		wait = 300 * time.Millisecond
	}
	select {
	case <-woken:
		if !want {
			t.Fatal("a producer notified although no relay dozes")
		}
	case <-time.After(wait):
		if want {
			t.Fatal("no notification while the relay dozes")
		}
	}
}

// enqueueEarly writes one event in a transaction it leaves open (rolled back
// when the test ends) with "set constraints all immediate": the notify
// trigger runs at the INSERT instead of at the commit.
func enqueueEarly(t *testing.T, s *postgres.Store) (pgx.Tx, postbox.Event) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "set constraints all immediate"); err != nil {
		t.Fatal(err)
	}
	e := postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: "1", EventType: "order.created", Payload: []byte(`{}`)}
	if err := s.EnqueueTx(ctx, tx, e); err != nil {
		t.Fatal(err)
	}
	return tx, e
}

// dozeHeld reports whether some session marks a relay dozing on s's channel.
func dozeHeld(t *testing.T, s *postgres.Store) bool {
	t.Helper()
	var held bool
	err := s.Pool().QueryRow(context.Background(),
		`select exists (select 1 from pg_locks where locktype = 'advisory' and classid = $2
		   and objid = hashtext('postbox_' || $1)::oid and granted)`, s.Schema(), postgres.DozeLock).Scan(&held)
	if err != nil {
		t.Fatal(err)
	}
	return held
}

// Producers notify a relay only while it dozes: not before Doze, and not
// after Wake.
func TestProducersNotifyOnlyDozingRelays(t *testing.T) {
	s := pgtest.Store(t)
	dozer, woken := listenDozing(t, s)
	ctx := context.Background()

	enqueueOne(t, s)
	expectNotification(t, woken, false)

	ready, err := dozer.Doze(ctx)
	if err != nil || !ready {
		t.Fatalf("doze with no producer committing: %v, %v; want true", ready, err)
	}
	for range 2 {
		enqueueOne(t, s)
		expectNotification(t, woken, true)
	}

	if err := dozer.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	if dozeHeld(t, s) {
		t.Fatal("the doze mark is still held after Wake")
	}
	enqueueOne(t, s)
	expectNotification(t, woken, false)
}

// A relay may not doze while a producer that looked for dozing relays
// before it (and so will not notify) is still committing; once that
// producer has committed, a claim sees its event.
func TestDozeWaitsForCommittingProducers(t *testing.T) {
	s := pgtest.Store(t)
	dozer, woken := listenDozing(t, s)
	ctx := context.Background()

	// The producer looks for dozing relays now and finds none.
	tx, e := enqueueEarly(t, s)
	ready, err := dozer.Doze(ctx)
	if err != nil || ready {
		t.Fatalf("doze while a producer that did not notify is committing: %v, %v; want false", ready, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	expectNotification(t, woken, false)
	ready, err = dozer.Doze(ctx)
	if err != nil || !ready {
		t.Fatalf("doze after the producer committed: %v, %v; want true", ready, err)
	}
	got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != e.ID {
		t.Fatalf("claim after the doze: %v, %v; want the committed event", got, err)
	}
}

// While a relay dozes every committing producer notifies: one whose
// notification is lost with its transaction (it rolls back, or fails at its
// commit after the trigger ran) keeps no other producer from waking the
// relay.
func TestEveryProducerNotifiesADozingRelay(t *testing.T) {
	s := pgtest.Store(t)
	dozer, woken := listenDozing(t, s)
	ctx := context.Background()
	if ready, err := dozer.Doze(ctx); err != nil || !ready {
		t.Fatalf("doze: %v, %v; want true", ready, err)
	}

	// The producer's notification is queued now, and its rollback will
	// discard it.
	tx, _ := enqueueEarly(t, s)

	enqueueOne(t, s)
	expectNotification(t, woken, true)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}

// A relay already marked dozing dozes again with the barrier alone, tried
// on a pool connection rather than the listening one: it is refused while
// a producer is committing, as the first doze is, and granted once the
// producer committed.
func TestDozeAgainWaitsForCommittingProducers(t *testing.T) {
	s := pgtest.Store(t)
	dozer, woken := listenDozing(t, s)
	ctx := context.Background()
	if ready, err := dozer.Doze(ctx); err != nil || !ready {
		t.Fatalf("first doze: %v, %v; want true", ready, err)
	}
	tx, _ := enqueueEarly(t, s)
	ready, err := dozer.Doze(ctx)
	if err != nil || ready {
		t.Fatalf("doze again while a producer is committing: %v, %v; want false", ready, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	expectNotification(t, woken, true) // it saw the mark: it notified
	if ready, err := dozer.Doze(ctx); err != nil || !ready {
		t.Fatalf("doze again after the producer committed: %v, %v; want true", ready, err)
	}
}
