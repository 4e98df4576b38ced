package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/console/internal/cdp"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/store"
)

// setField sets the value of the form field selector finds.
func setField(t *testing.T, ctx context.Context, p *cdp.Page, selector, value string) {
	t.Helper()
	var found bool
	must(t, p.Eval(ctx, fmt.Sprintf(`(e => { if (!e) return false; e.value = %q; return true; })(document.querySelector(%q))`, value, selector), &found))
	if !found {
		t.Fatalf("no field %s", selector)
	}
}

// textOf is the text of the element with id, its spaces collapsed.
func textOf(t *testing.T, ctx context.Context, p *cdp.Page, id string) string {
	t.Helper()
	var s string
	must(t, p.Eval(ctx, fmt.Sprintf(`(document.getElementById(%q)?.textContent ?? "").replace(/\s+/g, " ").trim()`, id), &s))
	return s
}

// The operator's path through the endpoint pages in a real browser: the
// list; add an endpoint (its secret shown once, and it is the one that
// signs); edit its filter and rate; send it a test event, received by a
// real receiver; rotate its secret (the new one signs); disable and
// enable it; retry a dead letter of another endpoint from its page. The
// screenshots of docs/console/ are taken on the way.
func TestBrowserEndpointPages(t *testing.T) {
	// Not parallel: each runs a browser, the heaviest load of the suite.
	b := launchChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	s := pgtest.Store(t)
	d := s.Driver()
	billing := newEndpoint(t, s, "billing", store.EndpointEnabled)
	billing.Types, billing.Filter = []string{"order.*", "invoice.paid"}, `payload.total > 100`
	_, err := d.EndpointUpdate(ctx, billing)
	must(t, err)
	crm := newEndpoint(t, s, "crm", store.EndpointAutoDisabled)
	_, err = d.EndpointFailing(ctx, crm.ID, time.Now().Add(-42*time.Minute))
	must(t, err)
	must(t, d.EndpointBreaker(ctx, crm.ID, time.Now().Add(4*time.Minute)))
	dead := orderEvent(1)
	other := orderEvent(2)
	failDeliveries(t, s, billing, []postbox.Event{dead, other}, []string{"status 503: billing busy", xssError})
	routeEvents(t, s, billing, orderEvent(3), orderEvent(4))
	routeEvents(t, s, crm, orderEvent(5))
	now := time.Now()
	var attempts []store.Attempt
	for i := range 9 {
		attempts = append(attempts, store.Attempt{EndpointID: billing.ID, EventID: uuid.New(), EventType: "order.paid", Attempt: 1, StatusCode: 200,
			Duration: time.Duration(30+i) * time.Millisecond, Response: `{"ok": true}`, At: now.Add(-time.Duration(i+3) * time.Minute)})
	}
	attempts = append(attempts,
		store.Attempt{EndpointID: billing.ID, EventID: dead.ID, EventType: "order.paid", Attempt: 8, StatusCode: 503, Duration: 2100 * time.Millisecond,
			Response: `{"error": "busy, try later"}`, Error: "status 503: billing busy", At: now.Add(-time.Minute)},
		store.Attempt{EndpointID: billing.ID, EventID: other.ID, EventType: "order.paid", Attempt: 8, StatusCode: 500, Duration: 80 * time.Millisecond,
			Response: xssPayload, Error: xssError, At: now.Add(-2 * time.Minute)},
		store.Attempt{EndpointID: crm.ID, EventID: uuid.New(), EventType: "order.paid", Attempt: 5, Duration: 10 * time.Second,
			Error: "dial tcp 10.0.0.7:443: i/o timeout", At: now.Add(-5 * time.Minute)})
	must(t, d.AttemptInsert(ctx, attempts))

	// The endpoint added through the form is reached through a door
	// opened once its secret is known: the receiver behind it verifies
	// the signatures with the secret the page showed.
	var door atomic.Pointer[receiver.Receiver]
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rcv := door.Load(); rcv != nil {
			rcv.Server.Config.Handler.ServeHTTP(w, r)
			return
		}
		http.Error(w, "no receiver yet", http.StatusServiceUnavailable)
	}))
	t.Cleanup(hook.Close)

	c, err := console.New(console.Config{Store: s, Endpoints: newAdmin(t, s, false), Logger: testlog.Discard()})
	must(t, err)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	p, err := b.NewPage(ctx)
	must(t, err)
	must(t, p.Navigate(ctx, srv.URL+"/"))

	// The list, from the navigation.
	must(t, p.ClickAndWait(ctx, `header nav a[href="/endpoints"]`))
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#endpoints tbody tr").length`); n != 2 {
		t.Fatalf("list: %d rows, want 2", n)
	}

	// Add: the form, then its secret, once.
	must(t, p.ClickAndWait(ctx, "#new-endpoint"))
	setField(t, ctx, p, `#endpoint-form input[name="name"]`, "warehouse")
	setField(t, ctx, p, `#endpoint-form input[name="url"]`, hook.URL+"/hook")
	setField(t, ctx, p, `#endpoint-form input[name="types"]`, "order.*")
	setField(t, ctx, p, `#endpoint-form textarea[name="filter"]`, `payload.total > 100`)
	must(t, p.Click(ctx, `#endpoint-form input[name="allow_private"]`))
	must(t, p.ClickAndWait(ctx, "#create-button"))
	secret := textOf(t, ctx, p, "secret")
	if !strings.HasPrefix(secret, "whsec_") || !strings.Contains(textOf(t, ctx, p, "secret-warning"), "shown this once and never again") {
		t.Fatalf("after the add: secret %q, warning %q", secret, textOf(t, ctx, p, "secret-warning"))
	}
	if fp := textOf(t, ctx, p, "fingerprint"); fp != endpoint.Fingerprint(secret) {
		t.Fatalf("fingerprint shown %q, want the secret's %s", fp, endpoint.Fingerprint(secret))
	}
	screenshot(t, ctx, p, "endpoint-new-secret")
	door.Store(receiver.New(t, secret, nil))
	must(t, p.ClickAndWait(ctx, "#continue"))
	var html string
	must(t, p.Eval(ctx, `document.documentElement.outerHTML`, &html))
	if holds(html, secret) {
		t.Fatal("the endpoint's page shows the secret again")
	}
	var path string
	must(t, p.Eval(ctx, `location.pathname`, &path))
	id := uuid.MustParse(strings.TrimPrefix(path, "/endpoints/"))

	// Edit its filter and rate.
	must(t, p.ClickAndWait(ctx, "#edit"))
	setField(t, ctx, p, `#endpoint-form textarea[name="filter"]`, `payload.total > 200 && payload.currency == "EUR"`)
	setField(t, ctx, p, `#endpoint-form input[name="rate_per_second"]`, "5")
	setField(t, ctx, p, `#endpoint-form input[name="concurrency"]`, "0") // refused beside its field first
	must(t, p.ClickAndWait(ctx, "#save-button"))
	var refusal string
	must(t, p.Eval(ctx, `document.querySelector('#endpoint-form input[name="concurrency"]').parentElement.querySelector(".field-error")?.textContent ?? ""`, &refusal))
	if !strings.Contains(refusal, "at least 1") {
		t.Fatalf("a concurrency of 0: refusal %q beside the field", refusal)
	}
	var kept string
	must(t, p.Eval(ctx, `document.querySelector('#endpoint-form textarea[name="filter"]').value`, &kept))
	if kept != `payload.total > 200 && payload.currency == "EUR"` {
		t.Fatalf("the refused form kept the filter %q", kept)
	}
	if e, _ := s.EndpointGet(ctx, id); e.Filter != `payload.total > 100` {
		t.Fatalf("the refused edit changed the filter to %q", e.Filter)
	}
	screenshot(t, ctx, p, "endpoint-edit")
	setField(t, ctx, p, `#endpoint-form input[name="concurrency"]`, "4")
	must(t, p.ClickAndWait(ctx, "#save-button"))
	if got := textOf(t, ctx, p, "notice"); got != "Settings saved." {
		t.Fatalf("after the edit: notice %q", got)
	}
	if got := textOf(t, ctx, p, "endpoint-filter"); got != `payload.total > 200 && payload.currency == "EUR"` {
		t.Fatalf("after the edit: filter %q", got)
	}
	if got := textOf(t, ctx, p, "endpoint-rate"); got != "5 deliveries a second" {
		t.Fatalf("after the edit: rate %q", got)
	}
	e, err := s.EndpointGet(ctx, id)
	must(t, err)
	if e.RatePerSecond != 5 || e.Concurrency != 4 || !strings.Contains(e.Filter, "EUR") {
		t.Fatalf("stored after the edit: %+v", e)
	}

	// A test event, to the real receiver.
	must(t, p.ClickAndWait(ctx, "#test-button"))
	if got := textOf(t, ctx, p, "test-result"); !strings.Contains(got, "delivered in") {
		t.Fatalf("test event: %q", got)
	}
	if got := door.Load().Accepted(); len(got) != 1 || got[0].EventType != "postbox.test" {
		t.Fatalf("the receiver accepted %v, want one postbox.test signed with the secret shown", got)
	}

	// Rotate: a new secret, shown once, that signs the next test event.
	setField(t, ctx, p, "#rotate-grace", "1h")
	must(t, p.ClickAndWait(ctx, "#rotate-button"))
	rotated := textOf(t, ctx, p, "secret")
	if !strings.HasPrefix(rotated, "whsec_") || rotated == secret || !strings.Contains(textOf(t, ctx, p, "previous-until"), "signs beside the new one until") {
		t.Fatalf("after the rotation: secret %q (was %q), %q", rotated, secret, textOf(t, ctx, p, "previous-until"))
	}
	door.Store(receiver.New(t, rotated, nil))
	must(t, p.ClickAndWait(ctx, "#continue"))
	must(t, p.ClickAndWait(ctx, "#test-button"))
	if got := textOf(t, ctx, p, "test-result"); !strings.Contains(got, "delivered in") || len(door.Load().Accepted()) != 1 {
		t.Fatalf("test event after the rotation: %q, %d accepted with the new secret", got, len(door.Load().Accepted()))
	}

	// Disable, then enable.
	must(t, p.ClickAndWait(ctx, "#state-button"))
	if got := textOf(t, ctx, p, "endpoint-state"); got != "disabled" {
		t.Fatalf("after disable: state %q", got)
	}
	if e, _ := s.EndpointGet(ctx, id); e.State != store.EndpointDisabled {
		t.Fatalf("stored after disable: %s", e.State)
	}
	must(t, p.ClickAndWait(ctx, "#state-button"))
	if got := textOf(t, ctx, p, "endpoint-state"); got != "enabled" {
		t.Fatalf("after enable: state %q", got)
	}

	// The list, with the added endpoint.
	must(t, p.ClickAndWait(ctx, `header nav a[href="/endpoints"]`))
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#endpoints tbody tr").length`); n != 3 {
		t.Fatalf("list: %d rows, want 3", n)
	}
	screenshot(t, ctx, p, "endpoints")

	// Billing's page: its attempts and dead letters; one retried.
	must(t, p.ClickAndWait(ctx, fmt.Sprintf(`#endpoints a[href="/endpoints/%s"]`, billing.ID)))
	assertInert(t, ctx, b, p, "billing's page")
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#failed tbody tr").length`); n != 2 {
		t.Fatalf("billing's dead letters: %d rows, want 2", n)
	}
	screenshot(t, ctx, p, "endpoint")
	must(t, p.Click(ctx, fmt.Sprintf(`#failed input[name="id"][value=%q]`, dead.ID)))
	must(t, p.ClickAndWait(ctx, "#retry-selected"))
	assertText(t, ctx, p, "confirm-title", "Retry 1 failed delivery?")
	must(t, p.ClickAndWait(ctx, "#confirm-button"))
	must(t, p.Eval(ctx, `location.pathname`, &path))
	if path != "/endpoints/"+billing.ID.String() {
		t.Fatalf("after the retry: at %s, want billing's page", path)
	}
	assertText(t, ctx, p, "notice", "Sent 1 failed delivery back to the queue.")
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#failed tbody tr").length`); n != 1 {
		t.Fatalf("billing's dead letters after the retry: %d rows, want 1", n)
	}
	if got := deliveryStatus(t, s, billing, dead.ID); got != store.StatusPending {
		t.Fatalf("the retried delivery: %q, want pending", got)
	}
	if d := b.Dialogs(); len(d) != 0 {
		t.Fatalf("dialogs opened: %q", d)
	}
}
