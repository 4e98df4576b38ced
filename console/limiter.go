package console

import (
	"net/netip"
	"sync"
	"time"
)

// The login limiter's rules: each client (an IPv4 address, an IPv6 /64)
// may fail LoginFreeFailures times; each further failure makes it wait,
// twice as long as the failure before, from LoginBackoffFirst to
// LoginBackoffMax. Its failures are forgotten LoginForgetAfter after the
// last one, and at a successful login.
const (
	// LoginFreeFailures is how many failed logins a client may make
	// before it must wait.
	LoginFreeFailures = 5
	// LoginBackoffFirst is the first wait.
	LoginBackoffFirst = time.Second
	// LoginBackoffMax is the longest wait.
	LoginBackoffMax = 15 * time.Minute
	// LoginForgetAfter is how long after its last failure a client's
	// failures are forgotten.
	LoginForgetAfter = time.Hour
	// LoginClientsMax bounds the clients the limiter remembers; while it
	// is full, the clients it does not know share one entry (they back
	// off together), so many addresses cannot grow it.
	LoginClientsMax = 10_000
)

// overflowKey is the entry the clients share while the table is full.
var overflowKey = netip.PrefixFrom(netip.IPv6Unspecified(), 0)

// loginLimiter counts the failed logins of each client.
type loginLimiter struct {
	mu        sync.Mutex
	clients   map[netip.Prefix]*failures
	max       int
	lastPrune time.Time
}

// failures are one client's failed logins.
type failures struct {
	n     int
	last  time.Time // the last failure
	until time.Time // the end of the back-off
}

// backoff is the step a failure made: the failures so far, and the wait
// it started (zero for a free failure).
type backoff struct {
	Failures int
	Wait     time.Duration
	// Shared is true when the client shares the entry of the clients the
	// full table does not know.
	Shared bool
}

func newLoginLimiter(max int) *loginLimiter {
	return &loginLimiter{clients: map[netip.Prefix]*failures{}, max: max}
}

// clientKey is the entry of addr: the address, or its /64 for IPv6 (a
// single host commonly holds a whole /64).
func clientKey(addr netip.Addr) netip.Prefix {
	addr = addr.Unmap()
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	p, _ := addr.Prefix(bits) // an invalid addr gives the zero prefix: one shared entry
	return p
}

// wait is how long the client at addr must still wait before its next
// attempt is checked (zero: go ahead).
func (l *loginLimiter) wait(addr netip.Addr, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.clients[clientKey(addr)]
	if f == nil {
		if len(l.clients) < l.max {
			return 0
		}
		f = l.clients[overflowKey] // a client the full table does not know
		if f == nil {
			return 0
		}
	}
	return max(0, f.until.Sub(now))
}

// fail counts a failed login of the client at addr, and returns the step
// it made.
func (l *loginLimiter) fail(addr netip.Addr, now time.Time) backoff {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := clientKey(addr)
	f := l.clients[key]
	shared := false
	if f == nil {
		if len(l.clients) >= l.max {
			l.prune(now)
		}
		if len(l.clients) >= l.max {
			key, shared = overflowKey, true
			f = l.clients[key]
		}
		if f == nil {
			f = &failures{}
			l.clients[key] = f
		}
	}
	if now.Sub(f.last) > LoginForgetAfter {
		f.n = 0
	}
	f.n++
	f.last = now
	out := backoff{Failures: f.n, Shared: shared}
	if f.n > LoginFreeFailures {
		out.Wait = LoginBackoffMax
		if steps := f.n - LoginFreeFailures - 1; steps < 30 {
			out.Wait = min(LoginBackoffMax, LoginBackoffFirst<<steps)
		}
		f.until = now.Add(out.Wait)
	}
	return out
}

// forget drops the failures of the client at addr (it logged in).
func (l *loginLimiter) forget(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.clients, clientKey(addr))
}

// prune drops the clients whose failures are forgotten, at most once a
// second (a full table under attack is not read at every failure).
func (l *loginLimiter) prune(now time.Time) {
	if now.Sub(l.lastPrune) < time.Second && !now.Before(l.lastPrune) {
		return
	}
	l.lastPrune = now
	for key, f := range l.clients {
		if now.Sub(f.last) > LoginForgetAfter && !now.Before(f.until) {
			delete(l.clients, key)
		}
	}
}

// size is how many entries the limiter holds.
func (l *loginLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}
