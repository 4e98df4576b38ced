package console_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/store"
)

// The replay page in a real browser: from the navigation, the form
// (types, an age for since, a name), its confirmation counting what it
// sends, then the replay's page, which refreshes itself while the replay
// runs and stops once it is done; the events are pending again, marked;
// the form lists the replay. The screenshots of docs/console/ are taken
// on the way (replay.png: the form and the replays).
func TestBrowserReplay(t *testing.T) {
	// Not parallel: each runs a browser, the heaviest load of the suite.
	b := launchChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	s := pgtest.Store(t)
	var orders []postbox.Event
	for i := range 5 {
		orders = append(orders, orderEvent(i+1))
	}
	deliverKept(t, s, append(orders, invoiceEvent(1), invoiceEvent(2))...)
	newEndpoint(t, s, "billing", store.EndpointEnabled)
	newEndpoint(t, s, "warehouse", store.EndpointEnabled)
	c, err := console.New(console.Config{Store: s, Replay: replayConfig(t, s, memArchive(t)), Logger: testlog.Discard()})
	must(t, err)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	p, err := b.NewPage(ctx)
	must(t, err)
	must(t, p.Navigate(ctx, srv.URL+"/"))

	must(t, p.ClickAndWait(ctx, `header nav a[href="/replay"]`))
	setField(t, ctx, p, `#replay-form input[name="since"]`, "2h")
	setField(t, ctx, p, `#replay-form input[name="types"]`, "order.*")
	setField(t, ctx, p, `#replay-form input[name="name"]`, "replay-incident-42")
	must(t, p.ClickAndWait(ctx, "#count-button"))
	assertText(t, ctx, p, "confirm-title", "Replay 5 events?")
	if what := textOf(t, ctx, p, "confirm-what"); !strings.Contains(what, "Postbox-Replay: replay-incident-42") || !strings.Contains(what, "of type order.*") {
		t.Fatalf("the confirmation says %q", what)
	}
	screenshot(t, ctx, p, "replay-confirm")
	must(t, p.ClickAndWait(ctx, "#confirm-button"))
	must(t, p.WaitFor(ctx, `document.getElementById("replay-state")?.textContent === "done"`))
	assertText(t, ctx, p, "replay-done", "Done: 5 events sent again.")
	assertInert(t, ctx, b, p, "the replay's page")
	for _, e := range orders {
		replayed(t, s, e.ID, "replay-incident-42")
	}
	screenshot(t, ctx, p, "replay-run")

	must(t, p.ClickAndWait(ctx, `header nav a[href="/replay"]`))
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#replays tbody tr").length`); n != 1 {
		t.Fatalf("the replays listed: %d, want 1", n)
	}
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#endpoint-select option").length`); n != 3 {
		t.Fatalf("the endpoint choices: %d, want the outbox's queue and the 2 endpoints", n)
	}
	screenshot(t, ctx, p, "replay")
	if d := b.Dialogs(); len(d) != 0 {
		t.Fatalf("dialogs opened: %q", d)
	}
}
