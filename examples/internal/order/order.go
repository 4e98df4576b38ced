// Package order is the producer side of the examples, after the article: an
// order service that writes each new order and its "order.created" event to
// the outbox in one transaction, so the event exists if and only if the
// order does.
//
// It is a package of its own, rather than part of the orders command, so
// that the warehouse example's end-to-end test creates its backlog through
// the same code path as the command.
package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store/postgres"
)

// EventType is the type of the event written with every order.
const EventType = "order.created"

// AggregateType is the aggregate type of the events: an order.
const AggregateType = "order"

// DedupKey returns the outbox dedup key of an order's order.created event,
// the article's 'order.created:' || id.
func DedupKey(orderID uuid.UUID) string { return EventType + ":" + orderID.String() }

// Order is one order of the example shop.
type Order struct {
	// ID identifies the order. Zero means "generate a UUIDv7".
	ID uuid.UUID
	// UserID is the customer, such as "u_123". Required.
	UserID string
	// Amount is the order's total in cents. Positive.
	Amount int64
	// CreatedAt is set by the database when the order is written.
	CreatedAt time.Time
}

// Created is the payload of an order.created event, the article's:
//
//	{"event_id": ..., "order_id": ..., "user_id": ..., "amount": ..., "occurred_at": ...}
//
// EventID is the outbox row id, so one id travels end to end: the payload,
// the webhook id and the consumer's inbox key name the same event.
type Created struct {
	EventID    uuid.UUID `json:"event_id"`
	OrderID    uuid.UUID `json:"order_id"`
	UserID     string    `json:"user_id"`
	Amount     int64     `json:"amount"`
	OccurredAt time.Time `json:"occurred_at"`
}

// Service writes orders and their events. It is safe for concurrent use.
type Service struct {
	store  *postgres.Store
	orders string // quoted, schema-qualified table name
}

// NewService returns a service writing to the orders table and the outbox
// of st's schema. Call Migrate once before use.
func NewService(st *postgres.Store) *Service {
	return &Service{store: st, orders: st.Table("orders")}
}

// Table returns the quoted, schema-qualified name of the orders table.
func (s *Service) Table() string { return s.orders }

// Migrate applies the postbox migrations and creates the orders table if it
// is missing. Running it again is a no-op.
func (s *Service) Migrate(ctx context.Context) error {
	if _, err := s.store.Migrate(ctx); err != nil {
		return fmt.Errorf("order: migrate postbox: %w", err)
	}
	// The advisory lock lets several instances start at once: concurrent
	// "create table if not exists" of one table can otherwise collide.
	err := pgx.BeginFunc(ctx, s.store.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock(hashtext($1))", "postbox example "+s.orders); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `create table if not exists `+s.orders+` (
  id         uuid primary key,
  user_id    text not null,
  amount     bigint not null check (amount > 0),
  created_at timestamptz not null default now()
)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("order: create table: %w", err)
	}
	return nil
}

// Create writes o and its order.created event in one transaction and
// returns the event's payload. The event id is the outbox row id and the
// payload's event_id; the dedup key is DedupKey(o.ID).
//
// Either both rows are committed or neither is: an order that cannot be
// written (a taken id, a non-positive amount) leaves no event, and an event
// that cannot be written (its dedup key taken, which postbox reports as
// postbox.ErrDuplicate) leaves no order.
func (s *Service) Create(ctx context.Context, o Order) (Created, error) {
	if o.UserID == "" {
		return Created{}, errors.New("order: user id is empty")
	}
	if o.ID == uuid.Nil {
		o.ID = postbox.NewID()
	}
	c := Created{EventID: postbox.NewID(), OrderID: o.ID, UserID: o.UserID, Amount: o.Amount}
	err := pgx.BeginFunc(ctx, s.store.Pool(), func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, "insert into "+s.orders+" (id, user_id, amount) values ($1, $2, $3) returning created_at",
			o.ID, o.UserID, o.Amount).Scan(&c.OccurredAt)
		if err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		c.OccurredAt = c.OccurredAt.UTC()
		payload, err := json.Marshal(c)
		if err != nil {
			return err
		}
		// A skipped duplicate is reported as an error, and returning it
		// rolls the order back with the event.
		return s.store.EnqueueTx(ctx, tx, postbox.Event{
			ID:            c.EventID,
			AggregateType: AggregateType,
			AggregateID:   o.ID.String(),
			EventType:     EventType,
			Payload:       payload,
			DedupKey:      DedupKey(o.ID),
		})
	})
	if err != nil {
		return Created{}, fmt.Errorf("order: create %s: %w", o.ID, err)
	}
	return c, nil
}
