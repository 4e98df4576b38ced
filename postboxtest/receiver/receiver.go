// Package receiver is a webhook endpoint for tests: a real HTTP server on
// 127.0.0.1 that checks the Standard Webhooks signature with its own code
// (independent of package signature), records every accepted delivery and
// answers as the test tells it to.
package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Delivery is one request the receiver accepted.
type Delivery struct {
	ID            string
	Timestamp     int64
	EventType     string
	AggregateType string
	AggregateID   string
	Body          []byte
	Header        http.Header
	At            time.Time
}

// Respond decides the answer to a verified request; n counts the requests
// for this id so far, starting at 1. It returns the status code, 0 for 200,
// or Answered when it wrote the answer itself (or hijacked the connection).
type Respond func(w http.ResponseWriter, r *http.Request, d Delivery, n int) int

// Answered is returned by a Respond that answered the request itself.
const Answered = -1

// Receiver is a test webhook endpoint.
type Receiver struct {
	URL    string
	Server *httptest.Server

	key     []byte
	respond Respond

	mu        sync.Mutex
	attempts  map[string]int
	accepted  []Delivery
	badSigs   int
	arrivals  chan struct{}
	timestamp map[string][]int64
}

// New starts a receiver that verifies with the whsec_ secret. respond may be
// nil (always 200).
func New(t testing.TB, secret string, respond Respond) *Receiver {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatalf("receiver: secret: %v", err)
	}
	r := &Receiver{key: key, respond: respond, attempts: map[string]int{}, timestamp: map[string][]int64{},
		arrivals: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.Server.URL
	t.Cleanup(r.Server.Close)
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	id := req.Header.Get("webhook-id")
	ts := req.Header.Get("webhook-timestamp")
	if !r.verify(id, ts, body, req.Header.Get("webhook-signature")) || !json.Valid(body) {
		r.mu.Lock()
		r.badSigs++
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	sec, _ := strconv.ParseInt(ts, 10, 64)
	d := Delivery{ID: id, Timestamp: sec, Body: body, Header: req.Header.Clone(), At: time.Now(),
		EventType:     req.Header.Get("Postbox-Event-Type"),
		AggregateType: req.Header.Get("Postbox-Aggregate-Type"),
		AggregateID:   req.Header.Get("Postbox-Aggregate-Id")}
	r.mu.Lock()
	r.attempts[id]++
	n := r.attempts[id]
	r.timestamp[id] = append(r.timestamp[id], sec)
	r.mu.Unlock()

	code := http.StatusOK
	if r.respond != nil {
		if c := r.respond(w, req, d, n); c != 0 {
			code = c
		}
	}
	if code == Answered {
		return
	}
	if code < 200 || code > 299 {
		w.WriteHeader(code)
		return
	}
	r.mu.Lock()
	r.accepted = append(r.accepted, d)
	r.mu.Unlock()
	select {
	case r.arrivals <- struct{}{}:
	default:
	}
	w.WriteHeader(code)
}

// verify checks "v1,<base64 HMAC-SHA256(key, id.ts.body)>" among the
// space-separated signatures, and a timestamp within five minutes.
func (r *Receiver) verify(id, ts string, body []byte, header string) bool {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, r.key)
	fmt.Fprintf(mac, "%s.%s.", id, ts)
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(header) {
		version, b64, ok := strings.Cut(sig, ",")
		got, err := base64.StdEncoding.DecodeString(b64)
		if ok && version == "v1" && err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// Accepted returns a copy of the accepted deliveries in arrival order.
func (r *Receiver) Accepted() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.accepted...)
}

// Attempts is the number of verified requests for id.
func (r *Receiver) Attempts(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts[id]
}

// Timestamps are the webhook-timestamp values of every request for id.
func (r *Receiver) Timestamps(id string) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.timestamp[id]...)
}

// BadSignatures counts requests refused for their signature.
func (r *Receiver) BadSignatures() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.badSigs
}

// WaitAccepted waits until at least n deliveries were accepted, failing t
// after timeout.
func (r *Receiver) WaitAccepted(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		got := len(r.accepted)
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-r.arrivals:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("receiver: %d deliveries accepted after %v, want %d", got, timeout, n)
		}
	}
}
