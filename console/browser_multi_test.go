package console_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/postboxtest/testlog"
)

// The source switcher in a real browser: choosing another source in the
// header's list shows its failed events at once (the page's script
// submits the switch), the part of the console kept.
func TestBrowserMultiSwitchesSource(t *testing.T) {
	// Not parallel: each runs a browser, the heaviest load of the suite.
	b := launchChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, stores, list, events := twoSources(t)
	m, err := console.NewMulti(ctx, console.MultiConfig{
		Console: console.Config{Logger: testlog.Discard()},
		List:    func(context.Context) ([]console.MultiSource, error) { return list, nil },
		Open: func(_ context.Context, src console.MultiSource) (console.SourceConsole, error) {
			return console.SourceConsole{Store: stores[src.Name]}, nil
		},
	})
	must(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		m.Run(runCtx)
	}()
	t.Cleanup(func() {
		stop()
		<-ran
	})
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)

	p, err := b.NewPage(ctx)
	must(t, err)
	must(t, p.Navigate(ctx, srv.URL+"/failed"))
	assertText(t, ctx, p, "current-source", "a")
	if n := evalInt(t, ctx, p, `document.querySelectorAll("#source-select option").length`); n != 2 {
		t.Fatalf("the switcher lists %d sources, want 2", n)
	}
	must(t, p.Eval(ctx, `(() => { const s = document.getElementById("source-select"); s.value = "b"; s.dispatchEvent(new Event("change")); return 0 })()`, nil))
	must(t, p.WaitFor(ctx, `document.getElementById("current-source")?.textContent === "b"`))
	var path, text string
	must(t, p.Eval(ctx, `location.pathname`, &path))
	must(t, p.Eval(ctx, `document.getElementById("failed")?.textContent ?? ""`, &text))
	if path != "/failed" || !strings.Contains(text, events["b"].ID.String()) || strings.Contains(text, events["a"].ID.String()) {
		t.Fatalf("after the switch: %s, table %q", path, text)
	}
	assertInert(t, ctx, b, p, "the failed page of b")
}
