package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
)

// The names of the headers the sink sets, canonical, so that they go into a
// request's header map as they are.
const (
	headerUserAgent     = "User-Agent"
	headerAuthorization = "Authorization"
)

// sinkHeaders is how many headers the sink sets besides the signature's:
// content type, user agent and four Postbox-*.
const sinkHeaders = 6

// ownHeader reports whether name, canonical, is a header the sink sets
// itself, which the message's own headers never replace: the signature's
// (sigNames) and the others of sinkHeaders.
func ownHeader(name string, sigNames *[3]string) bool {
	switch name {
	case postbox.HeaderContentType, headerUserAgent, postbox.HeaderEventType, postbox.HeaderAggregateType,
		postbox.HeaderAggregateID, postbox.HeaderAttempt, sigNames[0], sigNames[1], sigNames[2]:
		return true
	}
	return false
}

// target is the parsed endpoint of a Sink, made once in New.
type target struct {
	// url is without an empty port ("host:"), as http.NewRequest makes
	// it.
	url *url.URL
	// authorization is the static Authorization of every request: the
	// Basic credentials of the URL's user information, as http.Client.Do
	// would send them, or Config.Auth's Basic or Bearer; empty when there
	// is none.
	authorization string
}

// newTarget parses rawURL, which validate accepted.
func newTarget(rawURL string) (target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return target{}, err
	}
	u.Host = strings.TrimSuffix(u.Host, ":")
	t := target{url: u}
	if u.User != nil {
		password, _ := u.User.Password()
		t.authorization = basicAuthorization(u.User.Username(), password)
	}
	return t, nil
}

// newRequest builds the POST of m, signed with the current time, with
// authorization as its Authorization header unless empty. The message's
// own headers never replace one the sink sets, nor a static header
// (Config.Headers). A header of the message that could never be sent, or
// that TransportHeader refuses, a content type that is not a valid header
// value, and a payload over MaxMessageBytes make a sink.Permanent error:
// no retry can help.
func (s *Sink) newRequest(ctx context.Context, m *sink.Message, authorization string) (*http.Request, error) {
	if n := int64(len(m.Payload)); n > s.cfg.MaxMessageBytes {
		return nil, &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("webhook: event %s: the payload is %d bytes, over Config.MaxMessageBytes of %d", m.ID, n, s.cfg.MaxMessageBytes)}
	}
	contentType := m.ContentType
	if contentType == "" {
		contentType = postbox.ContentTypeJSON
	} else if !validHeaderValue(contentType) || strings.TrimSpace(contentType) == "" {
		return nil, &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("webhook: event %s: its content type is not a valid Content-Type header value", m.ID)}
	}
	for _, header := range [...]struct{ name, value string }{
		{postbox.HeaderEventType, m.EventType},
		{postbox.HeaderAggregateType, m.AggregateType},
		{postbox.HeaderAggregateID, m.AggregateID},
	} {
		if !validHeaderValue(header.value) {
			return nil, unsendable(header.name)
		}
	}
	// Sized for every header at once (the message's, the static ones, an
	// Authorization, the sink's and the signature's), with one array
	// behind the values set here (Sign brings its own): growing the map
	// and a slice per header were a large share of each delivery's
	// allocations.
	h := make(http.Header, len(m.Headers)+len(s.headers)+1+sinkHeaders+len(s.sigNames)+1)
	values := make([]string, 0, len(m.Headers)+len(s.headers)+1+sinkHeaders)
	set := func(name, value string) {
		values = append(values, value)
		n := len(values)
		h[name] = values[n-1 : n : n]
	}
	for name, value := range m.Headers {
		canonical := canonicalName(name)
		if ownHeader(canonical, &s.sigNames) {
			continue
		}
		if _, static := s.headers[canonical]; static {
			continue
		}
		if !validHeaderName(name) || !validHeaderValue(value) {
			return nil, unsendable(name)
		}
		if TransportHeader(canonical) {
			return nil, &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("webhook: event %s: header %s is refused: an event's headers cannot set credentials, proxy or hop-by-hop headers, nor the request's framing", m.ID, canonical)}
		}
		set(canonical, value)
	}
	for name, value := range s.headers {
		set(name, value)
	}
	if authorization != "" {
		set(headerAuthorization, authorization)
	}
	set(postbox.HeaderContentType, contentType)
	set(headerUserAgent, s.cfg.UserAgent)
	set(postbox.HeaderEventType, m.EventType)
	set(postbox.HeaderAggregateType, m.AggregateType)
	set(postbox.HeaderAggregateID, m.AggregateID)
	set(postbox.HeaderAttempt, strconv.Itoa(m.Attempt))
	if err := s.signer.Sign(h, m.ID.String(), s.now(), m.Payload); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	req := &http.Request{
		Method:     http.MethodPost,
		URL:        s.target.url, // shared: a RoundTripper must not modify a request
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       s.target.url.Host,
	}
	setBody(req, m.Payload)
	return req.WithContext(ctx), nil
}

// TransportHeader reports whether an event may not set the header of
// canonical name (http.CanonicalHeaderKey): a request carrying it is
// refused. They are the credentials (Authorization, Cookie, and Set-Cookie,
// which has no place in a request), every Proxy-* header, the hop-by-hop
// headers of RFC 9110 (Connection, Keep-Alive, TE, Trailer,
// Transfer-Encoding, Upgrade, and Http2-Settings), those that frame or
// encode the request (Host, Content-Length, Content-Encoding, Expect), and
// those through which a partner's proxies tell where a request came from
// (Forwarded, X-Forwarded-*, X-Real-Ip), which an endpoint may trust. The
// sink's own headers (Content-Type, User-Agent, the Postbox-* and the
// signature's) are never replaced by an event's and need no refusal.
func TransportHeader(canonical string) bool {
	switch canonical {
	case "Authorization", "Cookie", "Set-Cookie", "Connection", "Keep-Alive", "Te", "Trailer",
		"Transfer-Encoding", "Upgrade", "Http2-Settings", "Host", "Content-Length", "Content-Encoding",
		"Expect", "Forwarded", "X-Real-Ip":
		return true
	}
	return strings.HasPrefix(canonical, "Proxy-") || strings.HasPrefix(canonical, "X-Forwarded-")
}

// canonicalName returns the canonical form of a message header's name, as
// http.CanonicalHeaderKey does, without allocating for the trace context
// headers postbox records (W3C names, lower case).
func canonicalName(name string) string {
	switch name {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	}
	return http.CanonicalHeaderKey(name)
}

// unsendable is the error of a header that can never be sent.
func unsendable(name string) error {
	return &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("webhook: header %q has an invalid name or value", name)}
}

// setBody sets payload as the body of req as http.NewRequest does, GetBody
// included (the transport resends a request on a fresh connection when a
// reused one turned out closed). The body is an io.NopCloser of a
// bytes.Reader, which the transport knows does not block: it then writes
// the headers and a small body at once.
func setBody(req *http.Request, payload []byte) {
	if len(payload) == 0 {
		req.Body = http.NoBody
		req.GetBody = noBody
		return
	}
	req.ContentLength = int64(len(payload))
	req.Body = io.NopCloser(bytes.NewReader(payload))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(payload)), nil }
}

func noBody() (io.ReadCloser, error) { return http.NoBody, nil }

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !isTokenChar(c) {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v is free of control characters other
// than tab.
func validHeaderValue(v string) bool {
	for _, c := range []byte(v) {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
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
