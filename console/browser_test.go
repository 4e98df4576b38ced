package console_test

import (
	"context"
	"fmt"
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
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
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
	// Not parallel: each runs a browser, the heaviest load of the suite.
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
	quiet := testlog.Discard()
	relaytest.Start(t, relay.Config{Store: s.Driver(), Sink: sk, Logger: quiet, Owner: "relay-browser-test", PollInterval: 200 * time.Millisecond})

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
	assertPlaceholdersLookUnset(t, ctx, p)

	// A filter applied shows as applied: above the list, and its field.
	must(t, p.Eval(ctx, `document.querySelector('#filters input[name="type"]').value = "invoice.sent"`, nil))
	must(t, p.ClickAndWait(ctx, "#filter-button"))
	var applied string
	must(t, p.Eval(ctx, `document.getElementById("applied-filters").textContent.replace(/\s+/g, " ").trim()`, &applied))
	if !strings.Contains(applied, "type: invoice.sent") {
		t.Fatalf("applied filters read %q, want the type invoice.sent", applied)
	}
	var marked bool
	must(t, p.Eval(ctx, `document.querySelector('#filters input[name="type"]').classList.contains("applied") && !document.querySelector('#filters input[name="error"]').classList.contains("applied")`, &marked))
	if !marked {
		t.Fatal("the applied filter's field is not marked applied (or an empty one is)")
	}
	screenshot(t, ctx, p, "failed-filtered")
	// Its × removes it.
	must(t, p.ClickAndWait(ctx, `#applied-filters a[data-filter="type"]`))
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#failed tbody tr").length`); n != 3 {
		t.Fatalf("after removing the filter: %d rows, want 3", n)
	}

	// The confirmation says how many events the action moves: every
	// failed event that matches, then one ticked.
	must(t, p.Click(ctx, "#select-all"))
	must(t, p.ClickAndWait(ctx, "#purge-selected"))
	assertText(t, ctx, p, "confirm-title", "Purge 3 failed events?")
	assertText(t, ctx, p, "confirm-button", "Yes, purge 3 events")
	must(t, p.ClickAndWait(ctx, "#confirm-cancel"))

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
	assertText(t, ctx, p, "confirm-title", "Retry 1 failed event?")
	assertText(t, ctx, p, "confirm-button", "Yes, retry 1 event")
	screenshot(t, ctx, p, "confirm")
	must(t, p.ClickAndWait(ctx, "#confirm-button"))
	var notice string
	must(t, p.Eval(ctx, `document.getElementById("notice").textContent`, &notice))
	if notice != "Sent 1 failed event back to the queue." {
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
	assertTimeAxis(t, ctx, live)
	screenshot(t, ctx, live, "overview")

	must(t, p.Navigate(ctx, srv.URL+"/inbox"))
	screenshot(t, ctx, p, "inbox")

	// Read-only: no action anywhere.
	ro, err := console.New(console.Config{Store: s, Logger: quiet, ReadOnly: true})
	must(t, err)
	roSrv := httptest.NewServer(ro)
	t.Cleanup(roSrv.Close)
	for _, path := range []string{"/", "/failed", "/failed?type=invoice.sent", "/events/" + ids[2].String()} {
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

// assertText checks the text of the element with id.
func assertText(t *testing.T, ctx context.Context, p *cdp.Page, id, want string) {
	t.Helper()
	var got string
	must(t, p.Eval(ctx, fmt.Sprintf(`(document.getElementById(%q)?.textContent ?? "").replace(/\s+/g, " ").trim()`, id), &got))
	if got != want {
		t.Fatalf("#%s reads %q, want %q", id, got, want)
	}
}

// assertPlaceholdersLookUnset checks that no filter field looks applied
// when it is empty: each says "e.g. …", in a colour lighter than a value's.
func assertPlaceholdersLookUnset(t *testing.T, ctx context.Context, p *cdp.Page) {
	t.Helper()
	var fields []struct {
		Name, Value, Placeholder, Color, PlaceholderColor, PlaceholderStyle string
	}
	must(t, p.Eval(ctx, `Array.from(document.querySelectorAll("#filters input"), e => ({
		Name: e.name, Value: e.value, Placeholder: e.placeholder,
		Color: getComputedStyle(e).color, PlaceholderColor: getComputedStyle(e, "::placeholder").color,
		PlaceholderStyle: getComputedStyle(e, "::placeholder").fontStyle}))`, &fields))
	if len(fields) != 6 {
		t.Fatalf("%d filter fields, want 6", len(fields))
	}
	for _, f := range fields {
		if f.Value != "" || !strings.HasPrefix(f.Placeholder, "e.g. ") || f.PlaceholderColor == f.Color || f.PlaceholderStyle != "italic" {
			t.Errorf("filter %s: value %q, placeholder %q in %s %s (values in %s): want empty, \"e.g. …\", lighter and italic",
				f.Name, f.Value, f.Placeholder, f.PlaceholderStyle, f.PlaceholderColor, f.Color)
		}
	}
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#applied-filters").length`); n != 0 {
		t.Fatal("no filter is applied, yet the page lists applied filters")
	}
}

// assertTimeAxis checks the chart's time axis: a label every 10 minutes
// (HH:MM), from left to right inside the chart, an hour in all.
func assertTimeAxis(t *testing.T, ctx context.Context, p *cdp.Page) {
	t.Helper()
	var axis struct {
		Labels     []string
		Lefts      []float64
		Rights     []float64
		ChartLeft  float64
		ChartRight float64
		Caption    string
	}
	must(t, p.Eval(ctx, `(() => {
		const chart = document.getElementById("chart").getBoundingClientRect();
		const labels = Array.from(document.querySelectorAll("#chart .tick-label"));
		return {
			Labels: labels.map(l => l.textContent), Lefts: labels.map(l => l.getBoundingClientRect().left),
			Rights: labels.map(l => l.getBoundingClientRect().right), ChartLeft: chart.left, ChartRight: chart.right,
			Caption: document.getElementById("chart-axis").textContent};
	})()`, &axis))
	if len(axis.Labels) < 6 || len(axis.Labels) > 7 {
		t.Fatalf("time axis labels %q: want one every 10 minutes of the hour", axis.Labels)
	}
	var prev time.Time
	for i, l := range axis.Labels {
		at, err := time.Parse("15:04", l)
		if err != nil || at.Minute()%10 != 0 {
			t.Fatalf("time axis label %q: want HH:M0", l)
		}
		if i > 0 && at.Sub(prev) != 10*time.Minute && at.Sub(prev) != 10*time.Minute-24*time.Hour {
			t.Fatalf("time axis labels %q: want 10 minutes apart", axis.Labels)
		}
		if axis.Lefts[i] < axis.ChartLeft || axis.Rights[i] > axis.ChartRight || i > 0 && axis.Lefts[i] < axis.Rights[i-1] {
			t.Fatalf("time axis label %q at %v–%v: outside the chart (%v–%v) or over the one before", l, axis.Lefts[i], axis.Rights[i], axis.ChartLeft, axis.ChartRight)
		}
		prev = at
	}
	if !strings.Contains(axis.Caption, "UTC") {
		t.Fatalf("the time axis caption %q does not say UTC", axis.Caption)
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

// In a browser: log in, the overview refreshes itself; once the session
// ends (idle time passed on the console's clock), the open overview turns
// into the login page instead of showing counts that no longer move.
func TestBrowserSessionEnds(t *testing.T) {
	// Not parallel: each runs a browser, the heaviest load of the suite.
	b := launchChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clk := newClock()
	quiet := testlog.Discard()
	c, err := console.New(console.Config{Store: sqliteStore(t), Token: testToken, Logger: quiet, Now: clk.Now, SessionIdle: 10 * time.Minute})
	must(t, err)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)

	p, err := b.NewPage(ctx)
	must(t, err)
	must(t, p.Navigate(ctx, srv.URL+"/"))
	must(t, p.WaitFor(ctx, `document.getElementById("login") !== null`))
	var header string
	must(t, p.Eval(ctx, `document.querySelector("header").textContent`, &header))
	if strings.Contains(header, "sqlite") || strings.Contains(header, "console.db") {
		t.Fatalf("the login page's header names the store: %q", header)
	}
	screenshot(t, ctx, p, "login")
	must(t, p.Eval(ctx, fmt.Sprintf(`document.querySelector('#login input[name="token"]').value = %q`, testToken), nil))
	must(t, p.ClickAndWait(ctx, `#login button`))
	must(t, p.WaitFor(ctx, `document.getElementById("count-failed") !== null`))

	clk.advance(11 * time.Minute)
	waitCtx, cancelWait := context.WithTimeout(ctx, 30*time.Second) // the page refreshes every 5 s
	defer cancelWait()
	if err := p.WaitFor(waitCtx, `document.getElementById("login") !== null`); err != nil {
		t.Fatalf("the open overview after the session ended: %v", err)
	}
}
