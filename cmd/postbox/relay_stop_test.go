package main_test

import (
	"bytes"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A relay stopped (SIGTERM) while it still connects to the database, here
// a server that accepts and never answers, stops cleanly: exit status 0,
// and it says so. The chaos tool stops relays it has just restarted that
// way.
func TestRelayStoppedWhileConnectingExitsCleanly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	var out bytes.Buffer
	cmd := command("relay", "--db", "postgres://postgres@"+ln.Addr().String()+"/postgres",
		"--webhook-url", "http://127.0.0.1:1/hook", "--webhook-secret", secret)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("relay stopped while connecting: %v, want exit status 0\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("relay did not stop within 10s of SIGTERM while connecting\n%s", out.String())
	}
	if !strings.Contains(out.String(), "relay stopped before it reached the database") {
		t.Fatalf("the relay did not say it stopped:\n%s", out.String())
	}
}
