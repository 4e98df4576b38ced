package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// appPool connects to the test server with an application_name of its own,
// which the Listener's connection copies: the test counts their backends.
func appPool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	app := "pbtest_listener_" + hex.EncodeToString(b)
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, app
}

// sharedStores returns n migrated stores in fresh schemas of pool, all on
// the Listener l.
func sharedStores(t *testing.T, pool *pgxpool.Pool, l *postgres.Listener, n int) []*postgres.Store {
	t.Helper()
	var stores []*postgres.Store
	for range n {
		s, err := postgres.New(pool, postgres.Config{Schema: pgtest.Schema(t, pool), Listener: l})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	return stores
}

// subscriber is one running Listen call.
type subscriber struct {
	dozer  store.Dozer
	woken  chan struct{}
	done   chan error
	cancel context.CancelFunc
}

// subscribe runs s's Listen until the test ends (or stop) and waits until
// it is ready.
func subscribe(t *testing.T, s *postgres.Store) *subscriber {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sub := &subscriber{woken: make(chan struct{}, 100), done: make(chan error, 1), cancel: cancel}
	ready := make(chan store.Dozer, 1)
	go func() {
		sub.done <- s.Driver().Listen(ctx, func(l store.Listening) { ready <- l.Dozer }, func() { sub.woken <- struct{}{} })
	}()
	t.Cleanup(cancel)
	select {
	case sub.dozer = <-ready:
		return sub
	case err := <-sub.done:
		t.Fatalf("Listen: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Listen never became ready")
	}
	return nil
}

// stop ends the Listen call and returns what it returned.
func (sub *subscriber) stop(t *testing.T) error {
	t.Helper()
	sub.cancel()
	select {
	case err := <-sub.done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Listen did not return after its context ended")
		return nil
	}
}

func (sub *subscriber) doze(t *testing.T) {
	t.Helper()
	if ready, err := sub.dozer.Doze(context.Background()); err != nil || !ready {
		t.Fatalf("doze: %v, %v; want true", ready, err)
	}
}

func pgNotify(t *testing.T, s *postgres.Store) {
	t.Helper()
	if _, err := s.Pool().Exec(context.Background(), "select pg_notify($1, '')", "postbox_"+s.Schema()); err != nil {
		t.Fatal(err)
	}
}

// backends counts the server's backends of application app, seen from
// another pool.
func backends(t *testing.T, app string) int {
	t.Helper()
	var n int
	if err := pgtest.Pool(t).QueryRow(context.Background(),
		"select count(*) from pg_stat_activity where application_name = $1", app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// lastStatement is the last statement of the Listener's backend.
func lastStatement(t *testing.T, l *postgres.Listener) string {
	t.Helper()
	var q string
	if err := pgtest.Pool(t).QueryRow(context.Background(),
		"select query from pg_stat_activity where pid = $1", int64(l.PID())).Scan(&q); err != nil {
		t.Fatal(err)
	}
	return q
}

// Three stores in three schemas share one Listener: one connection more
// than the pool's, and each store hears its own channel only.
func TestListenerSharesOneConnection(t *testing.T) {
	pool, app := appPool(t)
	l := postgres.NewListener(pool)
	t.Cleanup(l.Close)
	stores := sharedStores(t, pool, l, 3)
	if l.PID() != 0 {
		t.Fatal("the Listener connected before any Listen")
	}
	var subs []*subscriber
	for _, s := range stores {
		subs = append(subs, subscribe(t, s))
	}
	if l.PID() == 0 {
		t.Fatal("the Listener has no connection while stores listen")
	}
	if got, pooled := backends(t, app), int(pool.Stat().TotalConns()); got != pooled+1 {
		t.Fatalf("%d backends with %d connections in the pool; want one listening connection more", got, pooled)
	}
	for i, s := range stores {
		pgNotify(t, s)
		for j, sub := range subs {
			expectNotification(t, sub.woken, i == j)
		}
	}
	// The producers' trigger notifies a dozing store of its own schema.
	for _, sub := range subs {
		sub.doze(t)
	}
	for i, s := range stores {
		enqueueOne(t, s)
		for j, sub := range subs {
			expectNotification(t, sub.woken, i == j)
		}
	}
	for _, sub := range subs {
		if err := sub.stop(t); err != nil {
			t.Fatalf("Listen after its context ended: %v", err)
		}
	}
	for _, s := range stores {
		if dozeHeld(t, s) {
			t.Fatalf("the doze mark of %s is still held after its Listen returned", s.Schema())
		}
	}
}

// On a shared connection each channel dozes and wakes on its own.
func TestListenerDozesPerChannel(t *testing.T) {
	pool := pgtest.Pool(t)
	l := postgres.NewListener(pool)
	t.Cleanup(l.Close)
	stores := sharedStores(t, pool, l, 2)
	a, b := subscribe(t, stores[0]), subscribe(t, stores[1])
	ctx := context.Background()

	a.doze(t)
	if !dozeHeld(t, stores[0]) || dozeHeld(t, stores[1]) {
		t.Fatal("the doze of one store marked the wrong channel")
	}
	enqueueOne(t, stores[0])
	expectNotification(t, a.woken, true)
	enqueueOne(t, stores[1])
	expectNotification(t, b.woken, false)

	b.doze(t)
	enqueueOne(t, stores[1])
	expectNotification(t, b.woken, true)
	expectNotification(t, a.woken, false)

	if err := a.dozer.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	if dozeHeld(t, stores[0]) || !dozeHeld(t, stores[1]) {
		t.Fatal("the wake of one store unmarked the wrong channel")
	}
	enqueueOne(t, stores[0])
	expectNotification(t, a.woken, false)
	enqueueOne(t, stores[1])
	expectNotification(t, b.woken, true)

	// The barrier is per channel too: a producer of one schema still
	// committing keeps that schema's store from dozing, not the other's.
	if err := b.dozer.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	tx, _ := enqueueEarly(t, stores[0])
	if ready, err := a.dozer.Doze(ctx); err != nil || ready {
		t.Fatalf("doze while a producer of its schema is committing: %v, %v; want false", ready, err)
	}
	if ready, err := b.dozer.Doze(ctx); err != nil || !ready {
		t.Fatalf("doze while a producer of another schema is committing: %v, %v; want true", ready, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// a's mark stays from its first try; the barrier is clear now.
	if ready, err := a.dozer.Doze(ctx); err != nil || !ready {
		t.Fatalf("doze after the producer committed: %v, %v; want true", ready, err)
	}
}

// Two Listen calls of one channel on a shared connection both hear it, and
// the channel stays marked while either dozes; one ending leaves the other
// listening.
func TestListenerFansOutOneChannel(t *testing.T) {
	pool := pgtest.Pool(t)
	l := postgres.NewListener(pool)
	t.Cleanup(l.Close)
	s := sharedStores(t, pool, l, 1)[0]
	// A second Store value of the same schema, as a second relay's.
	s2, err := postgres.New(pool, postgres.Config{Schema: s.Schema(), Listener: l})
	if err != nil {
		t.Fatal(err)
	}
	a, b := subscribe(t, s), subscribe(t, s2)
	ctx := context.Background()

	pgNotify(t, s)
	expectNotification(t, a.woken, true)
	expectNotification(t, b.woken, true)

	a.doze(t)
	b.doze(t)
	if err := a.dozer.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	if !dozeHeld(t, s) {
		t.Fatal("the channel is unmarked while one of its listeners still dozes")
	}
	enqueueOne(t, s)
	expectNotification(t, b.woken, true)
	expectNotification(t, a.woken, true) // the channel's notification reaches both

	// b ends while dozing: its mark goes, and a still listens.
	if err := b.stop(t); err != nil {
		t.Fatalf("Listen after its context ended: %v", err)
	}
	if dozeHeld(t, s) {
		t.Fatal("the doze mark is still held after the dozing listener ended")
	}
	if q := lastStatement(t, l); q == `unlisten "postbox_`+s.Schema()+`"` {
		t.Fatal("the channel was unlistened while another Listen still listens on it")
	}
	pgNotify(t, s)
	expectNotification(t, a.woken, true)
	expectNotification(t, b.woken, false)
	if _, err := b.dozer.Doze(ctx); err == nil {
		t.Fatal("the Dozer of an ended Listen dozed")
	}
}

// One store's Listen ending UNLISTENs its channel and ends its doze; the
// other stores on the connection go on.
func TestListenerOneEndsOthersGoOn(t *testing.T) {
	pool := pgtest.Pool(t)
	l := postgres.NewListener(pool)
	t.Cleanup(l.Close)
	stores := sharedStores(t, pool, l, 2)
	a, b := subscribe(t, stores[0]), subscribe(t, stores[1])
	a.doze(t)
	b.doze(t)
	pid := l.PID()

	if err := a.stop(t); err != nil {
		t.Fatalf("Listen after its context ended: %v", err)
	}
	if dozeHeld(t, stores[0]) {
		t.Fatal("the doze mark is still held after its Listen returned")
	}
	if !dozeHeld(t, stores[1]) {
		t.Fatal("the other store's doze mark went with the first store's Listen")
	}
	if want, q := `unlisten "postbox_`+stores[0].Schema()+`"`, lastStatement(t, l); q != want {
		t.Fatalf("the listening connection's last statement is %q; want %q", q, want)
	}
	enqueueOne(t, stores[0])
	expectNotification(t, a.woken, false)
	enqueueOne(t, stores[1])
	expectNotification(t, b.woken, true)
	if l.PID() != pid {
		t.Fatal("the Listener reconnected when one store stopped listening")
	}

	// The store listens again on the same connection.
	a = subscribe(t, stores[0])
	if l.PID() != pid {
		t.Fatal("the Listener reconnected for a new Listen")
	}
	pgNotify(t, stores[0])
	expectNotification(t, a.woken, true)
	expectNotification(t, b.woken, false)
}

// The shared connection terminated: every store's Listen returns an error,
// and Listen again connects again.
func TestListenerConnectionLost(t *testing.T) {
	pool := pgtest.Pool(t)
	l := postgres.NewListener(pool)
	t.Cleanup(l.Close)
	stores := sharedStores(t, pool, l, 2)
	a, b := subscribe(t, stores[0]), subscribe(t, stores[1])
	a.doze(t)
	pid := l.PID()
	var killed bool
	if err := pgtest.Pool(t).QueryRow(context.Background(), "select pg_terminate_backend($1)", int64(pid)).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the listening connection: %v, %v", killed, err)
	}
	for i, sub := range []*subscriber{a, b} {
		select {
		case err := <-sub.done:
			if err == nil {
				t.Fatalf("store %d: Listen returned nil when its connection was terminated", i)
			}
			if errors.Is(err, store.ErrCannotListen) {
				t.Fatalf("store %d: a lost connection says it cannot listen for good: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("store %d: Listen did not return when its connection was terminated", i)
		}
	}
	if _, err := a.dozer.Doze(context.Background()); err == nil {
		t.Fatal("the Dozer of a lost connection dozed")
	}

	a, b = subscribe(t, stores[0]), subscribe(t, stores[1])
	if l.PID() == pid || l.PID() == 0 {
		t.Fatalf("the Listener's backend is %d after %d was terminated", l.PID(), pid)
	}
	pgNotify(t, stores[1])
	expectNotification(t, b.woken, true)
	expectNotification(t, a.woken, false)
	a.doze(t)
	enqueueOne(t, stores[0])
	expectNotification(t, a.woken, true)
}

// Close ends every Listen on the Listener, and later ones say it cannot
// listen; New refuses a Listener of another pool.
func TestListenerClose(t *testing.T) {
	pool := pgtest.Pool(t)
	l := postgres.NewListener(pool)
	t.Cleanup(l.Close)
	s := sharedStores(t, pool, l, 1)[0]
	sub := subscribe(t, s)
	pid := l.PID()
	l.Close()
	select {
	case err := <-sub.done:
		if !errors.Is(err, store.ErrCannotListen) {
			t.Fatalf("Listen after Close: %v; want store.ErrCannotListen", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not return after Close")
	}
	// The backend exits a moment after the connection closes.
	for deadline := time.Now().Add(5 * time.Second); ; {
		var alive bool
		if err := pool.QueryRow(context.Background(), "select exists (select 1 from pg_stat_activity where pid = $1)", int64(pid)).Scan(&alive); err != nil {
			t.Fatal(err)
		}
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Listener's backend lives on after Close")
		}
		time.Sleep(20 * time.Millisecond)
	}
	err := s.Driver().Listen(context.Background(), func(store.Listening) { t.Error("ready after Close") }, func() {})
	if !errors.Is(err, store.ErrCannotListen) {
		t.Fatalf("Listen on a closed Listener: %v; want store.ErrCannotListen", err)
	}

	other := postgres.NewListener(pgtest.Pool(t))
	if _, err := postgres.New(pool, postgres.Config{Schema: s.Schema(), Listener: other}); err == nil {
		t.Fatal("New accepted a Listener of another pool")
	}
}

// Stores that start listening at once on a new Listener share the one
// connection it makes.
func TestListenerConcurrentSubscribes(t *testing.T) {
	pool, app := appPool(t)
	l := postgres.NewListener(pool)
	t.Cleanup(l.Close)
	stores := sharedStores(t, pool, l, 6)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan int, len(stores))
	woken := make([]chan struct{}, len(stores))
	done := make(chan error, len(stores))
	for i, s := range stores {
		woken[i] = make(chan struct{}, 100)
		go func() {
			done <- s.Driver().Listen(ctx, func(store.Listening) { ready <- i }, func() { woken[i] <- struct{}{} })
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range stores {
			if err := <-done; err != nil {
				t.Errorf("Listen: %v", err)
			}
		}
	})
	for range stores {
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("Listen: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("Listen never became ready")
		}
	}
	if got, pooled := backends(t, app), int(pool.Stat().TotalConns()); got != pooled+1 {
		t.Fatalf("%d backends with %d connections in the pool; want one listening connection more", got, pooled)
	}
	pgNotify(t, stores[3])
	for i := range stores {
		expectNotification(t, woken[i], i == 3)
	}
}
