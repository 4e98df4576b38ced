package console

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxies reads a --trusted-proxy value: CIDRs or addresses,
// separated by commas ("10.0.0.0/8,192.0.2.7"); "" is none.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			addr, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("console: trusted proxy %q: want a CIDR (10.0.0.0/8) or an address", part)
			}
			out = append(out, netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("console: trusted proxy %q: want a CIDR (10.0.0.0/8) or an address", part)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// peerAddr is the address of the connection's other end.
func peerAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, _ := netip.ParseAddr(host)
	return addr.Unmap()
}

// trusted reports whether addr is one of the proxies the operator trusts.
func (c *Console) trusted(addr netip.Addr) bool {
	for _, p := range c.cfg.TrustedProxies {
		if p.Contains(addr.Unmap()) {
			return true
		}
	}
	return false
}

// clientAddr is the client's address: the connection's peer, or, when the
// peer is a trusted proxy, the last address of X-Forwarded-For that is not
// a trusted proxy (each proxy appends the address it was reached from, so
// what a client wrote itself is further left). An entry a trusted proxy
// wrote that is not an address makes that proxy the client.
func (c *Console) clientAddr(r *http.Request) netip.Addr {
	addr := peerAddr(r)
	if !c.trusted(addr) {
		return addr
	}
	hops := forwardedValues(r.Header, "X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(hops[i])
		if err != nil {
			return addr
		}
		if addr = hop.Unmap(); !c.trusted(addr) {
			return addr
		}
	}
	return addr
}

// overTLS reports whether the client's request came over TLS: to the
// console directly, or to a trusted proxy that says so in
// X-Forwarded-Proto (its last value, the one the nearest proxy wrote).
func (c *Console) overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !c.trusted(peerAddr(r)) {
		return false
	}
	protos := forwardedValues(r.Header, "X-Forwarded-Proto")
	return len(protos) > 0 && strings.EqualFold(protos[len(protos)-1], "https")
}

// forwardedValues are the comma-separated values of every name header, in
// order.
func forwardedValues(h http.Header, name string) []string {
	var out []string
	for _, line := range h.Values(name) {
		for v := range strings.SplitSeq(line, ",") {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}
