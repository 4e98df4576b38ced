package webhook

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/postbox-go/postbox/sink"
)

// snippetLen is how much of a response body an error quotes.
const snippetLen = 200

// readAnswer reads at most MaxResponseBody bytes of resp's body, so that a
// connection whose answer was fully read is reused, closes it, and turns the
// status into Publish's result. Only a failure's body is quoted; a body the
// response says is empty is not read.
func (s *Sink) readAnswer(resp *http.Response) error {
	if ok(resp.StatusCode) {
		if resp.Body != http.NoBody && resp.ContentLength != 0 {
			io.CopyN(io.Discard, resp.Body, s.cfg.MaxResponseBody)
		}
		resp.Body.Close()
		return nil
	}
	snippet := make([]byte, min(snippetLen, s.cfg.MaxResponseBody))
	n, _ := io.ReadFull(resp.Body, snippet)
	io.CopyN(io.Discard, resp.Body, s.cfg.MaxResponseBody-int64(n))
	resp.Body.Close()
	return classify(resp, snippet[:n], s.now(), s.cfg.RetryAfterMax)
}

// classify applies the webhook wire format's response rules; a body read
// failure does not matter, the status alone decides.
func classify(resp *http.Response, snippet []byte, now time.Time, retryAfterMax time.Duration) error {
	code := resp.StatusCode
	if ok(code) {
		return nil
	}
	reason := http.StatusText(code)
	if code >= 300 && code < 400 {
		reason += " (redirects are not followed)"
	}
	e := &sink.Error{Kind: sink.Rejected, StatusCode: code, Err: fmt.Errorf("webhook: %s: response %q", reason, snippet)}
	switch {
	case code == http.StatusGone, code == http.StatusRequestEntityTooLarge, code == http.StatusRequestHeaderFieldsTooLarge:
		// Gone for good, or this message is too large for the
		// endpoint: sending it again cannot help.
		e.Kind = sink.Permanent
	case code == http.StatusBadGateway || code == http.StatusGatewayTimeout:
		// A gateway in front of the endpoint (a load balancer, a
		// reverse proxy) could not get an answer from it: every message
		// would fail alike. The relay still takes a run of them, not
		// one, for an outage (see relay's outage rules).
		e.Kind = sink.Unavailable
		e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now, retryAfterMax)
	case code == http.StatusTooManyRequests || code >= 500:
		e.Kind = sink.Retryable
		e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now, retryAfterMax)
	}
	return e
}

// ok reports whether a status says the message was delivered: 2xx.
func ok(code int) bool { return code >= 200 && code < 300 }

// parseRetryAfter reads a Retry-After value, delay-seconds or an HTTP-date,
// capped at limit. Unparsable values and past dates give 0: no wish.
func parseRetryAfter(v string, now time.Time, limit time.Duration) time.Duration {
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs > int64(limit/time.Second) {
			return limit
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), limit)
}
