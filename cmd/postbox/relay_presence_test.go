package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/relay/presence"
	"github.com/postbox-go/postbox/store"
)

// statusRelays is what status --json says of the relays.
type statusRelays struct {
	SinkDown bool `json:"sink_down"`
	Relays   []struct {
		ID        string     `json:"id"`
		Mode      string     `json:"mode"`
		Sink      string     `json:"sink"`
		Stale     bool       `json:"stale"`
		SinkDown  bool       `json:"sink_down"`
		DownSince *time.Time `json:"sink_down_since"`
		SinkError string     `json:"sink_error"`
	} `json:"relays"`
}

func relaysStatus(t *testing.T, db []string) (statusRelays, string) {
	t.Helper()
	out := runOK(t, append([]string{"status", "--json"}, db...)...)
	var st statusRelays
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json printed %q: %v", out, err)
	}
	return st, out
}

// checkExit runs status --check and returns its exit code and output.
func checkExit(t *testing.T, db []string) (int, string) {
	t.Helper()
	cmd := command(append([]string{"status", "--check"}, db...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("status --check: %v", err)
	return 0, ""
}

// A relay process whose webhook endpoint refuses connections: another
// process, postbox status, says the sink is down, with the relay's id and
// the error, first in its text and with exit code 3 under --check; then up
// once the endpoint listens; the row goes when the relay stops. The
// secrets of the sink's URL (its path and query) and the signing secret
// never reach the presence table or status' output.
func TestStatusSaysTheSinkIsDown(t *testing.T) {
	s, db := schemaStore(t)
	rcv := receiver.New(t, secret, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down: connections are refused

	const pathSecret, querySecret = "P4THSECRET", "QU3RYSECRET"
	logs, pid := startRelayLogged(t, append(db, "--retention", "1h",
		"--webhook-url", "http://"+addr+"/hooks/"+pathSecret+"?token="+querySecret,
		"--webhook-secret", secret, "--heartbeat", "200ms", "--probe-interval", "100ms", "--poll", "50ms")...)
	waitFor(t, "the relay's start", 10*time.Second, func() bool { return strings.Contains(logs.String(), "relay started") })
	id := regexp.MustCompile(`relay=(\S+)`).FindStringSubmatch(logs.String())
	if id == nil {
		t.Fatalf("no relay id in the log:\n%s", logs)
	}
	relayID := id[1]
	if st, out := relaysStatus(t, db); st.SinkDown || len(st.Relays) != 1 || st.Relays[0].ID != relayID || st.Relays[0].SinkDown {
		t.Fatalf("before any event: %s, want relay %s, sink up", out, relayID)
	}
	insertArticleEvent(t, s, "1")

	var outputs []string
	waitFor(t, "status to say the sink is down", 10*time.Second, func() bool {
		st, out := relaysStatus(t, db)
		outputs = append(outputs, out)
		return st.SinkDown
	})
	st, _ := relaysStatus(t, db)
	r := st.Relays[0]
	if len(st.Relays) != 1 || r.ID != relayID || !r.SinkDown || r.Stale || r.DownSince == nil ||
		!strings.Contains(r.SinkError, "connection refused") || r.Mode != "listening" || r.Sink != "webhook http://"+addr+"/…" {
		t.Fatalf("status while the endpoint is down: %+v", st)
	}
	text := runOK(t, append([]string{"status"}, db...)...)
	outputs = append(outputs, text)
	if first, _, _ := strings.Cut(text, "\n"); !strings.HasPrefix(first, "SINK DOWN: relay "+relayID) {
		t.Fatalf("status' first line is %q, want the sink down", first)
	}
	code, out := checkExit(t, db)
	outputs = append(outputs, out)
	if code != 3 || !strings.Contains(out, "the sink is down") {
		t.Fatalf("status --check exited %d, want 3:\n%s", code, out)
	}

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s again: %v", addr, err)
	}
	srv := &http.Server{Handler: rcv.Server.Config.Handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	waitFor(t, "status to say the sink is up", 10*time.Second, func() bool {
		st, out := relaysStatus(t, db)
		outputs = append(outputs, out)
		return !st.SinkDown && len(st.Relays) == 1 && !st.Relays[0].SinkDown
	})
	if code, out := checkExit(t, db); code != 0 {
		t.Fatalf("status --check exited %d once the sink is up:\n%s", code, out)
	}

	var table string
	err = s.Pool().QueryRow(context.Background(), "select string_agg(r::text, ' ') from "+s.Table("relay_presence")+" r").Scan(&table)
	if err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, table)
	for _, out := range outputs {
		for _, secretText := range []string{pathSecret, querySecret, secret} {
			if strings.Contains(out, secretText) {
				t.Fatalf("%q reached the presence table or status: %s", secretText, out)
			}
		}
	}

	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relay's row to go at its stop", 10*time.Second, func() bool {
		st, _ := relaysStatus(t, db)
		return len(st.Relays) == 0
	})
}

// A relay that receives two SIGTERMs at once (GNU timeout sends two: one
// to the process, one to its group) while a delivery is in flight exits
// at once, and deletes its presence row before it does.
func TestRelayTwoSignalsLeaveNoPresence(t *testing.T) {
	s, db := schemaStore(t)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	slow := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-release
		return 0
	})
	t.Cleanup(func() { close(release) }) // before the endpoint closes
	logs := &logbuf.Buffer{}
	cmd := command(append([]string{"relay"}, append(db, "--webhook-url", slow.URL, "--webhook-secret", secret,
		"--shutdown-timeout", "1m", "--heartbeat", "200ms")...)...)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("relay log:\n%s", logs)
		}
	})
	waitFor(t, "the relay's presence row", 10*time.Second, func() bool { st, _ := relaysStatus(t, db); return len(st.Relays) == 1 })
	insertArticleEvent(t, s, "1")
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the delivery never reached the endpoint")
	}

	// Two signals sent back to back may reach the process as one (the
	// kernel keeps one pending SIGTERM): the second goes once the first is
	// seen, as GNU timeout's second does.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relay stopping", 10*time.Second, func() bool { return strings.Contains(logs.String(), "relay stopping") })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the relay did not exit on the second signal")
	}
	if !strings.Contains(logs.String(), "second signal") {
		t.Fatalf("the relay exited, but not on the second signal:\n%s", logs)
	}
	if st, out := relaysStatus(t, db); len(st.Relays) != 0 {
		t.Fatalf("after the relay exited on a second signal, status says %s, want no relay", out)
	}
}

// A stale row (a relay killed a minute ago) says when the running relays
// delete it: in the text, and in seconds under --json.
func TestStatusSaysWhenAStaleRowGoes(t *testing.T) {
	s, db := schemaStore(t)
	ctx := context.Background()
	if err := s.Driver().PresenceBeat(ctx, store.RelayPresence{ID: "crashed", Mode: "polling", HeartbeatEvery: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "update "+s.Table("relay_presence")+" set heartbeat_at = now() - interval '1 minute'"); err != nil {
		t.Fatal(err)
	}
	want := presence.PrunedIn(store.RelayPresence{HeartbeatAge: time.Minute})
	text := runOK(t, append([]string{"status"}, db...)...)
	if !strings.Contains(text, "STALE") || !strings.Contains(text, fmt.Sprintf("removed within %dm", int(want.Minutes()))) {
		t.Fatalf("status of a row stale for a minute:\n%s\nwant it removed within about %s", text, want)
	}
	out := runOK(t, append([]string{"status", "--json"}, db...)...)
	var st struct {
		Relays []struct {
			PrunedIn *float64 `json:"pruned_in_seconds"`
		} `json:"relays"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Relays) != 1 || st.Relays[0].PrunedIn == nil || *st.Relays[0].PrunedIn > want.Seconds() || *st.Relays[0].PrunedIn < want.Seconds()-30 {
		t.Fatalf("status --json %s, want pruned_in_seconds about %v", out, want.Seconds())
	}
}
