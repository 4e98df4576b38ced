package webhook

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"
)

// NewClient returns the client a Config without one gets: keep-alive
// connections, enough of them idle for maxConcurrency requests at once, and
// every phase of a request bounded by timeout. A process that opens many
// sinks to the same hosts (postbox relay --sources) gives them one
// (Config.Client), so that they share its connections.
func NewClient(timeout time.Duration, maxConcurrency int) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          maxConcurrency,
		MaxIdleConnsPerHost:   maxConcurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}}
}

// withoutRedirects returns a copy of c that never follows a redirect: the 3xx
// response itself comes back, and counts as a failure.
func withoutRedirects(c *http.Client) *http.Client {
	copied := *c
	copied.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &copied
}

// directTransport returns the transport of c when sending a request through
// it directly is what c.Do would do for the Sink: c follows no redirect
// (withoutRedirects), the Sink sets the Basic credentials of the URL's user
// information itself (target.authorization) and bounds each request with
// its context. A client with a cookie jar or its own Timeout keeps c.Do
// (nil), for their semantics. Sending directly spares c.Do's copy of every
// request's headers (a redirect could need them) and its bookkeeping.
func directTransport(c *http.Client) http.RoundTripper {
	if c.Jar != nil || c.Timeout != 0 {
		return nil
	}
	if c.Transport == nil {
		return http.DefaultTransport
	}
	return c.Transport
}

// send sends req and returns the answer, or an error that never carries the
// URL (whose path or query may hold a token).
func (s *Sink) send(req *http.Request) (*http.Response, error) {
	if s.transport == nil {
		resp, err := s.cfg.Client.Do(req)
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err // without the URL
		}
		return resp, err
	}
	resp, err := s.transport.RoundTrip(req)
	var recordErr tls.RecordHeaderError
	switch {
	case err != nil && errors.As(err, &recordErr) && string(recordErr.RecordHeader[:]) == "HTTP/":
		// What http.Client says of an http endpoint named https.
		return nil, http.ErrSchemeMismatch
	case err != nil:
		return nil, err
	case resp == nil:
		return nil, fmt.Errorf("http: RoundTripper implementation (%T) returned a nil *Response with a nil error", s.transport)
	case resp.Body == nil:
		resp.Body = http.NoBody
	}
	return resp, nil
}
