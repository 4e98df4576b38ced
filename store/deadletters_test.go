package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/store"
)

func TestErrorFingerprint(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"status 503: upstream 10.0.0.7 timed out after 30s", "status N: upstream N timed out after Ns"},
		{`permanent: status 410: webhook: Gone: response "order 0190a6b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b not found"`,
			`permanent: status N: webhook: Gone: response "order <uuid> not found"`},
		{"lease of relay host-4242-a1b2c3d4 expired before the delivery was settled",
			"lease of relay host-N-<hex> expired before the delivery was settled"},
		{"at 2025-03-01T12:30:45.123Z: deadline 0x1f exceeded", "at <time>: deadline <hex> exceeded"},
		{"retryable:\tPost \"http://127.0.0.1:41234/hook\":  connection refused",
			`retryable: Post "http://N:N/hook": connection refused`},
		{"a facade of beaded decade", "a facade of beaded decade"},
	} {
		if got := store.ErrorFingerprint(c.in); got != c.want {
			t.Errorf("ErrorFingerprint(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
	long := strings.Repeat("é", 300)
	if got := store.ErrorFingerprint(long); len(got) > 200 || !strings.HasPrefix(long, got) {
		t.Errorf("fingerprint of a long text: %d bytes", len(got))
	}
}

func TestErrorGroupID(t *testing.T) {
	a, b := store.ErrorGroupID("status N"), store.ErrorGroupID("status N: x")
	if a == b || !store.ValidGroupID(a) || a != store.ErrorGroupID("status N") {
		t.Fatalf("group ids %q %q: want distinct, stable, valid", a, b)
	}
	if store.ValidGroupID("xyz") || store.ValidGroupID(strings.ToUpper(a)) {
		t.Fatal("ValidGroupID accepted a malformed id")
	}
}

func TestFailedCursorRoundTrip(t *testing.T) {
	c := store.FailedCursor{ProcessedAt: time.UnixMicro(1712345678901234), OutboxSeq: 42}
	got, err := store.ParseFailedCursor(c.String())
	if err != nil || !got.ProcessedAt.Equal(c.ProcessedAt) || got.OutboxSeq != 42 {
		t.Fatalf("round trip of %q: %+v, %v", c.String(), got, err)
	}
	if _, err := store.ParseFailedCursor("nope"); err == nil {
		t.Fatal("a malformed cursor was accepted")
	}
	if z, err := store.ParseFailedCursor(""); err != nil || !z.IsZero() {
		t.Fatalf("empty cursor: %+v, %v", z, err)
	}
}
