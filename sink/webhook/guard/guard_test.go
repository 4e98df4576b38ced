package guard_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox/sink/webhook/guard"
)

const testTimeout = 5 * time.Second

func newGuard(t *testing.T, cfg guard.Config) *guard.Guard {
	t.Helper()
	g, err := guard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func blocked(t *testing.T, err error) *guard.BlockedError {
	t.Helper()
	var b *guard.BlockedError
	if !errors.Is(err, guard.ErrBlocked) || !errors.As(err, &b) {
		t.Fatalf("got %v, want a refusal (ErrBlocked)", err)
	}
	return b
}

// Each range is refused, under the name a refusal gives; AllowPrivate opens
// the private ones only; an Allow prefix opens any.
func TestCheckRefusesEachRange(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		rule    string
		private bool
	}{
		{"127.0.0.1", "loopback", true},
		{"127.255.255.254", "loopback", true},
		{"10.1.2.3", "private (RFC 1918)", true},
		{"172.16.0.1", "private (RFC 1918)", true},
		{"172.31.255.255", "private (RFC 1918)", true},
		{"192.168.1.1", "private (RFC 1918)", true},
		{"169.254.169.254", "link-local (cloud metadata)", true},
		{"169.254.1.1", "link-local", true},
		{"100.64.0.1", "shared address space (carrier-grade NAT, RFC 6598)", true},
		{"100.100.100.200", "shared address space (carrier-grade NAT, RFC 6598) (cloud metadata)", true},
		{"100.127.255.255", "shared address space (carrier-grade NAT, RFC 6598)", true},
		{"0.0.0.0", "unspecified (\"this network\"; 0.0.0.0 reaches the local host)", false},
		{"224.0.0.1", "multicast", false},
		{"239.255.255.250", "multicast", false},
		{"255.255.255.255", "broadcast", false},
		{"240.0.0.1", "reserved (class E)", true},
		{"192.0.0.192", "IETF protocol assignments (RFC 6890) (cloud metadata)", true},
		{"192.0.2.10", "documentation (TEST-NET-1)", true},
		{"198.18.0.1", "benchmarking (RFC 2544)", true},
		{"::1", "loopback", true},
		{"::", "unspecified", false},
		{"fc00::1", "unique local (ULA)", true},
		{"fd12:3456::1", "unique local (ULA)", true},
		{"fd00:ec2::254", "unique local (ULA) (cloud metadata)", true},
		{"fe80::1", "link-local", true},
		{"fe80::1%eth0", "link-local", true},
		{"ff02::1", "multicast", false},
		{"::ffff:127.0.0.1", "IPv4-mapped 127.0.0.1, loopback", true},
		{"::ffff:169.254.169.254", "IPv4-mapped 169.254.169.254, link-local (cloud metadata)", true},
		{"::ffff:10.0.0.1", "IPv4-mapped 10.0.0.1, private (RFC 1918)", true},
		{"64:ff9b::a9fe:a9fe", "NAT64 to 169.254.169.254, link-local (cloud metadata)", true},
		{"64:ff9b::7f00:1", "NAT64 to 127.0.0.1, loopback", true},
		{"::127.0.0.1", "IPv4-compatible (deprecated)", true},
		{"2001::1", "Teredo (tunnels to an IPv4 address)", true},
		{"2002:7f00:1::1", "6to4 (tunnels to an IPv4 address)", true},
		{"2001:db8::1", "documentation", true},
		{"fec0::1", "site-local (deprecated)", true},
		{"100::1", "discard-only (RFC 6666)", true},
		{"4000::1", "reserved (outside global unicast 2000::/3)", true},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			addr := netip.MustParseAddr(tc.addr)
			b := blocked(t, newGuard(t, guard.Config{}).Check(addr))
			if b.Rule != tc.rule || b.Private != tc.private || b.Addr != addr.WithZone("") {
				t.Fatalf("refused as %+v, want rule %q, private %v", b, tc.rule, tc.private)
			}
			err := newGuard(t, guard.Config{AllowPrivate: true}).Check(addr)
			if tc.private && err != nil {
				t.Fatalf("AllowPrivate: %v", err)
			}
			if !tc.private {
				blocked(t, err)
			}
			if err := newGuard(t, guard.Config{Allow: []netip.Prefix{netip.PrefixFrom(addr.WithZone("").Unmap(), addr.Unmap().BitLen())}}).Check(addr); err != nil {
				t.Fatalf("allowlisted: %v", err)
			}
		})
	}
}

// Every range of Rules is refused at both its ends.
func TestEveryRuleRefusesItsRange(t *testing.T) {
	g := newGuard(t, guard.Config{})
	for _, r := range guard.Rules() {
		first := r.Prefix.Addr()
		b := first.AsSlice()
		for i := r.Prefix.Bits(); i < len(b)*8; i++ { // set every host bit
			b[i/8] |= 1 << (7 - i%8)
		}
		last, _ := netip.AddrFromSlice(b)
		for _, a := range []netip.Addr{first, last} {
			if err := g.Check(a); !errors.Is(err, guard.ErrBlocked) {
				t.Errorf("%s (%s, %s): %v", a, r.Prefix, r.Name, err)
			}
		}
	}
}

// Public addresses pass, including those just outside refused ranges.
func TestCheckLetsPublicAddressesThrough(t *testing.T) {
	g := newGuard(t, guard.Config{})
	for _, a := range []string{
		"8.8.8.8", "1.1.1.1", "93.184.215.14", "9.255.255.255", "11.0.0.0",
		"172.15.255.255", "172.32.0.0", "192.167.255.255", "192.169.0.0",
		"169.253.255.255", "169.255.0.0", "100.63.255.255", "100.128.0.0",
		"223.255.255.255", "126.255.255.255", "128.0.0.0",
		"2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "2001:4860:4860::8888",
		"::ffff:8.8.8.8", "64:ff9b::808:808",
	} {
		if err := g.Check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
}

func TestNewRefusesInvalidPrefix(t *testing.T) {
	if _, err := guard.New(guard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), {}}}); err == nil || !strings.Contains(err.Error(), "Allow[1]") {
		t.Fatalf("got %v", err)
	}
}

// countingListener accepts TCP connections on addr and counts them.
func countingListener(t *testing.T, addr string) (net.Listener, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln, &n
}

// The dialer refuses before connecting: the listener on 127.0.0.1 sees no
// connection, however the address is written, until an allowlisted guard
// dials it.
func TestDialRefusedBeforeConnecting(t *testing.T) {
	ln, accepted := countingListener(t, "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	g := newGuard(t, guard.Config{})
	ctx := context.Background()
	for _, address := range []string{
		ln.Addr().String(),
		net.JoinHostPort("::ffff:127.0.0.1", itoa(port)),
		net.JoinHostPort("localhost", itoa(port)),
		net.JoinHostPort("0.0.0.0", itoa(port)),
	} {
		if c, err := g.DialContext(ctx, "tcp", address); err == nil {
			c.Close()
			t.Fatalf("%s: connected", address)
		} else {
			blocked(t, err)
		}
	}
	if _, err := g.DialContext(ctx, "unix", "/tmp/no-such.sock"); !errors.Is(err, guard.ErrBlocked) {
		t.Fatalf("unix socket: %v", err)
	}

	c, err := newGuard(t, guard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	deadline := time.Now().Add(testTimeout)
	for accepted.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("the listener accepted %d connections, want 1 (the allowlisted one)", n)
	}
}

// countingServer is an HTTP server on 127.0.0.1 that counts its requests
// and answers them with h (nil: 200).
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	return countingServerOn(t, "127.0.0.1:0", h)
}

func countingServerOn(t *testing.T, addr string, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, error) {
	t.Helper()
	resp, err := c.Get(u)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// A server on loopback is reached through an allowlist or AllowPrivate,
// and not otherwise.
func TestAllowlistedServerAnswers(t *testing.T) {
	srv, requests := countingServer(t, nil)
	if _, err := get(t, newGuard(t, guard.Config{}).Client(testTimeout), srv.URL); err != nil {
		if b := blocked(t, err); b.Addr != netip.MustParseAddr("127.0.0.1") {
			t.Fatalf("refused %s", b.Addr)
		}
	} else {
		t.Fatal("reached a loopback server through the closed guard")
	}
	if requests.Load() != 0 {
		t.Fatal("the refused request reached the server")
	}
	for name, cfg := range map[string]guard.Config{
		"allowlist":     {Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		"allow private": {AllowPrivate: true},
	} {
		resp, err := get(t, newGuard(t, cfg).Client(testTimeout), srv.URL)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if n := requests.Load(); n != 2 {
		t.Fatalf("server got %d requests, want 2", n)
	}
}

// The refusal names the address and the rule, never the URL's path or
// query, at every level below the client's url.Error.
func TestRefusalMessage(t *testing.T) {
	_, err := get(t, newGuard(t, guard.Config{}).Client(testTimeout), "http://169.254.169.254/latest/meta-data/iam/security-credentials/admin?token=s3cr3t")
	b := blocked(t, err)
	const want = "169.254.169.254 is link-local (cloud metadata): refused; allow it with --allow-private-endpoints or an allowlist"
	if b.Error() != want {
		t.Fatalf("message %q, want %q", b.Error(), want)
	}
	var urlErr *url.Error
	if !errors.As(err, &urlErr) {
		t.Fatalf("%T is no *url.Error", err)
	}
	if msg := urlErr.Err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "latest") || strings.Contains(msg, "s3cr3t") {
		t.Fatalf("below the url.Error: %q", msg)
	}
	mc := &guard.BlockedError{Addr: netip.MustParseAddr("224.0.0.1"), Rule: "multicast"}
	if got := mc.Error(); got != "224.0.0.1 is multicast: refused; only an allowlist opens it" {
		t.Fatalf("message %q", got)
	}
}

// DNS rebinding: the name resolves to a public address when it is checked
// ahead (as a form validating an endpoint would), then to 127.0.0.1 when
// the client connects. The connection is refused, as the guard checks the
// address dialled; an allowlisted guard reaches the server by the same
// name, so the name does lead there.
func TestDNSRebindingRefused(t *testing.T) {
	srv, requests := countingServer(t, nil)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	dns := startDNS(t, netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("127.0.0.1"))
	resolver := dns.resolver()
	const host = "hooks.partner.example"
	u := "http://" + net.JoinHostPort(host, itoa(port)) + "/webhooks"

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ahead, err := resolver.LookupNetIP(ctx, "ip4", host)
	if err != nil {
		t.Fatal(err)
	}
	g := newGuard(t, guard.Config{Resolver: resolver})
	if len(ahead) != 1 || g.Check(ahead[0]) != nil {
		t.Fatalf("checked ahead: %v resolves to %v, want one public address", host, ahead)
	}

	_, err = get(t, g.Client(testTimeout), u)
	if b := blocked(t, err); b.Addr != netip.MustParseAddr("127.0.0.1") || b.Rule != "loopback" {
		t.Fatalf("refused %+v, want 127.0.0.1 as loopback", b)
	}
	if requests.Load() != 0 {
		t.Fatal("the rebound name reached the server")
	}
	if dns.queriesA() < 2 {
		t.Fatalf("%d A queries: the client did not resolve the name itself", dns.queriesA())
	}

	open := newGuard(t, guard.Config{Resolver: resolver, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	if resp, err := get(t, open.Client(testTimeout), u); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("allowlisted: %v", err)
	}
	if requests.Load() != 1 {
		t.Fatalf("server got %d requests, want 1", requests.Load())
	}
}

// A redirect to a private address is refused by any client using the
// guard: the allowlisted front server is reached, the internal one it
// redirects to is not.
func TestRedirectToPrivateAddressRefused(t *testing.T) {
	internal, internalRequests := countingServerOn(t, "127.0.0.2:0", nil)
	front, frontRequests := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, internal.URL+"/admin?token=s3cr3t", http.StatusFound)
	})

	allowFront := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	_, err := get(t, newGuard(t, guard.Config{Allow: allowFront}).Client(testTimeout), front.URL)
	if b := blocked(t, err); b.Addr != netip.MustParseAddr("127.0.0.2") {
		t.Fatalf("refused %s, want 127.0.0.2", b.Addr)
	}
	if frontRequests.Load() != 1 || internalRequests.Load() != 0 {
		t.Fatalf("front got %d requests, internal %d; want 1 and 0", frontRequests.Load(), internalRequests.Load())
	}

	// Allowlisted too, the redirect is followed: the test sees a redirect.
	allowBoth := append(allowFront, netip.MustParsePrefix("127.0.0.2/32"))
	if resp, err := get(t, newGuard(t, guard.Config{Allow: allowBoth}).Client(testTimeout), front.URL); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("allowlisted redirect: %v", err)
	}
	if internalRequests.Load() != 1 {
		t.Fatalf("internal got %d requests, want 1", internalRequests.Load())
	}
}

// The transport never goes through a proxy from the environment: the guard
// would see only the proxy's address.
func TestTransportUsesNoProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://10.0.0.1:3128")
	t.Setenv("HTTPS_PROXY", "http://10.0.0.1:3128")
	tr := newGuard(t, guard.Config{}).Transport(testTimeout)
	if tr.Proxy != nil {
		t.Fatal("the transport has a Proxy function")
	}
	if tr.DialContext == nil || tr.TLSHandshakeTimeout != testTimeout || tr.ResponseHeaderTimeout != testTimeout {
		t.Fatalf("transport %+v", tr)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
