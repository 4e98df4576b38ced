package webhook

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/postbox-go/postbox/sink"
)

// requestHeaders is how many headers the sink sets on a request: content
// type, user agent, four Postbox-* and up to three of the signature.
const requestHeaders = 9

// newRequest builds the POST of m, signed with the current time. Headers the
// sink sets are set after the message's own, so they always win. A header
// that could never be sent makes a sink.Permanent error: no retry can help.
func (s *Sink) newRequest(ctx context.Context, m *sink.Message) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(m.Payload))
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	// Sized for every header at once: growing the map as they are set
	// was a large share of each delivery's allocations.
	h := make(http.Header, len(m.Headers)+requestHeaders)
	req.Header = h
	for name, value := range m.Headers {
		h.Set(name, value)
	}
	h.Set(sink.HeaderContentType, sink.ContentTypeJSON)
	h.Set("User-Agent", s.cfg.UserAgent)
	h.Set(sink.HeaderEventType, m.EventType)
	h.Set(sink.HeaderAggregateType, m.AggregateType)
	h.Set(sink.HeaderAggregateID, m.AggregateID)
	h.Set(sink.HeaderAttempt, strconv.Itoa(m.Attempt))
	if err := s.signer.Sign(h, m.ID.String(), s.now(), m.Payload); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	for name, values := range h {
		if !validHeader(name, values) {
			return nil, &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("webhook: header %q has an invalid name or value", name)}
		}
	}
	return req, nil
}

// validHeader reports whether a header can be sent: its name an RFC 9110
// token, its values free of control characters other than tab.
func validHeader(name string, values []string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !isTokenChar(c) {
			return false
		}
	}
	for _, v := range values {
		for _, c := range []byte(v) {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return false
			}
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
