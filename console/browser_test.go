package console_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/console/internal/cdp"
	"github.com/postbox-go/postbox/internal/pgtest"
	"github.com/postbox-go/postbox/internal/receiver"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// launchChromium starts Debian's chromium headless, in a fresh profile. A
// missing chromium fails the test (.ci/run installs it).
func launchChromium(t *testing.T) *cdp.Browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is needed for the browser tests (apt-get install -y --no-install-recommends chromium): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b, err := cdp.Launch(ctx, path, t.TempDir())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		cancel()
	})
	return b
}

// screenshot saves a PNG of the page as name.png in $CONSOLE_SCREENSHOTS
// (docs/console/ keeps them), or in a temporary directory.
func screenshot(t *testing.T, ctx context.Context, p *cdp.Page, name string) {
	t.Helper()
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	png, err := p.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// evalInt evaluates a JavaScript expression whose value is a number.
func evalInt(t *testing.T, ctx context.Context, p *cdp.Page, expr string) int {
	t.Helper()
	var n int
	must(t, p.Eval(ctx, expr, &n))
	return n
}

// The operator's path in a real browser: the overview, the failed events,
// one retried and delivered by a running relay; the XSS payloads stay text;
// a POST without the CSRF token is refused; a read-only console shows no
// action.
func TestBrowserRetryAFailedEvent(t *testing.T) {
	b := launchChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	s := pgtest.Store(t)
	target := orderEvent(1)
	xss := orderEvent(2)
	xss.Payload = []byte(xssPayload)
	other := orderEvent(3)
	other.EventType = "invoice.sent"
	ids := failEvents(t, s, []postbox.Event{target, xss, other},
		[]string{"status 503: upstream busy", xssError, "dial tcp 10.0.0.7:443: connection refused"})
	claimInbox(t, s, uuid.New(), "handler: insufficient stock for order 42")

	// A relay delivers to a webhook receiver, as in production.
	rcv := receiver.New(t, webhookSecret, nil)
	sk, err := webhook.New(webhook.Config{URL: rcv.URL, Secrets: []string{webhookSecret}})
	must(t, err)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := relay.New(relay.Config{Store: s, Sink: sk, Logger: quiet, Owner: "relay-browser-test", PollInterval: 200 * time.Millisecond})
	must(t, err)
	relayCtx, stopRelay := context.WithCancel(context.Background())
	relayDone := make(chan error, 1)
	go func() { relayDone <- r.Run(relayCtx) }()
	t.Cleanup(func() {
		stopRelay()
		<-relayDone
	})

	c, err := console.New(console.Config{Store: s, Logger: quiet, SampleEvery: time.Second})
	must(t, err)
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() { defer close(sampled); c.Run(sampleCtx) }()
	t.Cleanup(func() { stopSampling(); <-sampled })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)

	// The overview stays open in its own tab, refreshing itself.
	live, err := b.NewPage(ctx)
	must(t, err)
	must(t, live.Navigate(ctx, srv.URL+"/"))
	must(t, live.WaitFor(ctx, `document.getElementById("count-failed").textContent === "3"`))

	p, err := b.NewPage(ctx)
	must(t, err)
	must(t, p.Navigate(ctx, srv.URL+"/"))

	// Failed: three rows; the payloads and errors are text.
	must(t, p.ClickAndWait(ctx, `header nav a[href="/failed"]`))
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#failed tbody tr").length`); n != 3 {
		t.Fatalf("failed page: %d rows, want 3", n)
	}
	screenshot(t, ctx, p, "failed")
	assertInert(t, ctx, b, p, "failed page")

	// The event page of the XSS event: the payload shows as text.
	must(t, p.Navigate(ctx, srv.URL+"/events/"+ids[1].String()))
	var payload string
	must(t, p.Eval(ctx, `document.getElementById("payload").textContent`, &payload))
	if want := `"note": "<script>alert('payload')</script>"`; !strings.Contains(payload, want) {
		t.Fatalf("event page payload %q lacks the text %q", payload, want)
	}
	assertInert(t, ctx, b, p, "event page")
	must(t, p.Navigate(ctx, srv.URL+"/events/"+ids[0].String()))
	screenshot(t, ctx, p, "event")

	// A POST without the CSRF token is refused.
	var code int
	must(t, p.Eval(ctx, fmt.Sprintf(`fetch("/failed/action", {method: "POST", body: new URLSearchParams({action: "retry", id: %q, confirm: "1"})}).then(r => r.status)`, ids[0]), &code))
	if code != 403 {
		t.Fatalf("POST without the CSRF token: %d, want 403", code)
	}
	if got := status(t, s, ids[0]); got != store.StatusFailed {
		t.Fatalf("after the refused POST: status %q", got)
	}

	// Retry the target: tick it, Retry…, confirm.
	must(t, p.Navigate(ctx, srv.URL+"/failed"))
	must(t, p.Click(ctx, fmt.Sprintf(`#failed input[name="id"][value=%q]`, ids[0])))
	must(t, p.ClickAndWait(ctx, "#retry-selected"))
	must(t, p.WaitFor(ctx, `document.getElementById("confirm-button") !== null`))
	screenshot(t, ctx, p, "confirm")
	must(t, p.ClickAndWait(ctx, "#confirm-button"))
	var notice string
	must(t, p.Eval(ctx, `document.getElementById("notice").textContent`, &notice))
	if notice != "Sent 1 failed events back to the queue." {
		t.Fatalf("notice after the retry: %q", notice)
	}
	if n := evalInt(t, ctx, p, fmt.Sprintf(`document.querySelectorAll('#failed tr[data-id=%q]').length`, ids[0])); n != 0 {
		t.Fatal("the retried event is still listed")
	}
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#failed tbody tr").length`); n != 2 {
		t.Fatalf("after the retry: %d rows, want 2", n)
	}
	rcv.WaitAccepted(t, 1, 20*time.Second)
	if got := rcv.Accepted()[0].ID; got != ids[0].String() {
		t.Fatalf("the relay delivered %s, want the retried %s", got, ids[0])
	}
	// Delivered events are deleted (no retention).
	waitUntil(t, 10*time.Second, "the delivered event's deletion", func() bool {
		_, err := s.Get(ctx, ids[0])
		return err != nil
	})
	// The open overview refreshed by itself: one failed event less, and
	// its chart counts the delivery.
	must(t, live.BringToFront(ctx))
	waitCtx, cancelWait := context.WithTimeout(ctx, 20*time.Second)
	defer cancelWait()
	if err := live.WaitFor(waitCtx, `document.getElementById("count-failed").textContent === "2" && document.getElementById("chart-totals").textContent.startsWith("1 delivered")`); err != nil {
		var text string
		live.Eval(ctx, `document.getElementById("main").innerText`, &text)
		t.Fatalf("the open overview: %v\n%s", err, text)
	}
	screenshot(t, ctx, live, "overview")

	must(t, p.Navigate(ctx, srv.URL+"/inbox"))
	screenshot(t, ctx, p, "inbox")

	// Read-only: no action anywhere.
	ro, err := console.New(console.Config{Store: s, Logger: quiet, ReadOnly: true})
	must(t, err)
	roSrv := httptest.NewServer(ro)
	t.Cleanup(roSrv.Close)
	for _, path := range []string{"/", "/failed", "/events/" + ids[2].String()} {
		must(t, p.Navigate(ctx, roSrv.URL+path))
		n := evalInt(t, ctx, p, `document.querySelectorAll('form[method="post"][action="/failed/action"], input[name="id"], #retry-selected, #purge-selected').length`)
		if n != 0 {
			t.Fatalf("read-only %s: %d action elements", path, n)
		}
		var badge bool
		must(t, p.Eval(ctx, `document.getElementById("read-only") !== null`, &badge))
		if !badge {
			t.Fatalf("read-only %s does not say so", path)
		}
	}
	if d := b.Dialogs(); len(d) != 0 {
		t.Fatalf("dialogs opened: %q", d)
	}
}

// assertInert checks that no payload or error text became markup: no
// dialog, no image, no script but the console's own.
func assertInert(t *testing.T, ctx context.Context, b *cdp.Browser, p *cdp.Page, where string) {
	t.Helper()
	time.Sleep(200 * time.Millisecond) // an onerror handler would have run by now
	if d := b.Dialogs(); len(d) != 0 {
		t.Fatalf("%s: dialogs opened: %q", where, d)
	}
	if n := evalInt(t, ctx, p, `document.querySelectorAll("img, b, i").length`); n != 0 {
		t.Fatalf("%s: %d injected elements", where, n)
	}
	var scripts []string
	must(t, p.Eval(ctx, `Array.from(document.scripts, s => s.getAttribute("src"))`, &scripts))
	if len(scripts) != 1 || scripts[0] != "/static/console.js" {
		t.Fatalf("%s: scripts %q, want only /static/console.js", where, scripts)
	}
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
