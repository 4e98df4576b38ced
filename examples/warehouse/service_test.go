package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/signature"
)

// testSecret is the webhook secret of the tests (24 random bytes).
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func noEnv(string) string { return "" }

// warehouse is a service under test, on a fresh schema, served on
// 127.0.0.1.
type warehouse struct {
	*service
	db     *pgxpool.Pool // for the tests' own queries
	schema string
	url    string // of the HTTP server
}

// newWarehouse sets the service up as the command does, from flags.
func newWarehouse(t *testing.T, failRate float64) *warehouse {
	t.Helper()
	return newWarehouseVerifying(t, failRate, testSecret)
}

// newWarehouseVerifying sets the service up with --secret secret.
func newWarehouseVerifying(t *testing.T, failRate float64, secret string) *warehouse {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	cfg, err := parseConfig([]string{
		"--db", pgtest.URL(), "--schema", schema, "--secret", secret,
		"--fail-rate", strconv.FormatFloat(failRate, 'g', -1, 64),
	}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newService(context.Background(), cfg, testlog.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	srv := httptest.NewServer(s.routes())
	t.Cleanup(srv.Close)
	return &warehouse{service: s, db: pool, schema: schema, url: srv.URL}
}

// count runs a "select count(*)" over one of the service's tables.
func (w *warehouse) count(t *testing.T, table, where string, args ...any) int {
	t.Helper()
	q := "select count(*) from " + w.schema + "." + table
	if where != "" {
		q += " where " + where
	}
	var n int
	if err := w.db.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// signedRequest is a delivery as the relay's webhook sink sends it.
func signedRequest(t *testing.T, url, secret string, id uuid.UUID, eventType string, body []byte, at time.Time) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Postbox-Event-Type", eventType)
	req.Header.Set("Postbox-Aggregate-Type", "order")
	signer, err := signature.NewSigner(signature.Standard, secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := signer.Sign(req.Header, id.String(), at, body); err != nil {
		t.Fatal(err)
	}
	return req
}

// send posts req with body (again, if it was sent before) and returns the
// answer.
func send(t *testing.T, req *http.Request, body []byte) (int, string) {
	t.Helper()
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(answer))
}

// orderEvent returns an event id, an order id and the article's payload.
func orderEvent(amount int64) (uuid.UUID, uuid.UUID, []byte) {
	id, orderID := postbox.NewID(), postbox.NewID()
	body := fmt.Appendf(nil, `{"event_id": %q, "order_id": %q, "user_id": "u_123", "amount": %d, "occurred_at": "2025-05-01T12:00:00Z"}`,
		id, orderID, amount)
	return id, orderID, body
}

func TestSignedDeliveryIsAppliedOnce(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 0)
	id, orderID, body := orderEvent(9900)
	req := signedRequest(t, w.url+"/webhook", testSecret, id, "order.created", body, time.Now())

	code, answer := send(t, req, body)
	if code != http.StatusOK || answer != `{"status":"processed"}` {
		t.Fatalf("first delivery: %d %s", code, answer)
	}
	if n := w.count(t, "reservations", "event_id = $1 and order_id = $2 and amount = 9900", id, orderID); n != 1 {
		t.Fatalf("%d matching reservations after the first delivery, want 1", n)
	}

	// The very same request again, as a relay retrying after a lost answer.
	code, answer = send(t, req, body)
	if code != http.StatusOK || answer != `{"status":"duplicate"}` {
		t.Fatalf("second delivery: %d %s", code, answer)
	}
	// A fresh signature (a later attempt) is the same event too.
	code, answer = send(t, signedRequest(t, w.url+"/webhook", testSecret, id, "order.created", body, time.Now()), body)
	if code != http.StatusOK || answer != `{"status":"duplicate"}` {
		t.Fatalf("third delivery: %d %s", code, answer)
	}
	if n := w.count(t, "reservations", ""); n != 1 {
		t.Fatalf("%d reservations after three deliveries of one event, want 1", n)
	}
	if n := w.count(t, "inbox_events", "id = $1 and handler_status = 'done'", id); n != 1 {
		t.Fatalf("the event's inbox row is not done")
	}
}

func TestBadSignatureIsRefused(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 0)
	url := w.url + "/webhook"
	id, _, body := orderEvent(100)
	other := "whsec_" + "b3RoZXItc2VjcmV0LW9mLWF0LWxlYXN0LTI0LWJ5dGVz" // "other-secret-of-at-least-24-bytes"

	unsigned, _ := http.NewRequest(http.MethodPost, url, nil)
	unsigned.Header.Set("Content-Type", "application/json")
	unsigned.Header.Set("Postbox-Event-Type", "order.created")

	// Signed for id, sent under another: a replay past the inbox.
	otherID := signedRequest(t, url, testSecret, id, "order.created", body, time.Now())
	otherID.Header.Set("Webhook-Id", uuid.NewString())

	for name, req := range map[string]*http.Request{
		"wrong secret":     signedRequest(t, url, other, id, "order.created", body, time.Now()),
		"tampered body":    signedRequest(t, url, testSecret, id, "order.created", []byte(`{"amount": 1}`), time.Now()),
		"other id":         otherID,
		"stale timestamp":  signedRequest(t, url, testSecret, id, "order.created", body, time.Now().Add(-10*time.Minute)),
		"future timestamp": signedRequest(t, url, testSecret, id, "order.created", body, time.Now().Add(10*time.Minute)),
		"no signature":     unsigned,
	} {
		t.Run(name, func(t *testing.T) {
			code, answer := send(t, req, body)
			if code != http.StatusUnauthorized {
				t.Fatalf("answer %d %s, want 401", code, answer)
			}
		})
	}
	if n := w.count(t, "reservations", ""); n != 0 {
		t.Fatalf("%d reservations after refused requests", n)
	}
	if n := w.count(t, "inbox_events", ""); n != 0 {
		t.Fatalf("%d inbox rows after refused requests", n)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 0)
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/", http.StatusOK},
		{http.MethodHead, "/", http.StatusOK},
		{http.MethodGet, "/nothing", http.StatusNotFound},
		{http.MethodGet, "/webhook", http.StatusMethodNotAllowed},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
	} {
		req, _ := http.NewRequest(tc.method, w.url+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.code)
		}
	}

	// With the database gone, the health check says so.
	w.pool.Close()
	resp, err := http.Get(w.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET / without a database: %d, want 503", resp.StatusCode)
	}
}

// The article's lost-event defect: a handler that fails after the inbox row
// was written must leave nothing behind, and the retry must be processed,
// not answered "duplicate".
func TestFailedHandlerLeavesNoTraceAndTheRetryIsApplied(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 1) // every handler run fails
	id, orderID, body := orderEvent(500)
	req := signedRequest(t, w.url+"/webhook", testSecret, id, "order.created", body, time.Now())

	if code, answer := send(t, req, body); code != http.StatusInternalServerError {
		t.Fatalf("delivery with a failing handler: %d %s, want 500", code, answer)
	}
	if got := w.faults.Load(); got != 1 {
		t.Fatalf("%d faults injected, want 1", got)
	}
	if n := w.count(t, "reservations", ""); n != 0 {
		t.Fatalf("%d reservations after a failed handler run, want 0", n)
	}
	if n := w.count(t, "inbox_events", "id = $1 and handler_status = 'done'", id); n != 0 {
		t.Fatal("the event's inbox row is done after a failed handler run")
	}

	w.fail = func() bool { return false } // the fault is gone
	if code, answer := send(t, req, body); code != http.StatusOK || answer != `{"status":"processed"}` {
		t.Fatalf("retry: %d %s, want 200 processed", code, answer)
	}
	if n := w.count(t, "reservations", "event_id = $1 and order_id = $2", id, orderID); n != 1 {
		t.Fatalf("%d reservations after the retry, want 1", n)
	}
	if n := w.count(t, "inbox_events", "id = $1 and handler_status = 'done' and attempts = 2", id); n != 1 {
		t.Fatal("the event's inbox row is not done with two attempts")
	}
}

// A payload no retry can fix is answered 400, which a relay retries only a
// few times before it dead-letters the event. Nothing is reserved; the
// inbox row, when the body was JSON at all, is failed with the reason.
func TestInvalidPayloadIsRejectedWithoutReservation(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 0)
	for name, tc := range map[string]struct{ body, reason string }{
		"no order id":     {`{"user_id": "u_1", "amount": 100}`, `"order_id" is missing`},
		"zero amount":     {fmt.Sprintf(`{"order_id": %q, "amount": 0}`, uuid.New()), `"amount" 0 is not positive`},
		"text amount":     {fmt.Sprintf(`{"order_id": %q, "amount": "100"}`, uuid.New()), "does not decode"},
		"bad order id":    {`{"order_id": "42", "amount": 100}`, "does not decode"},
		"not an object":   {`[1, 2]`, "does not decode"},
		"not json at all": {`order 42`, ""}, // refused before the inbox
	} {
		t.Run(name, func(t *testing.T) {
			id := uuid.New()
			req := signedRequest(t, w.url+"/webhook", testSecret, id, "order.created", []byte(tc.body), time.Now())
			if code, answer := send(t, req, []byte(tc.body)); code != http.StatusBadRequest {
				t.Fatalf("answer %d %s, want 400", code, answer)
			}
			want := 1
			if tc.reason == "" {
				want = 0
			}
			if n := w.count(t, "inbox_events", "id = $1 and handler_status = 'failed' and strpos(last_error, $2) > 0", id, tc.reason); n != want {
				t.Fatalf("%d failed inbox rows naming %q, want %d", n, tc.reason, want)
			}
		})
	}
	if n := w.count(t, "reservations", ""); n != 0 {
		t.Fatalf("%d reservations after invalid payloads", n)
	}
	if n := w.count(t, "inbox_events", "handler_status <> 'failed'"); n != 0 {
		t.Fatalf("%d inbox rows not failed after invalid payloads", n)
	}
}

func TestOtherEventTypesAreAcknowledgedWithoutReservation(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 0)
	id, _, body := orderEvent(100)
	req := signedRequest(t, w.url+"/webhook", testSecret, id, "order.paid", body, time.Now())
	if code, answer := send(t, req, body); code != http.StatusOK {
		t.Fatalf("answer %d %s, want 200", code, answer)
	}
	if n := w.count(t, "reservations", ""); n != 0 {
		t.Fatalf("%d reservations for an order.paid event", n)
	}
	if n := w.count(t, "inbox_events", "id = $1 and handler_status = 'done'", id); n != 1 {
		t.Fatal("the order.paid event is not recorded done in the inbox")
	}
}

// The attack: a captured order.created delivery re-sent first with
// its event type changed to one the warehouse ignores (or with its
// aggregate or sequence changed, or its metadata signature removed) was
// recorded done, and the genuine delivery answered "duplicate": the order
// was never reserved. The forged delivery is now refused and stores
// nothing, and the genuine one reserves the stock; with v1 (HMAC) and v1a
// (ed25519) keys.
func TestForgedMetadataCannotHideAnOrder(t *testing.T) {
	t.Parallel()
	const (
		signingKey = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg=="
		publicKey  = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="
	)
	forgeries := map[string]func(http.Header){
		"event type ignored":         func(h http.Header) { h.Set("Postbox-Event-Type", "order.paid") },
		"aggregate changed":          func(h http.Header) { h.Set("Postbox-Aggregate-Id", "another-order") },
		"sequence added":             func(h http.Header) { h.Set("Postbox-Sequence", "9223372036854775807") },
		"metadata signature removed": func(h http.Header) { h.Del("Postbox-Metadata-Signature"); h.Set("Postbox-Event-Type", "order.paid") },
	}
	for _, keys := range []struct{ name, signer, verifier string }{
		{"v1", testSecret, testSecret},
		{"v1a", signingKey, publicKey},
	} {
		t.Run(keys.name, func(t *testing.T) {
			w := newWarehouseVerifying(t, 0, keys.verifier)
			for name, forge := range forgeries {
				t.Run(name, func(t *testing.T) {
					id, orderID, body := orderEvent(9900)
					genuine := signedRequest(t, w.url+"/webhook", keys.signer, id, "order.created", body, time.Now())
					forged := genuine.Clone(context.Background())
					forge(forged.Header)

					if code, answer := send(t, forged, body); code != http.StatusBadRequest && code != http.StatusUnauthorized {
						t.Fatalf("forged delivery: %d %s, want 400 or 401", code, answer)
					}
					if n := w.count(t, "inbox_events", "id = $1", id); n != 0 {
						t.Fatalf("the forged delivery left %d inbox rows", n)
					}
					if code, answer := send(t, genuine, body); code != http.StatusOK || answer != `{"status":"processed"}` {
						t.Fatalf("genuine delivery after the forged one: %d %s, want 200 processed", code, answer)
					}
					if n := w.count(t, "reservations", "event_id = $1 and order_id = $2", id, orderID); n != 1 {
						t.Fatalf("%d reservations of the order, want 1", n)
					}
				})
			}
		})
	}
}

// A request in flight when the signal comes is finished and answered; then
// serve returns nil and the port is closed.
func TestServeShutsDownGracefully(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 0)
	inHandler, release := make(chan struct{}), make(chan struct{})
	w.fail = func() bool { // runs inside the handler's transaction
		close(inHandler)
		<-release
		return false
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- w.serve(ctx, ln) }()

	id, _, body := orderEvent(100)
	type answer struct {
		code int
		body string
	}
	answered := make(chan answer, 1)
	go func() {
		req := signedRequest(t, url+"/webhook", testSecret, id, "order.created", body, time.Now())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, strings.TrimSpace(string(b))}
	}()
	select {
	case <-inHandler:
	case <-time.After(5 * time.Second):
		t.Fatal("the delivery did not reach the handler")
	}

	cancel() // SIGINT
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-served:
		t.Fatalf("serve returned %v with a request in flight", err)
	default:
	}
	close(release)

	select {
	case a := <-answered:
		if a.code != http.StatusOK || a.body != `{"status":"processed"}` {
			t.Fatalf("the request in flight was answered %d %s, want 200 processed", a.code, a.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request in flight was not answered")
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not return after the shutdown")
	}
	if n := w.count(t, "reservations", "event_id = $1", id); n != 1 {
		t.Fatalf("%d reservations for the request in flight, want 1", n)
	}
	if conn, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		conn.Close()
		t.Fatal("the port still accepts connections after the shutdown")
	}
}

func TestParseConfig(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

	cfg, err := parseConfig([]string{"--db", "postgres://flag", "--secret", testSecret}, noEnv, io.Discard)
	if want := (config{DB: "postgres://flag", Addr: "127.0.0.1:8081", Secret: testSecret, Schema: "public"}); err != nil || cfg != want {
		t.Errorf("defaults: %+v, %v; want %+v", cfg, err, want)
	}
	cfg, err = parseConfig(nil, env(map[string]string{"DB_DSN": "postgres://env", "WEBHOOK_SECRET": testSecret}), io.Discard)
	if err != nil || cfg.DB != "postgres://env" || cfg.Secret != testSecret {
		t.Errorf("from the environment: %+v, %v", cfg, err)
	}
	cfg, err = parseConfig([]string{"--db", "postgres://flag", "--secret", "whsec_flag", "--addr", "127.0.0.1:9", "--fail-rate", "0.3", "--schema", "wh"},
		env(map[string]string{"DB_DSN": "postgres://env", "WEBHOOK_SECRET": testSecret}), io.Discard)
	if want := (config{DB: "postgres://flag", Addr: "127.0.0.1:9", Secret: "whsec_flag", FailRate: 0.3, Schema: "wh"}); err != nil || cfg != want {
		t.Errorf("flags over the environment: %+v, %v; want %+v", cfg, err, want)
	}

	for _, args := range [][]string{
		{"--secret", testSecret},
		{"--db", "postgres://x"},
		{"--db", "postgres://x", "--secret", testSecret, "--fail-rate", "1.5"},
		{"--db", "postgres://x", "--secret", testSecret, "--fail-rate", "-0.1"},
		{"--db", "postgres://x", "--secret", testSecret, "--fail-rate", "NaN"},
		{"--db", "postgres://x", "--secret", testSecret, "--addr", ""},
		{"--db", "postgres://x", "--secret", testSecret, "extra"},
	} {
		if _, err := parseConfig(args, noEnv, io.Discard); err == nil {
			t.Errorf("parseConfig(%q) succeeded", args)
		}
	}

	var usage bytes.Buffer
	_, err = parseConfig([]string{"-h"}, env(map[string]string{"DB_DSN": "postgres://u:hunter2@db/x", "WEBHOOK_SECRET": testSecret}), &usage)
	if !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(usage.String(), "--fail-rate") || strings.Contains(usage.String(), "hunter2") || strings.Contains(usage.String(), testSecret) {
		t.Errorf("usage text:\n%s", usage.String())
	}
}

// A secret the inbox refuses stops the service at start, and the error does
// not quote it.
func TestShortSecretIsRefusedWithoutBeingQuoted(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	const short = "tooshort-secret"
	_, err := newService(context.Background(), config{DB: pgtest.URL(), Schema: schema, Secret: short, Addr: addrDefault}, testlog.Discard())
	if err == nil {
		t.Fatal("newService accepted a 15-byte secret")
	}
	if strings.Contains(err.Error(), short) {
		t.Fatalf("the error quotes the secret: %v", err)
	}
}
