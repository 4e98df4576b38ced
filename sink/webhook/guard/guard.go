package guard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrBlocked matches (errors.Is) every connection a Guard refuses; the
// error itself is a *BlockedError.
var ErrBlocked = errors.New("guard: address refused")

// BlockedError is a refused connection: the address and the rule that
// refused it. Its message never holds more than the address: no host name,
// no URL path or query.
type BlockedError struct {
	// Addr is the address the connection was to go to, as resolved.
	Addr netip.Addr
	// Rule names the range, such as "link-local (cloud metadata)".
	Rule string
	// Private is whether Config.AllowPrivate would have opened the range;
	// when false only an Allow prefix does.
	Private bool
}

func (e *BlockedError) Error() string {
	hint := "allow it with --allow-private-endpoints or an allowlist"
	if !e.Private {
		hint = "only an allowlist opens it"
	}
	return fmt.Sprintf("%s is %s: refused; %s", e.Addr, e.Rule, hint)
}

// Is reports whether target is ErrBlocked.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// Config opens the guard. The zero value refuses every range of Rules.
type Config struct {
	// AllowPrivate opens the ranges internal endpoints live in (the Rules
	// with Private set): loopback, private, link-local, shared, unique
	// local and the like. Unspecified, multicast and broadcast addresses
	// stay refused.
	AllowPrivate bool
	// Allow are prefixes connections may reach whatever range they are
	// in, such as 10.20.0.0/16 for one internal network, or 127.0.0.1/32.
	// IPv4-mapped IPv6 addresses match the IPv4 prefixes.
	Allow []netip.Prefix
	// Resolver resolves host names; nil means net.DefaultResolver. The
	// guard checks the addresses it returns, whatever they are.
	Resolver *net.Resolver
}

// Guard checks the addresses connections go to. It is safe for concurrent
// use.
type Guard struct {
	cfg Config
}

// New returns a Guard configured by cfg. It refuses invalid Allow
// prefixes.
func New(cfg Config) (*Guard, error) {
	allow := make([]netip.Prefix, len(cfg.Allow))
	for i, prefix := range cfg.Allow {
		if !prefix.IsValid() {
			return nil, fmt.Errorf("guard: Config.Allow[%d] is not a valid prefix", i)
		}
		allow[i] = prefix.Masked()
	}
	cfg.Allow = allow
	return &Guard{cfg: cfg}, nil
}

// Check returns nil if a connection may go to addr, or a *BlockedError
// (matching ErrBlocked).
func (g *Guard) Check(addr netip.Addr) error {
	addr = addr.WithZone("")
	for _, prefix := range g.cfg.Allow {
		if prefix.Contains(addr) || prefix.Contains(addr.Unmap()) {
			return nil
		}
	}
	rule, blocked := classify(addr)
	if !blocked || (rule.Private && g.cfg.AllowPrivate) {
		return nil
	}
	return &BlockedError{Addr: addr, Rule: rule.Name, Private: rule.Private}
}

// classify returns the rule addr falls under, if any.
func classify(addr netip.Addr) (Rule, bool) {
	via := ""
	switch {
	case ipv4Mapped.Contains(addr):
		addr, via = addr.Unmap(), "IPv4-mapped "
	case nat64.Contains(addr):
		b := addr.As16()
		addr, via = netip.AddrFrom4([4]byte(b[12:])), "NAT64 to "
	}
	for _, r := range rules {
		if r.Prefix.Contains(addr) {
			if cloudMetadata[addr] {
				r.Name += " (cloud metadata)"
			}
			if via != "" {
				r.Name = via + addr.String() + ", " + r.Name
			}
			return r, true
		}
	}
	if addr.Is6() && !globalUnicast.Contains(addr) {
		return Rule{Name: "reserved (outside global unicast 2000::/3)", Private: true}, true
	}
	return Rule{}, false
}

// control is the dialer's ControlContext: it refuses the connection before
// the socket connects, on the address the dialer resolved.
func (g *Guard) control(_ context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s address %q is not an IP address and port", ErrBlocked, network, address)
	}
	return g.Check(ap.Addr())
}

// Dialer returns a net.Dialer that refuses what the guard refuses, with a
// connect timeout (0: none but the context's) and 30-second keep-alives.
// Do not replace its ControlContext or Control.
func (g *Guard) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout:        timeout,
		KeepAlive:      30 * time.Second,
		Resolver:       g.cfg.Resolver,
		ControlContext: g.control,
	}
}

// DialTimeoutDefault is the connect timeout of DialContext.
const DialTimeoutDefault = 10 * time.Second

// DialContext connects as net.Dialer.DialContext does, with a connect
// timeout of DialTimeoutDefault, refusing what the guard refuses: a host
// name is resolved and each of its addresses checked as it is tried.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return g.Dialer(DialTimeoutDefault).DialContext(ctx, network, address)
}

// Transport returns a new http.Transport that connects through the guard:
// no proxy (HTTP_PROXY and the like are ignored), HTTP/2 when the server
// offers it, and connect, TLS handshake and response header timeouts of
// timeout. Callers may tune its other fields, such as MaxIdleConnsPerHost,
// but not DialContext, DialTLSContext or Proxy.
func (g *Guard) Transport(timeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           g.Dialer(timeout).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
}

// Client returns an http.Client on a new Transport(timeout), whose whole
// requests are bounded by timeout too. It follows redirects as http.Client
// does, and every connection a redirect needs is checked by the guard.
// Errors of the client are *url.Error, whose message holds the URL: unwrap
// them (errors.As with a *BlockedError) before showing them where the URL's
// path or query must not appear.
func (g *Guard) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: g.Transport(timeout), Timeout: timeout}
}
