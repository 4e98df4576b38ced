// Package demo runs the whole postbox pipeline in one process, with faults
// injected, and reconciles the outcome from the database: a producer writes
// orders and their events in one transaction, a relay delivers them as
// signed webhooks to a consumer built on the inbox, and at the end every
// order must have been applied exactly once.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/httpfault"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink/webhook"
)

// Defaults of Config.
const (
	EventsDefault    = 1000
	FaultRateDefault = 0.1
	RateDefault      = 1000
	TimeoutDefault   = 5 * time.Minute
	SchemaDefault    = "postbox_demo"
)

// Config configures a demo run.
type Config struct {
	// DB is "sqlite:PATH" (a new file), a postgres:// URL, or empty for a
	// new SQLite file in a temporary folder.
	DB string
	// Schema is the PostgreSQL schema of the run, dropped and made afresh
	// (default SchemaDefault), and dropped again at the end of a run that
	// reconciles, unless Keep.
	Schema string
	// Keep keeps the PostgreSQL schema after the run. A run that fails
	// keeps it too, to be looked into.
	Keep bool
	// Events is the number of orders created (default EventsDefault).
	Events int
	// FaultRate is the probability of each injected fault (default
	// FaultRateDefault); negative turns faults off.
	FaultRate float64
	// Rate is the number of orders created per second (default RateDefault).
	Rate int
	// Timeout bounds the whole run (default TimeoutDefault).
	Timeout time.Duration
	// Out receives the progress and the report.
	Out io.Writer
	// Live redraws one progress line (for a terminal) instead of printing a
	// line per second.
	Live bool
}

// Report is the reconciliation of a run, computed from the database.
type Report struct {
	Created      int64 `json:"created"`
	AppliedOnce  int64 `json:"applied_once"`
	AppliedTwice int64 `json:"applied_twice"`
	Lost         int64 `json:"lost"`
	// Duplicates is the number of deliveries the inbox absorbed.
	Duplicates int64 `json:"duplicates_absorbed"`
	// DeadLettered is the number of events that ended failed.
	DeadLettered int64         `json:"failed"`
	Elapsed      time.Duration `json:"-"`
}

// OK reports whether nothing was lost and nothing applied twice.
func (r Report) OK() bool { return r.Lost == 0 && r.AppliedTwice == 0 && r.Created > 0 }

// counters are the live figures of the progress line (the report itself
// comes from the database).
type counters struct {
	created, delivered, retried, duplicates atomic.Int64
}

// Run runs the demo and returns its reconciliation.
func Run(ctx context.Context, cfg Config) (rep Report, err error) {
	if cfg.Events == 0 {
		cfg.Events = EventsDefault
	}
	if cfg.FaultRate == 0 {
		cfg.FaultRate = FaultRateDefault
	}
	cfg.FaultRate = max(cfg.FaultRate, 0)
	if cfg.Rate == 0 {
		cfg.Rate = RateDefault
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = TimeoutDefault
	}
	if cfg.Schema == "" {
		cfg.Schema = SchemaDefault
	}
	switch {
	case cfg.Events < 0:
		return Report{}, fmt.Errorf("demo: --events %d is negative", cfg.Events)
	case cfg.FaultRate >= 1:
		return Report{}, fmt.Errorf("demo: --fault-rate %v: want less than 1", cfg.FaultRate)
	case cfg.Rate < 0:
		return Report{}, fmt.Errorf("demo: --rate %d is negative", cfg.Rate)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	begin := time.Now()

	b, err := openBackend(ctx, cfg.DB, cfg.Schema)
	if err != nil {
		return Report{}, err
	}
	defer b.close()
	defer func() { b.dropSchema(context.WithoutCancel(ctx), cfg, err == nil && rep.OK()) }()

	var c counters
	faults := newFaults(cfg.FaultRate)
	secret := newSecret()

	// The consumer: the inbox's webhook handler behind the fault injector.
	handler, err := inbox.NewHandler(inbox.HandlerConfig{
		Secrets: []string{secret},
		Logger:  quietLogger(),
		Process: func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
			out, err := b.process(ctx, ev, b.reserve)
			if out == inbox.Duplicate {
				c.duplicates.Add(1)
			}
			return out, err
		},
	})
	if err != nil {
		return Report{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Report{}, err
	}
	srv := &http.Server{Handler: faults.middleware(handler), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	wh, err := webhook.New(webhook.Config{URL: "http://" + ln.Addr().String() + "/webhook", Secrets: []string{secret}, Timeout: 2 * time.Second})
	if err != nil {
		return Report{}, err
	}
	sink := &countingSink{next: faults.duplicating(wh), c: &c}

	// The relay, which crashes once halfway and is restarted.
	relays := &relayRunner{backend: b, sink: sink}
	relays.start(ctx)

	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	progressWG.Go(func() { showProgress(ctx, cfg, b, &c, progressDone) })

	err = produce(ctx, b, cfg, &c, func() {
		relays.crashAndRestart(ctx)
		say(cfg, fmt.Sprintf("relay crashed (nothing released, nothing settled); a new relay takes over and reclaims its events when their lease (%v) expires", relayConfig().Lease))
	})
	if err == nil {
		err = waitSettled(ctx, b)
	}
	relays.stop()
	close(progressDone)
	progressWG.Wait()
	if err != nil {
		return Report{}, err
	}
	rep, err = reconcile(context.WithoutCancel(ctx), b)
	if err != nil {
		return rep, err
	}
	rep.Duplicates = c.duplicates.Load()
	rep.Elapsed = time.Since(begin)
	return rep, nil
}

// orderPayload is the article's order event.
type orderPayload struct {
	EventID    string    `json:"event_id"`
	OrderID    string    `json:"order_id"`
	UserID     string    `json:"user_id"`
	Amount     int64     `json:"amount"`
	OccurredAt time.Time `json:"occurred_at"`
}

// produce creates cfg.Events orders, each with its event in the same
// transaction, at cfg.Rate per second; halfway it calls crash.
func produce(ctx context.Context, b *backend, cfg Config, c *counters, crash func()) error {
	tick := time.NewTicker(time.Second / time.Duration(max(cfg.Rate, 1)))
	defer tick.Stop()
	for i := range cfg.Events {
		if i == cfg.Events/2 {
			crash()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("demo: stopped while creating orders: %w", ctx.Err())
		}
		id := postbox.NewID()
		order := orderPayload{EventID: id.String(), OrderID: uuid.NewString(),
			UserID: fmt.Sprintf("user-%d", i%97), Amount: int64(100 + i%900), OccurredAt: time.Now().UTC()}
		ev := postbox.Event{ID: id, AggregateType: "order", AggregateID: order.OrderID, EventType: "order.created",
			DedupKey: "order.created:" + order.OrderID}
		ev.Payload, _ = json.Marshal(order)
		if err := b.createOrder(ctx, order, ev); err != nil {
			return fmt.Errorf("demo: create order: %w", err)
		}
		c.created.Add(1)
	}
	return nil
}

// reserve is the consumer's business logic: one reservation row per order
// event, written in the inbox transaction. A fault may make it fail after
// the inbox row was written: the transaction then rolls back entirely.
func (b *backend) reserve(ctx context.Context, exec execer, ev *inbox.Event) error {
	var p orderPayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return fmt.Errorf("order payload: %w", err)
	}
	insert := b.insertReservation
	if insert == "" {
		insert = insertReservationSQL
	}
	if err := exec(ctx, fmt.Sprintf(insert, b.reservations), ev.ID.String(), p.OrderID, p.Amount); err != nil {
		return err
	}
	if httpfault.HandlerFails(ctx) {
		return httpfault.ErrInjected
	}
	return nil
}

// waitSettled waits until no event is pending or in flight.
func waitSettled(ctx context.Context, b *backend) error {
	for {
		st, err := b.outbox.Stats(ctx)
		if err != nil {
			return err
		}
		if st.Pending == 0 && st.Processing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: events still pending (%d) or in flight (%d) at the time limit", st.Pending, st.Processing)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func newSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// relayConfig is the demo's relay: short backoff and lease, so faults and
// the crash resolve within seconds.
func relayConfig() relay.Config {
	return relay.Config{
		Logger:     quietLogger(),
		BackoffMin: 20 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
		Lease: time.Second, PollInterval: 100 * time.Millisecond,
		MaxAttempts: 50, ShutdownTimeout: time.Second,
	}
}
