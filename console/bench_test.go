package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/store/postgres"
)

// fillFailed writes n failed events into s in one INSERT ... SELECT: four
// event types, 50,000 aggregates, one failure a second going back from now,
// errors of a thousand texts; then analyzes the table.
func fillFailed(b *testing.B, s *postgres.Store, n int) {
	b.Helper()
	ctx := context.Background()
	_, err := s.Pool().Exec(ctx, `insert into `+s.Table("outbox_events")+`
		(aggregate_type, aggregate_id, event_type, payload, status, retries, last_error, created_at, processed_at)
		select 'order', (i % 50000)::text,
		       (array['order.paid', 'order.created', 'invoice.sent', 'user.signup'])[1 + i % 4],
		       jsonb_build_object('order_id', i, 'amount', i % 997),
		       'failed', 25, 'status 503: upstream busy after ' || (i % 1000) || 'ms',
		       now() - make_interval(secs => i) - interval '1 hour', now() - make_interval(secs => i)
		from generate_series(1, $1::int) i`, n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "vacuum analyze "+s.Table("outbox_events")); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkConsoleMillionFailed measures the answers of the console's
// pages over HTTP with 1,000,000 failed events in PostgreSQL (goals:
// the failed page under 300 ms, the overview under 500 ms): the failed
// page with each filter, the overview as served (from the latest sample
// of Console.Run) and as read at each request (a console without Run;
// what one sample costs the database). Run it with
//
//	go test -run '^$' -bench ConsoleMillionFailed -benchtime 20x ./console/
func BenchmarkConsoleMillionFailed(b *testing.B) {
	s := pgtest.Store(b)
	start := time.Now()
	fillFailed(b, s, 1_000_000)
	b.Logf("filled 1,000,000 failed events in %v", time.Since(start).Round(time.Millisecond))
	serve := func(sampled bool) string {
		c, err := console.New(console.Config{Store: s, Logger: testlog.Discard(), SampleEvery: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		if sampled {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); c.Run(ctx) }()
			b.Cleanup(func() { cancel(); <-done })
		}
		srv := httptest.NewServer(c)
		b.Cleanup(srv.Close)
		return srv.URL
	}
	sampled, unsampled := serve(true), serve(false)
	client := &http.Client{Timeout: time.Minute}
	get := func(b *testing.B, url string) string {
		res, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d\n%s", url, res.StatusCode, body)
		}
		return string(body)
	}
	// A cursor half-way down: the page after 500,000 events.
	// A cursor half-way down: the page after 500,000 events.
	var cursor string
	if err := s.Pool().QueryRow(context.Background(),
		`select (extract(epoch from processed_at) * 1000000)::bigint || '.' || seq from `+s.Table("outbox_events")+
			` order by processed_at desc, seq desc offset 500000 limit 1`).Scan(&cursor); err != nil {
		b.Fatal(err)
	}
	// The sampled console answers from its first sample once it is taken.
	countedAt := regexp.MustCompile(`id="counted-at">Counts as of ([^(]+)`)
	for first := ""; ; time.Sleep(100 * time.Millisecond) {
		m := countedAt.FindStringSubmatch(get(b, sampled+"/"))
		if m != nil && m[1] == first {
			break
		}
		if m != nil {
			first = m[1]
		}
	}
	for _, page := range []struct{ name, url string }{
		{"failed-first-page", sampled + "/failed"},
		{"failed-page-500000-deep", sampled + "/failed?after=" + cursor},
		{"failed-by-type", sampled + "/failed?type=invoice.sent"},
		{"failed-by-aggregate", sampled + "/failed?aggregate_type=order&aggregate_id=4242"},
		{"failed-by-error-text", sampled + "/failed?error=after+999ms"},
		{"failed-older-than-5d", sampled + "/failed?older=5d"},
		{"overview", sampled + "/"},
		{"overview-read-per-request", unsampled + "/"},
	} {
		b.Run(page.name, func(b *testing.B) {
			get(b, page.url) // warm
			b.ResetTimer()
			for range b.N {
				get(b, page.url)
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
		})
	}
}
