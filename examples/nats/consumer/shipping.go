package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox/examples/internal/order"
	"github.com/postbox-go/postbox/examples/nats/orderstream"
	"github.com/postbox-go/postbox/inbox"
	inboxnats "github.com/postbox-go/postbox/inbox/nats"
	"github.com/postbox-go/postbox/store/postgres"
)

// Durable is the name of the service's JetStream consumer.
const Durable = "shipping"

// config is what the command line sets.
type config struct {
	DB, Schema, NATS string
	// FailRate is the share of handler runs that fail after writing.
	FailRate float64
}

// shipping applies order.created events into the shipments table, which
// has, deliberately, no unique constraint: an order shipped twice would
// show as two rows.
type shipping struct {
	shipments string
	failRate  float64
}

// ship writes the order's shipment, then fails failRate of the time.
func (s *shipping) ship(ctx context.Context, tx pgx.Tx, ev *inbox.Event, o order.Created) error {
	if o.OrderID == uuid.Nil {
		return inbox.Reject(errors.New("order_id is missing"))
	}
	_, err := tx.Exec(ctx, "insert into "+s.shipments+" (event_id, order_id, amount) values ($1, $2, $3)", ev.ID, o.OrderID, o.Amount)
	if err != nil {
		return err
	}
	if rand.Float64() < s.failRate {
		return errors.New("the shipping handler failed after writing (--fail-rate)")
	}
	return nil
}

// run consumes the stream until ctx ends.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	if cfg.DB == "" {
		return errors.New("--db (or $DB_DSN) is required")
	}
	if cfg.FailRate < 0 || cfg.FailRate > 1 {
		return fmt.Errorf("--fail-rate %v: want 0 to 1", cfg.FailRate)
	}
	nc, js, err := orderstream.Open(ctx, cfg.NATS, "shipping")
	if err != nil {
		return err
	}
	defer nc.Close()
	cons, err := js.CreateOrUpdateConsumer(ctx, orderstream.Stream, jetstream.ConsumerConfig{
		Durable:       Durable,
		FilterSubject: "orders." + order.EventType,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w", Durable, err)
	}

	pool, err := pgxpool.New(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := postgres.New(pool, postgres.Config{Schema: cfg.Schema})
	if err != nil {
		return err
	}
	if _, err := st.Migrate(ctx); err != nil {
		return err
	}
	s := &shipping{shipments: st.Table("shipments"), failRate: cfg.FailRate}
	if _, err := pool.Exec(ctx, "create table if not exists "+s.shipments+
		" (event_id uuid not null, order_id uuid not null, amount bigint not null, shipped_at timestamptz not null default now())"); err != nil {
		return err
	}
	routes := inbox.NewRouter[pgx.Tx]()
	inbox.Handle(routes, order.EventType, s.ship)
	log.Info("shipping started", "stream", orderstream.Stream, "consumer", Durable, "fail_rate", cfg.FailRate)
	c, err := inboxnats.New(inboxnats.Config{
		Consumer:      cons,
		Process:       inbox.New(st.Driver()).Processor(routes.Apply),
		RedeliveryMin: 100 * time.Millisecond,
		RedeliveryMax: 5 * time.Second,
		Logger:        log,
	})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}
