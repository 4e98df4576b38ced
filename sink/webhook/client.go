package webhook

import (
	"net"
	"net/http"
	"time"
)

// newClient returns the client of a Config without one: keep-alive
// connections, enough of them idle for maxConcurrency requests at once, and
// every phase of a request bounded by timeout.
func newClient(timeout time.Duration, maxConcurrency int) *http.Client {
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
