package main_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/receiver"
)

// The endpoint is down (its port refuses connections) while plain-SQL
// producers write events, for many times what --max-attempts 2 and the
// backoff allow: nothing is dead-lettered, the relay says once that the
// sink is down and once that it is back, and everything is delivered once
// the endpoint listens.
func TestShippedRelayRidesOutASinkOutage(t *testing.T) {
	s, db := schemaStore(t)
	rcv := receiver.New(t, secret, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down: connections are refused

	logs, _ := startRelayLogged(t, append(db, "--retention", "1h", "--webhook-url", "http://"+addr+"/hooks",
		"--webhook-secret", secret, "--max-attempts", "2", "--backoff-min", "10ms", "--backoff-max", "50ms",
		"--probe-interval", "100ms", "--poll", "50ms")...)
	waitFor(t, "the relay's start", 10*time.Second, func() bool { return strings.Contains(logs.String(), "relay started") })
	const events = 30
	for i := range events {
		insertArticleEvent(t, s, fmt.Sprint(i))
		time.Sleep(30 * time.Millisecond) // a steady producer, about a second long
	}
	waitFor(t, "the relay to say the sink is down", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "sink unreachable")
	})
	if st := status(t, db); st["failed"] != 0 || st["done"] != 0 {
		t.Fatalf("while the endpoint is down: %v", st)
	}

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s again: %v", addr, err)
	}
	srv := &http.Server{Handler: rcv.Server.Config.Handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	rcv.WaitAccepted(t, events, 20*time.Second)
	waitFor(t, "every event recorded as delivered", 10*time.Second, func() bool { return status(t, db)["done"] == events })
	if st := status(t, db); st["failed"] != 0 {
		t.Fatalf("%v events dead-lettered by the outage", st["failed"])
	}
	log := logs.String()
	for line, want := range map[string]int{"sink unreachable": 1, "sink reachable again": 1, "attempts exhausted": 0} {
		if got := strings.Count(log, line); got != want {
			t.Errorf("the relay logged %q %d times, want %d:\n%s", line, got, want, log)
		}
	}
}
