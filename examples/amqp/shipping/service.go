package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox/examples/internal/order"
	"github.com/postbox-go/postbox/inbox"
	inboxamqp "github.com/postbox-go/postbox/inbox/amqp"
	"github.com/postbox-go/postbox/store/postgres"
)

// errInjected is the failure --fail-rate injects.
var errInjected = errors.New("injected failure (--fail-rate)")

// service books shipments.
type service struct {
	cfg       config
	log       *slog.Logger
	store     *postgres.Store
	ib        *inbox.Inbox[pgx.Tx]
	shipments string // quoted table
}

// run sets up the database and the topology, then consumes the queue until
// ctx ends.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	pool, err := pgxpool.New(ctx, cfg.DB)
	if err != nil {
		return fmt.Errorf("--db: %w", err)
	}
	defer pool.Close()
	st, err := postgres.New(pool, postgres.Config{Schema: cfg.Schema})
	if err != nil {
		return err
	}
	s := &service{cfg: cfg, log: log, store: st, ib: inbox.New(st.Driver()), shipments: st.Table("shipments")}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	if err := declareTopology(cfg); err != nil {
		return err
	}
	log.Info("booking a shipment per order.created event", "queue", cfg.Queue, "exchange", cfg.Exchange, "table", s.shipments)
	c, err := inboxamqp.New(inboxamqp.Config{
		URL:           cfg.AMQP,
		Queue:         cfg.Queue,
		Process:       s.ib.Processor(s.book),
		RedeliveryMin: cfg.RedeliveryMin,
		Logger:        log,
	})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// migrate runs the postbox migrations and creates the shipments table. It
// has, deliberately, no unique constraint: a duplicate effect would show
// as a second row.
func (s *service) migrate(ctx context.Context) error {
	if _, err := s.store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate postbox: %w", err)
	}
	_, err := s.store.Pool().Exec(ctx, `create table if not exists `+s.shipments+` (
  event_id   uuid not null,
  order_id   uuid not null,
  amount     bigint not null,
  created_at timestamptz not null default now()
)`)
	return err
}

// book books the shipment of an order.created event, in the transaction
// that writes the event's inbox row: both commit, or neither does. Another
// event type is acknowledged without effect; a payload that is not an
// order is rejected, into the dead-letter queue.
func (s *service) book(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
	if ev.EventType != order.EventType {
		return nil
	}
	var o order.Created
	if err := json.Unmarshal(ev.Payload, &o); err != nil || o.Amount <= 0 {
		return inbox.Reject(fmt.Errorf("not an order.created payload: %v", err))
	}
	if _, err := tx.Exec(ctx, "insert into "+s.shipments+" (event_id, order_id, amount) values ($1, $2, $3)", ev.ID, o.OrderID, o.Amount); err != nil {
		return fmt.Errorf("book shipment: %w", err)
	}
	if rand.Float64() < s.cfg.FailRate {
		return errInjected // after writing: the rollback takes the row away
	}
	s.log.Info("shipment booked", "event_id", ev.ID, "order_id", o.OrderID)
	return nil
}

// declareTopology declares the exchange, the queue with its dead-letter
// queue, and the binding. Declaring what exists with the same settings is a
// no-op.
func declareTopology(cfg config) error {
	conn, err := amqp091.DialConfig(cfg.AMQP, amqp091.Config{Dial: amqp091.DefaultDial(10 * time.Second)})
	if err != nil {
		return fmt.Errorf("--amqp: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	dead := cfg.Queue + ".dead"
	quorum := amqp091.Table{"x-queue-type": "quorum"}
	steps := []func() error{
		func() error {
			return ch.ExchangeDeclare(cfg.Exchange, amqp091.ExchangeTopic, true, false, false, false, nil)
		},
		func() error { return ch.ExchangeDeclare(dead, amqp091.ExchangeFanout, true, false, false, false, nil) },
		func() error { _, err := ch.QueueDeclare(dead, true, false, false, false, quorum); return err },
		func() error { return ch.QueueBind(dead, "", dead, false, nil) },
		func() error {
			_, err := ch.QueueDeclare(cfg.Queue, true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": dead})
			return err
		},
		func() error { return ch.QueueBind(cfg.Queue, "order.*", cfg.Exchange, false, nil) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("declare the topology of queue %s: %w", cfg.Queue, err)
		}
	}
	return nil
}
