package console_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/store"
)

// The operator's path to endpoints' dead letters in a real browser: the
// overview's endpoint counts, the failed page switched to every endpoint
// and to one, a delivery retried there; error texts stay text.
func TestBrowserEndpointDeadLetters(t *testing.T) {
	// Not parallel: each runs a browser, the heaviest load of the suite.
	b := launchChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	s := pgtest.Store(t)
	failEvents(t, s, []postbox.Event{orderEvent(1)}, []string{"status 500 from the outbox's sink"})
	billing := newEndpoint(t, s, "billing", store.EndpointEnabled)
	crm := newEndpoint(t, s, "crm", store.EndpointEnabled)
	shared, other := orderEvent(2), orderEvent(3)
	other.EventType = "invoice.sent"
	failDeliveries(t, s, billing, []postbox.Event{shared, other}, []string{"status 503: billing busy", xssError})
	failDeliveries(t, s, crm, []postbox.Event{shared}, []string{"dial tcp 10.0.0.7:443: connection refused"})
	routeEvents(t, s, crm, orderEvent(4), orderEvent(5))
	must(t, s.EndpointSetState(ctx, crm.ID, store.EndpointAutoDisabled))

	quiet := testlog.Discard()
	c, err := console.New(console.Config{Store: s, Logger: quiet, SampleEvery: time.Second})
	must(t, err)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)

	p, err := b.NewPage(ctx)
	must(t, err)
	must(t, p.Navigate(ctx, srv.URL+"/"))
	assertText(t, ctx, p, "endpoints-failed", "3")
	assertText(t, ctx, p, "endpoints-pending", "2")
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#endpoints tbody tr").length`); n != 2 {
		t.Fatalf("overview: %d endpoint rows, want 2", n)
	}
	screenshot(t, ctx, p, "overview-endpoints")

	// The endpoints' failed card opens the failed page on every endpoint.
	must(t, p.ClickAndWait(ctx, `#endpoint-deliveries a[href="/failed?endpoint=all"]`))
	var names []string
	must(t, p.Eval(ctx, `Array.from(document.querySelectorAll("#failed .endpoint-name"), e => e.textContent).sort()`, &names))
	if fmt.Sprint(names) != "[billing billing crm]" {
		t.Fatalf("every endpoint view: rows of %q, want billing twice and crm", names)
	}
	var selected string
	must(t, p.Eval(ctx, `document.getElementById("endpoint-select").value`, &selected))
	if selected != "all" {
		t.Fatalf("the selector reads %q, want all", selected)
	}
	assertInert(t, ctx, b, p, "every endpoint view")
	screenshot(t, ctx, p, "failed-endpoints")

	// Choosing billing in the selector shows billing's at once.
	must(t, p.Eval(ctx, fmt.Sprintf(`(s => { s.value = %q; s.dispatchEvent(new Event("change")); })(document.getElementById("endpoint-select"))`, billing.ID), nil))
	must(t, p.WaitFor(ctx, fmt.Sprintf(`location.search.includes(%q) && document.readyState === "complete" && document.getElementById("failed") !== null`, "endpoint="+billing.ID.String())))
	must(t, p.Eval(ctx, `Array.from(document.querySelectorAll("#failed .endpoint-name"), e => e.textContent)`, &names))
	if fmt.Sprint(names) != "[billing billing]" {
		t.Fatalf("billing view: rows of %q, want billing's two", names)
	}

	// Retry billing's delivery of the shared event: tick, Retry…, confirm.
	must(t, p.Click(ctx, fmt.Sprintf(`#failed input[name="id"][value=%q]`, shared.ID)))
	must(t, p.ClickAndWait(ctx, "#retry-selected"))
	assertText(t, ctx, p, "confirm-title", "Retry 1 failed delivery?")
	assertText(t, ctx, p, "confirm-button", "Yes, retry 1 delivery")
	must(t, p.ClickAndWait(ctx, "#confirm-button"))
	assertText(t, ctx, p, "notice", "Sent 1 failed delivery back to the queue.")
	must(t, p.Eval(ctx, `document.getElementById("endpoint-select").value`, &selected))
	if selected != billing.ID.String() {
		t.Fatalf("after the retry the selector reads %q, want billing's id", selected)
	}
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#failed tbody tr").length`); n != 1 {
		t.Fatalf("billing view after the retry: %d rows, want 1", n)
	}
	if got := deliveryStatus(t, s, billing, shared.ID); got != store.StatusPending {
		t.Fatalf("billing's retried delivery: %q, want pending", got)
	}
	if got := deliveryStatus(t, s, crm, shared.ID); got != store.StatusFailed {
		t.Fatalf("crm's delivery of the same event: %q, want failed", got)
	}

	// Every billing delivery that matches: the confirmation counts them.
	must(t, p.Click(ctx, "#select-all"))
	must(t, p.ClickAndWait(ctx, "#purge-selected"))
	assertText(t, ctx, p, "confirm-title", "Purge 1 failed delivery?")
	screenshot(t, ctx, p, "confirm-endpoint")
	must(t, p.ClickAndWait(ctx, "#confirm-cancel"))
	if d := b.Dialogs(); len(d) != 0 {
		t.Fatalf("dialogs opened: %q", d)
	}
}
