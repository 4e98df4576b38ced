package netfault

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// echoServer echoes every connection on 127.0.0.1; closed counts the
// connections that ended on its side.
func echoServer(t *testing.T) (addr string, closed *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	closed = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(c, c)
				_ = c.Close()
				closed.Add(1)
			}()
		}
	}()
	return ln.Addr().String(), closed
}

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// echo writes msg and reads it back within wait.
func echo(c net.Conn, msg []byte, wait time.Duration) error {
	if _, err := c.Write(msg); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return errors.New("echo differs")
	}
	return nil
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

func TestProxyForwardsAndAddsLatency(t *testing.T) {
	target, _ := echoServer(t)
	p := startProxy(t, target)
	c := dial(t, p)
	if err := echo(c, []byte("hello"), 5*time.Second); err != nil {
		t.Fatalf("plain echo: %v", err)
	}
	const latency = 150 * time.Millisecond
	p.SetLatency(latency)
	start := time.Now()
	if err := echo(c, []byte("slow"), 5*time.Second); err != nil {
		t.Fatalf("echo with latency: %v", err)
	}
	// Each way waits the latency: at least twice it, never less.
	if took := time.Since(start); took < 2*latency {
		t.Fatalf("round trip took %v with %v latency each way", took, latency)
	}
}

func TestProxyResetsMidStream(t *testing.T) {
	target, _ := echoServer(t)
	p := startProxy(t, target)
	p.SetResets(true)
	c := dial(t, p)
	msg := bytes.Repeat([]byte("x"), 1<<10)
	var err error
	for range 64 { // 64 KiB: past any reset point
		if err = echo(c, msg, 5*time.Second); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, io.EOF) {
		t.Fatalf("64 KiB through a resetting proxy: %v, want a reset", err)
	}
	p.SetResets(false)
	if err := echo(dial(t, p), []byte("after"), 5*time.Second); err != nil {
		t.Fatalf("after resets ended: %v", err)
	}
}

func TestProxyBlackHoleHoldsBytesUntilItEnds(t *testing.T) {
	target, _ := echoServer(t)
	p := startProxy(t, target)
	c := dial(t, p)
	if err := echo(c, []byte("before"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.SetBlackHole(true)
	if err := echo(c, []byte("held"), 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("echo in the black hole: %v, want a timeout", err)
	}
	fresh := dial(t, p) // new connections are accepted, and held too
	if err := echo(fresh, []byte("new"), 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("new connection in the black hole: %v, want a timeout", err)
	}
	p.SetBlackHole(false)
	got := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
		t.Fatalf("after the black hole: %q, %v: the held bytes were not delivered", got, err)
	}
}

func TestProxyHalfOpenLeavesTheClientHanging(t *testing.T) {
	target, closed := echoServer(t)
	p := startProxy(t, target)
	c := dial(t, p)
	if err := echo(c, []byte("before"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.HalfOpen()
	// The client's side neither answers nor closes: only a timeout ends it.
	if err := echo(c, []byte("lost"), 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("echo on a half-open connection: %v, want a timeout", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for closed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if closed.Load() != 1 {
		t.Fatal("the target's side of the half-open connection was not closed")
	}
	if err := echo(dial(t, p), []byte("new"), 5*time.Second); err != nil {
		t.Fatalf("a new connection after HalfOpen: %v", err)
	}
}

func TestProxyRefusesWhileDown(t *testing.T) {
	target, _ := echoServer(t)
	p := startProxy(t, target)
	c := dial(t, p)
	if err := p.SetRefusing(true); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while refusing: %v, want connection refused", err)
	}
	if err := echo(c, []byte("x"), 5*time.Second); err == nil {
		t.Fatal("an open connection survived the refusal")
	}
	if err := p.SetRefusing(false); err != nil {
		t.Fatal(err)
	}
	if err := echo(dial(t, p), []byte("back"), 5*time.Second); err != nil {
		t.Fatalf("after the refusal ended: %v", err)
	}
}
