package console

import (
	"net/netip"
	"testing"
	"time"
)

// An attacker with many addresses cannot grow the limiter past its bound,
// and the addresses it does not know, once full, back off together.
func TestLoginLimiterIsBounded(t *testing.T) {
	const most = 100
	l := newLoginLimiter(most)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	for i := range 100 * most {
		l.fail(addr(i), now)
	}
	if n := l.size(); n > most+1 {
		t.Fatalf("%d entries after %d addresses, want at most %d", n, 100*most, most+1)
	}
	// The many new addresses shared one entry: it is backing off, so a
	// further new address waits too.
	if w := l.wait(addr(200*most), now); w <= 0 {
		t.Fatal("a new address on a full table is not backing off with the others")
	}
	// An address the table knows is judged on its own.
	if w := l.wait(addr(0), now); w != 0 {
		t.Fatalf("a known address with one failure waits %v", w)
	}
	// Forgotten failures make room again.
	later := now.Add(LoginForgetAfter + LoginBackoffMax + time.Second)
	if b := l.fail(addr(300*most), later); b.Shared {
		t.Fatal("after the failures are forgotten, a new address still shares the overflow entry")
	}
}

// The back-off doubles from LoginBackoffFirst up to LoginBackoffMax, and an
// IPv6 client is its /64.
func TestLoginLimiterBackoffSteps(t *testing.T) {
	l := newLoginLimiter(10)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := netip.MustParseAddr("2001:db8:1:2::1")
	b := netip.MustParseAddr("2001:db8:1:2:ffff::9") // the same /64
	var last time.Duration
	for i := range 40 {
		addr := a
		if i%2 == 1 {
			addr = b
		}
		step := l.fail(addr, now)
		if step.Failures != i+1 {
			t.Fatalf("failure %d counted as %d: the /64 is one client", i+1, step.Failures)
		}
		switch {
		case i+1 <= LoginFreeFailures:
			if step.Wait != 0 {
				t.Fatalf("free failure %d waits %v", i+1, step.Wait)
			}
		case i+1 == LoginFreeFailures+1:
			if step.Wait != LoginBackoffFirst {
				t.Fatalf("first back-off %v, want %v", step.Wait, LoginBackoffFirst)
			}
		default:
			if want := min(2*last, LoginBackoffMax); step.Wait != want {
				t.Fatalf("back-off after %d failures %v, want %v", i+1, step.Wait, want)
			}
		}
		last = step.Wait
		now = now.Add(step.Wait)
	}
	if last != LoginBackoffMax {
		t.Fatalf("after 40 failures the back-off is %v, want %v", last, LoginBackoffMax)
	}
}
