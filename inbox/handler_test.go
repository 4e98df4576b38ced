package inbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/store"
)

func TestHandlerProcessesOnce(t *testing.T) {
	t.Parallel()
	custom, err := signature.ParseProfile("standard;prefix=acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []signature.Profile{{Scheme: signature.Standard}, {Scheme: signature.XSignature}, signature.Svix, custom} {
		t.Run(p.String(), func(t *testing.T) {
			f := newFixture(t, inbox.HandlerConfig{Scheme: p.Scheme, HeaderNames: p.Names})
			req, id := f.newRequest()
			if p.Names.Signature != "" && req.Header.Get(p.Names.Signature) == "" {
				t.Fatalf("the request is not signed under %s", p.Names.Signature)
			}
			body := payload(id)
			f.wantAnswer(req, http.StatusOK, "processed")
			f.wantAnswer(f.request(id.String(), body, time.Now()), http.StatusOK, "duplicate")
			if n := f.effectsOf(id); n != 1 {
				t.Fatalf("applied %d times, want once", n)
			}
			r, err := f.ib.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != store.StatusDone || r.EventType != "order.created" || r.AggregateType != "order" ||
				r.AggregateID != "42" || r.Signature == "" || len(r.Payload) == 0 {
				t.Fatalf("stored %+v, want the event with its hints, payload and signature", r)
			}
		})
	}
}

// TestHandlerRetryAfterFailure is the article's lost event over HTTP: the
// handler fails after the inbox insert, the sender retries, and the effect
// happens exactly once.
func TestHandlerRetryAfterFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inbox.HandlerConfig{})
	f.failures.Store(1)
	id := postbox.NewID()
	body := payload(id)

	f.wantAnswer(f.request(id.String(), body, time.Now()), http.StatusInternalServerError, "error")
	if n := f.effectsOf(id); n != 0 {
		t.Fatalf("failed delivery left %d business rows", n)
	}
	if logs := f.logs.String(); !strings.Contains(logs, internalDetail) || !strings.Contains(logs, id.String()) {
		t.Fatalf("the failure is not logged with its event id and error:\n%s", logs)
	}

	// The sender retries, signing afresh.
	f.wantAnswer(f.request(id.String(), body, time.Now()), http.StatusOK, "processed")
	f.wantAnswer(f.request(id.String(), body, time.Now()), http.StatusOK, "duplicate")
	if n := f.effectsOf(id); n != 1 {
		t.Fatalf("applied %d times, want once", n)
	}
}

func TestHandlerConcurrentCopies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inbox.HandlerConfig{})
	id := postbox.NewID()
	body := payload(id)
	const copies = 20
	answers := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range copies {
		req := f.request(id.String(), body, time.Now())
		wg.Go(func() {
			code, answer := f.send(req)
			mu.Lock()
			defer mu.Unlock()
			if code != http.StatusOK {
				t.Errorf("answer %d %s", code, answer)
			}
			answers[answer]++
		})
	}
	wg.Wait()
	if answers[`{"status":"processed"}`+"\n"] != 1 || answers[`{"status":"duplicate"}`+"\n"] != copies-1 {
		t.Fatalf("answers %v, want one processed, the rest duplicates", answers)
	}
	if n := f.effectsOf(id); n != 1 {
		t.Fatalf("applied %d times, want once", n)
	}
}

// TestHandlerRefusals: requests refused before processing; nothing is
// stored and Process is not called.
func TestHandlerRefusals(t *testing.T) {
	t.Parallel()
	big := append(append([]byte(`{"event_id":"`), bytes.Repeat([]byte("x"), inbox.MaxBodyBytesDefault)...), `"}`...)
	for _, tc := range []struct {
		name   string
		scheme signature.Scheme
		// build returns the request to send.
		build  func(f *fixture) *http.Request
		code   int
		status string
	}{
		{"replayed with an old timestamp", signature.Standard, func(f *fixture) *http.Request {
			id := postbox.NewID()
			return f.request(id.String(), payload(id), time.Now().Add(-signature.ToleranceDefault-time.Minute))
		}, http.StatusUnauthorized, "unauthorized"},
		{"timestamp in the future", signature.Standard, func(f *fixture) *http.Request {
			id := postbox.NewID()
			return f.request(id.String(), payload(id), time.Now().Add(signature.ToleranceDefault+time.Minute))
		}, http.StatusUnauthorized, "unauthorized"},
		{"re-sent under another id (standard)", signature.Standard, func(f *fixture) *http.Request {
			req, _ := f.newRequest()
			req.Header.Set("Webhook-Id", postbox.NewID().String())
			return req
		}, http.StatusUnauthorized, "unauthorized"},
		{"re-sent under another id (x-signature)", signature.XSignature, func(f *fixture) *http.Request {
			req, _ := f.newRequest()
			req.Header.Set("X-Event-Id", postbox.NewID().String())
			return req
		}, http.StatusUnauthorized, "unauthorized"},
		{"x-signature body without event_id", signature.XSignature, func(f *fixture) *http.Request {
			return f.request(postbox.NewID().String(), []byte(`{"order_id":42}`), time.Now())
		}, http.StatusUnauthorized, "unauthorized"},
		{"x-signature body not an object", signature.XSignature, func(f *fixture) *http.Request {
			return f.request(postbox.NewID().String(), []byte(`[1,2]`), time.Now())
		}, http.StatusUnauthorized, "unauthorized"},
		{"bad signature", signature.Standard, func(f *fixture) *http.Request {
			req, _ := f.newRequest()
			req.Header.Set("Webhook-Signature", "v1,"+strings.Repeat("A", 43)+"=")
			return req
		}, http.StatusUnauthorized, "unauthorized"},
		{"signed with another secret", signature.Standard, func(f *fixture) *http.Request {
			req, id := f.newRequest()
			other, err := signature.NewSigner(signature.Standard, strings.Repeat("o", 32))
			if err != nil {
				f.t.Fatal(err)
			}
			if err := other.Sign(req.Header, id.String(), time.Now(), payload(id)); err != nil {
				f.t.Fatal(err)
			}
			return req
		}, http.StatusUnauthorized, "unauthorized"},
		{"body changed after signing", signature.Standard, func(f *fixture) *http.Request {
			id := postbox.NewID()
			req := f.request(id.String(), payload(id), time.Now())
			forged := bytes.Replace(payload(id), []byte("9900"), []byte("9999"), 1)
			req.Body, req.ContentLength = readCloser(forged), int64(len(forged))
			return req
		}, http.StatusUnauthorized, "unauthorized"},
		{"a megabyte of event type replayed", signature.Standard, func(f *fixture) *http.Request {
			req, _ := f.newRequest()
			req.Header.Set(inbox.HeaderEventType, strings.Repeat("t", 1<<20))
			return req
		}, http.StatusBadRequest, "bad_request"},
		{"unsigned", signature.Standard, func(f *fixture) *http.Request {
			req, _ := f.newRequest()
			req.Header.Del("Webhook-Signature")
			return req
		}, http.StatusUnauthorized, "unauthorized"},
		{"oversize body", signature.Standard, func(f *fixture) *http.Request {
			return f.request(postbox.NewID().String(), big, time.Now())
		}, http.StatusRequestEntityTooLarge, "too_large"},
		{"oversize body without length", signature.Standard, func(f *fixture) *http.Request {
			req := f.request(postbox.NewID().String(), big, time.Now())
			req.Body, req.ContentLength = readCloser(big), -1 // sent chunked
			return req
		}, http.StatusRequestEntityTooLarge, "too_large"},
		{"malformed JSON under a valid signature", signature.Standard, func(f *fixture) *http.Request {
			return f.request(postbox.NewID().String(), []byte(`{"order_id": 42,`), time.Now())
		}, http.StatusBadRequest, "bad_request"},
		{"malformed JSON under a valid signature (x-signature)", signature.XSignature, func(f *fixture) *http.Request {
			return f.request(postbox.NewID().String(), []byte(`{"event_id": "`), time.Now())
		}, http.StatusBadRequest, "bad_request"},
		{"id not a UUID", signature.Standard, func(f *fixture) *http.Request {
			return f.request("msg_p5jXN8AQM9LWM0D4loKWxJek", []byte(`{}`), time.Now())
		}, http.StatusBadRequest, "bad_request"},
		{"metadata not signed", signature.Standard, func(f *fixture) *http.Request {
			req, _ := f.newRequest()
			req.Header.Del(inbox.HeaderMetadataSignature)
			return req
		}, http.StatusBadRequest, "bad_request"},
		{"event type changed after signing", signature.Standard, func(f *fixture) *http.Request {
			req, _ := f.newRequest()
			req.Header.Set(inbox.HeaderEventType, "order.cancelled")
			return req
		}, http.StatusUnauthorized, "unauthorized"},
		{"sequence added after signing (x-signature)", signature.XSignature, func(f *fixture) *http.Request {
			req, _ := f.newRequest()
			req.Header.Set(inbox.HeaderSequence, "1")
			return req
		}, http.StatusUnauthorized, "unauthorized"},
		{"event type twice", signature.Standard, func(f *fixture) *http.Request {
			req, _ := f.newRequest()
			req.Header.Add(inbox.HeaderEventType, "order.cancelled")
			return req
		}, http.StatusBadRequest, "bad_request"},
		{"sequence not a number", signature.Standard, func(f *fixture) *http.Request {
			id := postbox.NewID()
			return f.request(id.String(), payload(id), time.Now(), inbox.HeaderSequence, "two")
		}, http.StatusBadRequest, "bad_request"},
		{"not a POST", signature.Standard, func(f *fixture) *http.Request {
			req, _ := f.newRequest()
			req.Method = http.MethodPut
			return req
		}, http.StatusMethodNotAllowed, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, inbox.HandlerConfig{Scheme: tc.scheme})
			f.wantAnswer(tc.build(f), tc.code, tc.status)
			if n := f.calls.Load(); n != 0 {
				t.Fatalf("Process called %d times", n)
			}
			f.wantNothingStored()
		})
	}
}

func readCloser(b []byte) *bodyReader { return &bodyReader{Reader: bytes.NewReader(b)} }

type bodyReader struct{ *bytes.Reader }

func (*bodyReader) Close() error { return nil }

func TestHandlerMethodNotAllowedSaysAllow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inbox.HandlerConfig{})
	resp, err := f.srv.Client().Get(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
		t.Fatalf("GET: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestHandlerSecretRotation(t *testing.T) {
	t.Parallel()
	oldSecret, newSecret := strings.Repeat("o", 32), strings.Repeat("n", 32)
	f := newFixture(t, inbox.HandlerConfig{Secrets: []string{newSecret, oldSecret}})
	for _, secrets := range [][]string{{oldSecret}, {newSecret}, {oldSecret, newSecret}} {
		signer, err := signature.NewSigner(signature.Standard, secrets...)
		if err != nil {
			t.Fatal(err)
		}
		id := postbox.NewID()
		req := f.request(id.String(), payload(id), time.Now())
		if err := signer.Sign(req.Header, id.String(), time.Now(), payload(id)); err != nil {
			t.Fatal(err)
		}
		f.wantAnswer(req, http.StatusOK, "processed")
	}
}

func TestHandlerAllowedNetworks(t *testing.T) {
	t.Parallel()
	elsewhere := newFixture(t, inbox.HandlerConfig{AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	req, _ := elsewhere.newRequest()
	elsewhere.wantAnswer(req, http.StatusForbidden, "forbidden")
	if n := elsewhere.calls.Load(); n != 0 {
		t.Fatalf("Process called %d times", n)
	}
	elsewhere.wantNothingStored()

	loopback := newFixture(t, inbox.HandlerConfig{AllowedNetworks: []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.0/8"),
	}})
	req, _ = loopback.newRequest()
	loopback.wantAnswer(req, http.StatusOK, "processed")
}

func TestHandlerOrdering(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inbox.HandlerConfig{RetryAfter: 1500 * time.Millisecond})
	send := func(id uuid.UUID, seq string) (*http.Response, string) {
		req := f.request(id.String(), payload(id), time.Now(), inbox.HeaderSequence, seq)
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp, resp.Header.Get("Retry-After")
	}
	first, second := postbox.NewID(), postbox.NewID()
	if resp, retryAfter := send(second, "2"); resp.StatusCode != http.StatusServiceUnavailable || retryAfter != "2" {
		t.Fatalf("event 2 before event 1: %d, Retry-After %q; want 503 after 2 seconds", resp.StatusCode, retryAfter)
	}
	if n := f.effectsOf(second); n != 0 {
		t.Fatalf("out-of-order event applied")
	}
	if resp, _ := send(first, "1"); resp.StatusCode != http.StatusOK {
		t.Fatalf("event 1: %d", resp.StatusCode)
	}
	if resp, _ := send(second, "2"); resp.StatusCode != http.StatusOK {
		t.Fatalf("event 2 retried: %d", resp.StatusCode)
	}
	if resp, _ := send(postbox.NewID(), "2"); resp.StatusCode != http.StatusConflict {
		t.Fatalf("another event numbered 2: %d, want 409", resp.StatusCode)
	}
}

// TestHandlerClaimFlow: a Process function doing external work under a
// claim; a delivery arriving meanwhile is asked to retry, one arriving
// after is a duplicate.
func TestHandlerClaimFlow(t *testing.T) {
	t.Parallel()
	working, release := make(chan struct{}), make(chan struct{})
	var f *fixture
	f = newFixture(t, inbox.HandlerConfig{Process: func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
		c, err := f.ib.Claim(ctx, ev, time.Minute)
		if err != nil {
			return 0, err
		}
		close(working)
		<-release // the external call
		return inbox.Processed, f.ib.Complete(ctx, c, f.apply)
	}})
	id := postbox.NewID()
	done := make(chan struct{})
	go func() {
		defer close(done)
		code, answer := f.send(f.request(id.String(), payload(id), time.Now()))
		if code != http.StatusOK {
			t.Errorf("claimed delivery: %d %s", code, answer)
		}
	}()
	<-working
	f.wantAnswer(f.request(id.String(), payload(id), time.Now()), http.StatusServiceUnavailable, "in_progress")
	close(release)
	<-done
	f.wantAnswer(f.request(id.String(), payload(id), time.Now()), http.StatusOK, "duplicate")
	if n := f.effectsOf(id); n != 1 {
		t.Fatalf("applied %d times, want once", n)
	}
}

func TestHandlerKeepsSecretsAndErrorsPrivate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inbox.HandlerConfig{})
	f.failures.Store(1)
	req, _ := f.newRequest()
	code, body := f.send(req)
	if code != http.StatusInternalServerError || strings.Contains(body, internalDetail) {
		t.Fatalf("failure answered %d %q", code, body)
	}
	bad, _ := f.newRequest()
	bad.Header.Set("Webhook-Signature", "v1,"+strings.Repeat("A", 43)+"=")
	f.wantAnswer(bad, http.StatusUnauthorized, "unauthorized")

	logs := f.logs.String()
	for _, secret := range []string{standardSecret, strings.TrimPrefix(standardSecret, "whsec_"), "order_id", req.Header.Get("Webhook-Signature")} {
		if strings.Contains(logs, secret) {
			t.Fatalf("logs reveal %q:\n%s", secret, logs)
		}
	}
}

func TestNewHandlerRefusesBadConfig(t *testing.T) {
	process := func(context.Context, *inbox.Event) (inbox.Outcome, error) { return inbox.Processed, nil }
	short := "too-short-a-secret"
	for _, tc := range []struct {
		name string
		cfg  inbox.HandlerConfig
		want string
	}{
		{"no Process", inbox.HandlerConfig{Secrets: []string{xSecret}}, "Process"},
		{"no secret", inbox.HandlerConfig{Process: process}, "Secrets"},
		{"short secret", inbox.HandlerConfig{Process: process, Secrets: []string{short}}, "Secrets"},
		{"negative body limit", inbox.HandlerConfig{Process: process, Secrets: []string{xSecret}, MaxBodyBytes: -1}, "MaxBodyBytes"},
		{"negative tolerance", inbox.HandlerConfig{Process: process, Secrets: []string{xSecret}, Tolerance: -time.Second}, "Tolerance"},
		{"negative retry", inbox.HandlerConfig{Process: process, Secrets: []string{xSecret}, RetryAfter: -time.Second}, "RetryAfter"},
		{"invalid network", inbox.HandlerConfig{Process: process, Secrets: []string{xSecret}, AllowedNetworks: []netip.Prefix{{}}}, "AllowedNetworks[0]"},
		{"unknown scheme", inbox.HandlerConfig{Process: process, Secrets: []string{xSecret}, Scheme: 7}, "Scheme"},
	} {
		_, err := inbox.NewHandler(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %s", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), short) {
			t.Errorf("%s: error reveals the secret: %v", tc.name, err)
		}
	}
}

// TestHandlerAnswersProcessErrors maps the errors of Process to answers.
func TestHandlerAnswersProcessErrors(t *testing.T) {
	signer, err := signature.NewSigner(signature.Standard, standardSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err    error
		code   int
		status string
	}{
		{inbox.ErrDuplicate, http.StatusOK, "duplicate"},
		{inbox.ErrInvalidEvent, http.StatusBadRequest, "bad_request"},
		{inbox.ErrSequenceApplied, http.StatusConflict, "sequence_conflict"},
		{inbox.ErrOutOfOrder, http.StatusServiceUnavailable, "out_of_order"},
		{inbox.ErrInProgress, http.StatusServiceUnavailable, "in_progress"},
		{inbox.ErrLeaseLost, http.StatusInternalServerError, "error"},
		{errors.New("anything else"), http.StatusInternalServerError, "error"},
	} {
		h, err := inbox.NewHandler(inbox.HandlerConfig{
			Secrets: []string{standardSecret},
			Logger:  testlog.Discard(),
			Process: func(context.Context, *inbox.Event) (inbox.Outcome, error) {
				return 0, fmt.Errorf("wrapped: %w", tc.err)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		id := postbox.NewID()
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(payload(id)))
		if err := signer.Sign(req.Header, id.String(), time.Now(), payload(id)); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if want := `{"status":"` + tc.status + `"}` + "\n"; rec.Code != tc.code || rec.Body.String() != want {
			t.Errorf("%v: answered %d %q, want %d %q", tc.err, rec.Code, rec.Body, tc.code, want)
		}
	}
}
