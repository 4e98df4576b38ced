package main_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/store/postgres"
)

// startRelayLogged starts "postbox relay" with args until the test ends
// and returns its log and its process id.
func startRelayLogged(t *testing.T, args ...string) (*logbuf.Buffer, int) {
	t.Helper()
	logs := &logbuf.Buffer{}
	cmd := command(append([]string{"relay"}, args...)...)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("relay log:\n%s", logs)
		}
	})
	return logs, cmd.Process.Pid
}

// insertArticleEvent writes one event with the article's plain SQL, as a
// producer in another language would, and returns its id.
func insertArticleEvent(t *testing.T, s *postgres.Store, aggregateID string) string {
	t.Helper()
	var id string
	err := s.Pool().QueryRow(context.Background(),
		"insert into "+s.Table("outbox_events")+
			"(aggregate_type, aggregate_id, event_type, payload, dedup_key) values ('order', $1, 'order.created', $2, $3) returning id::text",
		aggregateID, fmt.Sprintf(`{"order_id": %q}`, aggregateID), "order.created:"+aggregateID).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// The shipped command listens: with a poll of an hour, an event inserted by
// plain SQL is delivered within seconds, and the relay says at start how it
// finds events.
func TestShippedRelayListens(t *testing.T) {
	s, db := schemaStore(t)
	rcv := receiver.New(t, secret, nil)
	logs, _ := startRelayLogged(t, append(db, "--poll", "1h", "--webhook-url", rcv.URL, "--webhook-secret", secret)...)
	waitFor(t, "the relay's start", 10*time.Second, func() bool { return strings.Contains(logs.String(), "relay started") })
	time.Sleep(200 * time.Millisecond) // past the relay's first claim, which polls anyway

	for i := range 3 {
		id := insertArticleEvent(t, s, fmt.Sprint(i))
		rcv.WaitAccepted(t, i+1, 5*time.Second)
		if got := rcv.Accepted()[i].ID; got != id {
			t.Fatalf("delivered %s, want %s", got, id)
		}
	}
	log := logs.String()
	for _, want := range []string{
		"listening for new events on postbox_" + s.Schema(),
		"schema " + s.Schema(),
		"standard signatures with 1 secret",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("relay log lacks %q", want)
		}
	}
	if strings.Contains(log, strings.TrimPrefix(secret, "whsec_")) {
		t.Error("the secret appears in the logs")
	}
}

// --no-listen polls, and says so at start.
func TestShippedRelaySaysItPolls(t *testing.T) {
	s, db := schemaStore(t)
	rcv := receiver.New(t, secret, nil)
	logs, _ := startRelayLogged(t, append(db, "--no-listen", "--poll", "100ms", "--webhook-url", rcv.URL, "--webhook-secret", secret)...)
	waitFor(t, "the relay's start", 10*time.Second, func() bool { return strings.Contains(logs.String(), "relay started") })
	insertArticleEvent(t, s, "1")
	rcv.WaitAccepted(t, 1, 5*time.Second)
	if log := logs.String(); !strings.Contains(log, "polling every 100ms: listening is disabled") || strings.Contains(log, "listening for new events") {
		t.Fatalf("relay log does not say it polls:\n%s", log)
	}
}

// The webhook flags reach the sink: two secrets sign every request (a
// receiver that knows only the second verifies it), and --concurrency
// bounds the requests in flight.
func TestShippedRelayWebhookFlags(t *testing.T) {
	s, db := schemaStore(t)
	const second = "whsec_c2Vjb25kLXNlY3JldC1vZi10aGUtcm90YXRpb24="
	var inFlight, most atomic.Int64
	rcv := receiver.New(t, second, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(100 * time.Millisecond)
		return 0
	})
	events := enqueueN(t, s, 20)
	logs, _ := startRelayLogged(t, append(db, "--webhook-url", rcv.URL, "--webhook-secret", secret+" "+second, "--concurrency", "3")...)
	rcv.WaitAccepted(t, len(events), 20*time.Second)
	if m := most.Load(); m > 3 || m < 2 {
		t.Errorf("at most %d requests in flight, want 2 or 3 (--concurrency 3)", m)
	}
	for _, d := range rcv.Accepted() {
		if n := len(strings.Fields(d.Header.Get("webhook-signature"))); n != 2 {
			t.Fatalf("webhook-signature has %d signatures, want 2 (one per secret)", n)
		}
	}
	if log := logs.String(); !strings.Contains(log, "2 secrets, at most 3 requests at once") {
		t.Errorf("relay log does not name the sink's settings:\n%s", log)
	}
}

// --signature x-signature sends the article's headers, signed with the
// secret as given.
func TestShippedRelayXSignature(t *testing.T) {
	s, db := schemaStore(t)
	const raw = "an-article-style-secret-of-32-bytes!"
	srv, good, bad := xSignatureReceiver(t, raw)
	enqueueN(t, s, 5)
	logs, _ := startRelayLogged(t, append(db, "--webhook-url", srv.URL, "--webhook-secret", raw, "--signature", "x-signature")...)
	waitFor(t, "5 verified deliveries", 10*time.Second, func() bool { return good.Load() == 5 })
	if bad.Load() != 0 {
		t.Fatalf("%d requests failed the X-Signature check", bad.Load())
	}
	if !strings.Contains(logs.String(), "x-signature signatures") {
		t.Errorf("relay log does not name the x-signature scheme:\n%s", logs)
	}
}

// A relay on a schema that was never migrated stops at start and says what
// to run, instead of failing every claim.
func TestRelayOnUnmigratedSchemaStops(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	cmd := command("relay", "--db", pgtest.URL(), "--schema", schema, "--webhook-url", "http://127.0.0.1:1", "--webhook-secret", secret)
	if last := runFails(t, cmd); !strings.Contains(last, `run "postbox migrate"`) {
		t.Fatalf("relay on an unmigrated schema said %q, want it to say to run postbox migrate", last)
	}
}

// Read-only commands create nothing and say what is missing.
func TestStatusOnMissingTables(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	last := runFails(t, command("status", "--db", pgtest.URL(), "--schema", schema))
	if !strings.Contains(last, `run "postbox migrate"`) || strings.Contains(last, "does not exist") {
		t.Fatalf("status on an unmigrated schema said %q", last)
	}
	var exists bool
	if err := pool.QueryRow(context.Background(), "select exists (select 1 from pg_namespace where nspname = $1)", schema).Scan(&exists); err != nil || exists {
		t.Fatalf("status created schema %s (%v)", schema, err)
	}

	path := filepath.Join(t.TempDir(), "new.db")
	last = runFails(t, command("status", "--db", "sqlite:"+path))
	if !strings.Contains(last, "postbox migrate") {
		t.Fatalf("status on a missing SQLite file said %q", last)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("status created %s: %v", path, err)
	}
}

// A relay stalled (SIGSTOP) past its lease while another relay takes its
// events over does not send them when it resumes: it checks its lease
// before each delivery. Only the request in flight when it stopped may
// arrive twice.
func TestStalledRelayDoesNotSendLostEvents(t *testing.T) {
	s, db := schemaStore(t)
	rcv := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		time.Sleep(50 * time.Millisecond)
		return 0
	})
	events := enqueueN(t, s, 20)
	flags := append(db, "--webhook-url", rcv.URL, "--webhook-secret", secret, "--lease", "1s", "--poll", "100ms")
	_, pidA := startRelayLogged(t, append(flags, "--concurrency", "1")...)
	rcv.WaitAccepted(t, 1, 10*time.Second)
	if err := syscall.Kill(pidA, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := len(rcv.Accepted())
	startRelayLogged(t, flags...)
	rcv.WaitAccepted(t, len(events), 20*time.Second)
	if err := syscall.Kill(pidA, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the resumed relay would send now
	twice := 0
	for _, e := range events {
		if n := rcv.Attempts(e.ID.String()); n > 1 {
			twice++
		}
	}
	// Each event the stalled relay delivered without recording it, and the
	// one it had in flight, is sent again by the other relay: no more.
	if twice > stopped+1 {
		t.Fatalf("%d events were sent twice (the stalled relay had %d delivered and at most one in flight when it stopped): a relay sent events after its lease expired", twice, stopped)
	}
}

// xSignatureReceiver is a receiver that verifies the article's X-Signature
// headers with secret: it counts the requests signed right (good) and the
// others (bad, answered 401).
func xSignatureReceiver(t *testing.T, secret string) (srv *httptest.Server, good, bad *atomic.Int64) {
	t.Helper()
	good, bad = new(atomic.Int64), new(atomic.Int64)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(r.Header.Get("X-Timestamp")))
		mac.Write(body)
		if r.Header.Get("X-Event-Id") != "" && hmac.Equal([]byte(r.Header.Get("X-Signature")), []byte("sha256="+hex.EncodeToString(mac.Sum(nil)))) {
			good.Add(1)
			return
		}
		bad.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	return srv, good, bad
}
