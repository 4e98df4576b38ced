package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
)

var (
	testKey    = []byte("key-of-the-webhook-tests-32bytes")
	testSecret = "whsec_" + base64.StdEncoding.EncodeToString(testKey)
	// rawSecret is used as its own bytes.
	rawSecret = "raw-secret-of-the-webhook-tests"
)

// request is what an endpoint received.
type request struct {
	header http.Header
	body   []byte
}

// endpoint is an httptest server that records every request, then lets
// respond answer it (nil: 204 No Content). It counts the connections
// opened to it.
type endpoint struct {
	*httptest.Server
	conns    atomic.Int32
	mu       sync.Mutex
	requests []request
}

func newEndpoint(t *testing.T, respond http.HandlerFunc) *endpoint {
	t.Helper()
	e := &endpoint{}
	e.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("endpoint: reading body: %v", err)
		}
		if r.Method != http.MethodPost {
			t.Errorf("endpoint: method %s, want POST", r.Method)
		}
		e.mu.Lock()
		e.requests = append(e.requests, request{header: r.Header.Clone(), body: body})
		e.mu.Unlock()
		if respond == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		respond(w, r)
	}))
	e.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			e.conns.Add(1)
		}
	}
	e.Start()
	t.Cleanup(e.Close)
	return e
}

func (e *endpoint) received() []request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]request(nil), e.requests...)
}

// newSink returns a sink for c, with the test secret when c has none.
func newSink(t *testing.T, c webhook.Config) *webhook.Sink {
	t.Helper()
	if c.Secrets == nil {
		c.Secrets = []string{testSecret}
	}
	s, err := webhook.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newMessage() *sink.Message {
	return &sink.Message{
		Event: postbox.Event{
			ID:            uuid.MustParse("0192d2a4-7c1e-7b3a-9f00-5d2b8c1e4a10"),
			EventType:     "order.created",
			AggregateType: "order",
			AggregateID:   "42",
			Payload:       []byte(`{"order_id": 42,  "total":"9.90" , "note":"caf\u00e9"}`),
			Headers: map[string]string{
				"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				"tracestate":  "congo=t61rcWkgMzE",
			},
		},
		Attempt: 1,
	}
}

// standardSignature and xSignature compute signatures with crypto/hmac
// directly, independently of package signature.
func standardSignature(key []byte, id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + timestamp + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func xSignature(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func assertHeaders(t *testing.T, got http.Header, want map[string]string) {
	t.Helper()
	for name, value := range want {
		if v := got.Values(name); len(v) != 1 || v[0] != value {
			t.Errorf("%s: %q, want %q", name, v, value)
		}
	}
}

func TestPublishSignsStandard(t *testing.T) {
	e := newEndpoint(t, nil)
	s := newSink(t, webhook.Config{URL: e.URL + "/hooks/orders"})
	at := time.Unix(1767225600, 0)
	webhook.SetNow(s, func() time.Time { return at })
	m := newMessage()
	if err := s.Publish(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	got := e.received()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	r := got[0]
	if string(r.body) != string(m.Payload) {
		t.Errorf("body %q, want exactly %q", r.body, m.Payload)
	}
	assertHeaders(t, r.header, map[string]string{
		"Content-Type":           "application/json",
		"User-Agent":             webhook.UserAgentDefault,
		"Content-Length":         strconv.Itoa(len(m.Payload)),
		"Webhook-Id":             m.ID.String(),
		"Webhook-Timestamp":      "1767225600",
		"Webhook-Signature":      standardSignature(testKey, m.ID.String(), "1767225600", m.Payload),
		"Postbox-Event-Type":     "order.created",
		"Postbox-Aggregate-Type": "order",
		"Postbox-Aggregate-Id":   "42",
		"Postbox-Attempt":        "1",
		"Traceparent":            m.Headers["traceparent"],
		"Tracestate":             m.Headers["tracestate"],
	})
}

func TestPublishSignsXSignature(t *testing.T) {
	e := newEndpoint(t, nil)
	s := newSink(t, webhook.Config{URL: e.URL, Scheme: signature.XSignature, Secrets: []string{rawSecret}})
	at := time.Unix(1767225600, 0)
	webhook.SetNow(s, func() time.Time { return at })
	m := newMessage()
	if err := s.Publish(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	r := e.received()[0]
	assertHeaders(t, r.header, map[string]string{
		"X-Event-Id":   m.ID.String(),
		"X-Timestamp":  "1767225600",
		"X-Signature":  xSignature(rawSecret, "1767225600", m.Payload),
		"Content-Type": "application/json",
	})
	if r.header.Get("Webhook-Signature") != "" {
		t.Error("x-signature sink also sent a Standard Webhooks signature")
	}
}

func TestPublishSignsWithEverySecret(t *testing.T) {
	e := newEndpoint(t, nil)
	s := newSink(t, webhook.Config{URL: e.URL, Secrets: []string{testSecret, rawSecret}})
	m := newMessage()
	if err := s.Publish(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	h := e.received()[0].header
	ts := h.Get("Webhook-Timestamp")
	want := standardSignature(testKey, m.ID.String(), ts, m.Payload) + " " + standardSignature([]byte(rawSecret), m.ID.String(), ts, m.Payload)
	if got := h.Get("Webhook-Signature"); got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
}

func TestEachAttemptIsSignedAfresh(t *testing.T) {
	e := newEndpoint(t, nil)
	s := newSink(t, webhook.Config{URL: e.URL})
	clock := []time.Time{time.Unix(1767225600, 0), time.Unix(1767225690, 0)}
	var now time.Time
	webhook.SetNow(s, func() time.Time { return now })
	m := newMessage()
	for i, at := range clock {
		now = at
		m.Attempt = i + 1
		if err := s.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	got := e.received()
	if len(got) != len(clock) {
		t.Fatalf("%d requests, want %d", len(got), len(clock))
	}
	for i, r := range got {
		ts := strconv.FormatInt(clock[i].Unix(), 10)
		assertHeaders(t, r.header, map[string]string{
			"Webhook-Id":        m.ID.String(),
			"Webhook-Timestamp": ts,
			"Webhook-Signature": standardSignature(testKey, m.ID.String(), ts, m.Payload),
			"Postbox-Attempt":   strconv.Itoa(i + 1),
		})
	}
}

func TestMessageHeadersDoNotOverrideTheSinks(t *testing.T) {
	e := newEndpoint(t, nil)
	s := newSink(t, webhook.Config{URL: e.URL})
	m := newMessage()
	m.Headers = map[string]string{
		"webhook-id":         "forged",
		"Webhook-Timestamp":  "1",
		"WEBHOOK-SIGNATURE":  "v1,forged",
		"content-type":       "text/plain",
		"user-agent":         "forged",
		"postbox-event-type": "forged",
		"postbox-attempt":    "99",
		// Never sent, so no reason to refuse the message.
		"postbox-aggregate-id": "forged\r\nX-Forged: 1",
		"X-Custom":             "kept",
	}
	if err := s.Publish(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	h := e.received()[0].header
	ts := h.Get("Webhook-Timestamp")
	if ts == "1" {
		t.Fatal("the message's timestamp header replaced the sink's")
	}
	assertHeaders(t, h, map[string]string{
		"Webhook-Id":           m.ID.String(),
		"Webhook-Signature":    standardSignature(testKey, m.ID.String(), ts, m.Payload),
		"Content-Type":         "application/json",
		"User-Agent":           webhook.UserAgentDefault,
		"Postbox-Event-Type":   m.EventType,
		"Postbox-Attempt":      "1",
		"Postbox-Aggregate-Id": m.AggregateID,
		"X-Custom":             "kept",
	})
}

func TestUnsendableHeaderIsPermanent(t *testing.T) {
	e := newEndpoint(t, nil)
	s := newSink(t, webhook.Config{URL: e.URL})
	for name, edit := range map[string]func(*sink.Message){
		"space in name":      func(m *sink.Message) { m.Headers = map[string]string{"bad name": "v"} },
		"newline in value":   func(m *sink.Message) { m.Headers = map[string]string{"X-Injected": "v\r\nX-Forged: 1"} },
		"newline in type":    func(m *sink.Message) { m.EventType = "order.created\n" },
		"NUL in aggregate":   func(m *sink.Message) { m.AggregateID = "4\x002" },
		"empty header name":  func(m *sink.Message) { m.Headers = map[string]string{"": "v"} },
		"colon in the name":  func(m *sink.Message) { m.Headers = map[string]string{"X-A:": "v"} },
		"non-ASCII in name":  func(m *sink.Message) { m.Headers = map[string]string{"X-Café": "v"} },
		"DEL in the value":   func(m *sink.Message) { m.Headers = map[string]string{"X-A": "v\x7f"} },
		"tab in value is ok": nil,
	} {
		t.Run(name, func(t *testing.T) {
			m := newMessage()
			if edit == nil {
				m.Headers = map[string]string{"X-A": "v\tw"}
				if err := s.Publish(t.Context(), m); err != nil {
					t.Fatal(err)
				}
				return
			}
			edit(m)
			before := len(e.received())
			err := s.Publish(t.Context(), m)
			if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Permanent {
				t.Fatalf("got %v, want a permanent error", err)
			}
			if len(e.received()) != before {
				t.Fatal("the request was sent")
			}
		})
	}
}
