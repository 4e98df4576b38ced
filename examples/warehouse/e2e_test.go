package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox/examples/internal/order"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	relayservice "github.com/postbox-go/postbox/service"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// acks is a faulty network in front of the warehouse: it loses a share of
// the successful answers on their way back, so the relay delivers events
// that were applied again. It counts what it sees.
type acks struct {
	next     http.Handler
	loseRate float64

	lost       atomic.Int64 // 2xx answers replaced by a 503
	duplicates atomic.Int64 // "duplicate" answers
	errors     atomic.Int64 // 5xx answers of the warehouse itself
}

func (a *acks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	a.next.ServeHTTP(rec, r)
	ok := rec.Code >= 200 && rec.Code < 300
	switch {
	case ok && strings.Contains(rec.Body.String(), `"duplicate"`):
		a.duplicates.Add(1)
	case rec.Code >= 500:
		a.errors.Add(1)
	}
	if ok && rand.Float64() < a.loseRate {
		a.lost.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// The end-to-end check: a backlog of orders, written by the orders
// example's code, delivered by the relay to the warehouse while its handler
// fails 30% of the time after writing (--fail-rate 0.3) and some answers
// are lost: every order is reserved exactly once, and the outbox ends with
// every event done.
func TestRelayDeliversEveryOrderExactlyOnceDespiteFaults(t *testing.T) {
	const n = 300
	ctx := context.Background()

	// The producer: its own schema, as another service's database.
	pool := pgtest.Pool(t)
	shop, err := postgres.New(pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	orders := order.NewService(shop)
	if err := orders.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if created, err := orders.Produce(ctx, order.ProduceParams{Rate: 10000, Count: n}); err != nil || created != n {
		t.Fatalf("Produce: %d orders, %v", created, err)
	}

	// The consumer, with its fault switch on, behind a lossy network.
	w := newWarehouse(t, 0.3)
	lossy := &acks{next: w.routes(), loseRate: 0.15}
	srv := httptest.NewServer(lossy)
	t.Cleanup(srv.Close)

	sink, err := webhook.New(webhook.Config{URL: srv.URL + "/webhook", Secrets: []string{testSecret}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The relay postbox relay runs (package service), with its row in the
	// presence table.
	r, err := relayservice.NewRelay(ctx, relayservice.RelayConfig{
		Outbox: shop.Driver(), Sink: sink, Presence: &relayservice.PresenceConfig{Store: shop.Driver()},
		Relay: relay.Config{
			Logger:     testlog.Discard(),
			BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
			ShutdownTimeout: time.Second,
			Retention:       time.Hour, // keep delivered events, to check them all done
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(runCtx) }()

	start := time.Now()
	var st store.StatusCounts
	for {
		if st, err = shop.Stats(ctx); err != nil {
			t.Fatal(err)
		}
		if st.Done == n || st.Failed > 0 || time.Since(start) > 7*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("%d events delivered in %v: %d faults injected, %d answers lost, %d duplicates answered",
		st.Done, time.Since(start).Round(time.Millisecond), w.faults.Load(), lossy.lost.Load(), lossy.duplicates.Load())

	if st.Done != n || st.Pending != 0 || st.Processing != 0 || st.Failed != 0 {
		t.Fatalf("outbox: %+v, want all %d events done", st, n)
	}

	// Every order reserved exactly once: none missing, none doubled, none
	// for an order that does not exist, each under its event's id.
	var missing, doubled, strays, wrongEvent, reservations int
	err = pool.QueryRow(ctx, `
with per_order as (
  select o.id, count(r.order_id) as n
  from `+orders.Table()+` o left join `+w.reservations+` r on r.order_id = o.id
  group by o.id)
select
  (select count(*) from per_order where n = 0),
  (select count(*) from per_order where n > 1),
  (select count(*) from `+w.reservations+` r where not exists (select 1 from `+orders.Table()+` o where o.id = r.order_id)),
  (select count(*) from `+w.reservations+` r join `+shop.Table("outbox_events")+` e on e.aggregate_id = r.order_id::text
     where e.id <> r.event_id or e.payload->>'amount' <> r.amount::text),
  (select count(*) from `+w.reservations+`)`).Scan(&missing, &doubled, &strays, &wrongEvent, &reservations)
	if err != nil {
		t.Fatal(err)
	}
	if missing != 0 || doubled != 0 || strays != 0 || wrongEvent != 0 || reservations != n {
		t.Fatalf("%d orders without a reservation, %d with several, %d stray reservations, %d under the wrong event or amount; %d reservations for %d orders",
			missing, doubled, strays, wrongEvent, reservations, n)
	}
	if done := w.count(t, "inbox_events", "handler_status = 'done'"); done != n {
		t.Fatalf("%d inbox rows done, want %d", done, n)
	}

	// The faults really happened, so retries and duplicates were tested.
	if w.faults.Load() == 0 || lossy.errors.Load() == 0 {
		t.Fatalf("no handler failed (%d faults injected, %d 5xx answers): the retry path was not exercised",
			w.faults.Load(), lossy.errors.Load())
	}
	if lossy.lost.Load() == 0 || lossy.duplicates.Load() == 0 {
		t.Fatalf("%d answers lost, %d duplicates answered: the duplicate path was not exercised",
			lossy.lost.Load(), lossy.duplicates.Load())
	}
}
