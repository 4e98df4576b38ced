package postgres_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/postboxtest/netfault"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// proxiedPool opens a pool set up by ConfigurePool whose connections go
// through a fault proxy to the test server, with at most maxConns
// connections.
func proxiedPool(t *testing.T, maxConns int32) (*pgxpool.Pool, *postgres.Sockets, *netfault.Proxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := netfault.NewProxy(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	host, port, _ := net.SplitHostPort(proxy.Addr())
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
	cfg.MaxConns = maxConns
	sockets := postgres.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { postgres.ClosePool(pool, sockets, time.Second) })
	if _, err := pool.Exec(context.Background(), "select 1"); err != nil {
		t.Fatal(err)
	}
	return pool, sockets, proxy
}

// halfOpenStatement runs a statement on a connection the proxy left
// half-open, with a context that expires after wait, and returns how long
// it took and its error.
func halfOpenStatement(t *testing.T, pool *pgxpool.Pool, proxy *netfault.Proxy, wait time.Duration) (time.Duration, error) {
	t.Helper()
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	proxy.HalfOpen()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	start := time.Now()
	_, err = conn.Exec(ctx, "select 1")
	return time.Since(start), err
}

// A statement on a half-open connection (the server vanished without a
// word) fails as soon as its context expires, not when the kernel gives
// the link up.
func TestStatementOnHalfOpenLinkEndsWithItsContext(t *testing.T) {
	pool, _, proxy := proxiedPool(t, 1)
	took, err := halfOpenStatement(t, pool, proxy, 300*time.Millisecond)
	if err == nil {
		t.Fatal("a statement on a half-open link succeeded")
	}
	if took > 2*time.Second {
		t.Fatalf("a statement on a half-open link returned %v after its context expired (300ms), want at once: %v", took, err)
	}
	// The connection is dropped, and the next statement gets a new one.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, "select 1"); err != nil {
		t.Fatalf("statement after the half-open link: %v", err)
	}
}

// A half-open connection left idle in the pool is found by the ping before
// it is handed out, and replaced: the caller's statement succeeds, instead
// of waiting on it until its own deadline.
func TestIdleHalfOpenConnectionIsReplaced(t *testing.T) {
	pool, _, proxy := proxiedPool(t, 1)
	proxy.HalfOpen()
	time.Sleep(1100 * time.Millisecond) // idle for over a second: pinged
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, "select 1"); err != nil {
		t.Fatalf("statement after the idle connection went half-open: %v (the ping should have replaced it)", err)
	}
}

// ClosePool does not wait for pgx's drain of a dead connection (up to
// 15 s): every socket is closed once the grace period is over.
func TestClosePoolDoesNotWaitOnDeadLinks(t *testing.T) {
	pool, sockets, proxy := proxiedPool(t, 2)
	if _, err := halfOpenStatement(t, pool, proxy, 100*time.Millisecond); err == nil {
		t.Fatal("a statement on a half-open link succeeded")
	}
	start := time.Now()
	postgres.ClosePool(pool, sockets, 500*time.Millisecond)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("ClosePool took %v with a dead connection, want about its grace (500ms)", took)
	}
	if n := sockets.Open(); n != 0 {
		t.Fatalf("%d sockets still open after ClosePool", n)
	}
}

// A relay that dozes on a listening connection gone half-open learns it
// when it wakes: the wake statement gives up within its short deadline
// (the relay then polls and listens again), instead of holding the relay's
// claims for seconds after the fault.
func TestWakeOnHalfOpenListenerFailsWithinItsDeadline(t *testing.T) {
	pool, _, proxy := proxiedPool(t, 2)
	s, err := postgres.New(pool, postgres.Config{Schema: pgtest.Schema(t, pgtest.Pool(t))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan store.Dozer, 1)
	done := make(chan error, 1)
	go func() { done <- s.Driver().Listen(ctx, func(l store.Listening) { ready <- l.Dozer }, func() {}) }()
	var dozer store.Dozer
	select {
	case dozer = <-ready:
	case err := <-done:
		t.Fatalf("Listen: %v", err)
	}
	if _, err := dozer.Doze(ctx); err != nil {
		t.Fatalf("doze: %v", err)
	}
	proxy.HalfOpen()
	start := time.Now()
	err = dozer.Wake(ctx)
	if took := time.Since(start); err == nil || took > 3*time.Second {
		t.Fatalf("wake on a half-open listener: %v after %v, want an error within its 2 s deadline", err, took)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Listen returned no error once its connection died")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Listen still serves a dead connection")
	}
}
