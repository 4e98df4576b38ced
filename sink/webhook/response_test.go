package webhook_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
)

func TestResponseStatus(t *testing.T) {
	for _, tc := range []struct {
		code int
		ok   bool
		kind sink.Kind
	}{
		{200, true, 0},
		{201, true, 0},
		{202, true, 0},
		{204, true, 0},
		{410, false, sink.Permanent},
		{429, false, sink.Retryable},
		{500, false, sink.Retryable},
		{502, false, sink.Unavailable}, // a gateway: the endpoint behind it is unreachable
		{503, false, sink.Retryable},
		{504, false, sink.Unavailable},
		{400, false, sink.Rejected},
		{401, false, sink.Rejected},
		{403, false, sink.Rejected},
		{404, false, sink.Rejected},
		{409, false, sink.Rejected},
		{422, false, sink.Rejected},
		{300, false, sink.Rejected},
		{304, false, sink.Rejected},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.code)
				fmt.Fprintf(w, "answer-%d", tc.code)
			})
			err := newSink(t, webhook.Config{URL: e.URL}).Publish(t.Context(), newMessage())
			if tc.ok {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			kind, retryAfter, code := sink.Classify(err)
			if err == nil || kind != tc.kind || code != tc.code || retryAfter != 0 {
				t.Fatalf("got %v (kind %v, status %d, retry after %v), want kind %v", err, kind, code, retryAfter, tc.kind)
			}
			if tc.code != 304 && !strings.Contains(err.Error(), fmt.Sprintf("answer-%d", tc.code)) {
				t.Errorf("error %q does not quote the response", err)
			}
		})
	}
}

// 500 and 503 come from the endpoint itself, about this message: they
// count an attempt. 502 and 504 come from a gateway (a load balancer, a
// reverse proxy) that could not get an answer from the endpoint behind it:
// every message would fail alike, so they say the sink is unavailable, and
// keep their status and the start of their body for the relay's log.
func TestGatewayAnswersAreUnavailable(t *testing.T) {
	for code, want := range map[int]sink.Kind{
		http.StatusInternalServerError: sink.Retryable,
		http.StatusServiceUnavailable:  sink.Retryable,
		http.StatusBadGateway:          sink.Unavailable,
		http.StatusGatewayTimeout:      sink.Unavailable,
	} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(code)
				fmt.Fprint(w, "<html>upstream</html>")
			})
			err := newSink(t, webhook.Config{URL: e.URL}).Publish(t.Context(), newMessage())
			kind, after, status := sink.Classify(err)
			if kind != want || status != code || after != 7*time.Second || !strings.Contains(err.Error(), "upstream") {
				t.Fatalf("got %v (kind %v, status %d, retry after %v), want kind %v with the status, Retry-After and body",
					err, kind, status, after, want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name, value string
		want        time.Duration
	}{
		{"seconds", "120", 2 * time.Minute},
		{"zero", "0", 0},
		{"http-date", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"obsolete date form", now.Add(time.Minute).Format(time.RFC850), time.Minute},
		{"seconds over the cap", "3601", time.Hour},
		{"seconds overflowing", "99999999999999999999", 0},
		{"huge seconds", "9223372036854775807", time.Hour},
		{"date over the cap", now.Add(2 * time.Hour).Format(http.TimeFormat), time.Hour},
		{"past date", now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"negative", "-5", 0},
		{"fraction", "1.5", 0},
		{"garbage", "soon", 0},
		{"absent", "", 0},
	} {
		for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, code), func(t *testing.T) {
				e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
					if tc.value != "" {
						w.Header().Set("Retry-After", tc.value)
					}
					w.WriteHeader(code)
				})
				s := newSink(t, webhook.Config{URL: e.URL, RetryAfterMax: time.Hour})
				webhook.SetNow(s, func() time.Time { return now })
				kind, got, status := sink.Classify(s.Publish(t.Context(), newMessage()))
				if kind != sink.Retryable || status != code || got != tc.want {
					t.Fatalf("got %v, status %d, retry after %v; want retryable, %d, %v", kind, status, got, code, tc.want)
				}
			})
		}
	}
}

func TestRetryAfterIsIgnoredUnlessRetryable(t *testing.T) {
	for _, code := range []int{http.StatusGone, http.StatusBadRequest} {
		e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(code)
		})
		if _, after, _ := sink.Classify(newSink(t, webhook.Config{URL: e.URL}).Publish(t.Context(), newMessage())); after != 0 {
			t.Errorf("status %d: retry after %v, want 0", code, after)
		}
	}
}

func TestErrorQuotesAShortSnippet(t *testing.T) {
	secretLike := strings.Repeat("s", 300)
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, "line one\nline two\x00\x1b[31m red "+secretLike)
	})
	err := newSink(t, webhook.Config{URL: e.URL}).Publish(t.Context(), newMessage())
	if err == nil {
		t.Fatal("400 accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, `line one\nline two\x00\x1b[31m red sss`) {
		t.Errorf("error %q does not quote the start of the body", msg)
	}
	if strings.ContainsAny(msg, "\n\x00\x1b") || strings.Contains(msg, secretLike[:200]) {
		t.Errorf("error %q holds raw control characters or more than a snippet", msg)
	}
}
