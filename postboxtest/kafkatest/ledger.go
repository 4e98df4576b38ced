package kafkatest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/inbox"
	inboxkafka "github.com/postbox-go/postbox/inbox/kafka"
	"github.com/postbox-go/postbox/store/postgres"
)

// Ledger is a business table that records every application of an event,
// with no constraint of its own: each event id must appear in it exactly
// once, which only the inbox can ensure.
type Ledger struct {
	store *postgres.Store
	table string
	inbox *inbox.Inbox[pgx.Tx]
}

// NewLedger creates the table in the store's schema.
func NewLedger(t testing.TB, s *postgres.Store) *Ledger {
	t.Helper()
	l := &Ledger{store: s, table: s.Table("kafka_applied"), inbox: inbox.New(s.Driver())}
	if _, err := s.Pool().Exec(context.Background(), "create table "+l.table+" (event_id uuid not null)"); err != nil {
		t.Fatal(err)
	}
	return l
}

// errInjected is the failure of a handler that fails on purpose.
var errInjected = errors.New("injected handler failure")

// Process applies an event through the inbox: it records the event, then
// fails a share failRate of the time, after the insert, so that only the
// inbox's rollback keeps the failed try out of the table.
func (l *Ledger) Process(failRate float64) func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
	return l.inbox.Processor(func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
		if _, err := tx.Exec(ctx, "insert into "+l.table+" (event_id) values ($1)", ev.ID); err != nil {
			return err
		}
		if rand.Float64() < failRate {
			return errInjected
		}
		return nil
	})
}

// Consumer is a consumer started by StartConsumer.
type Consumer struct {
	// Stop ends it and waits for it; it also runs when the test ends.
	Stop      func()
	processed atomic.Int64
}

// Processed is the number of events it applied.
func (c *Consumer) Processed() int64 { return c.processed.Load() }

// StartConsumer runs a consumer of group on topic that applies events to
// the ledger, failing failRate of the time, with short redelivery delays.
func (l *Ledger) StartConsumer(t testing.TB, brokers []string, group, topic string, failRate float64) *Consumer {
	t.Helper()
	lc := &Consumer{}
	process := l.Process(failRate)
	c, err := inboxkafka.New(inboxkafka.Config{
		Brokers: brokers, Group: group, Topics: []string{topic},
		Process: func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
			out, err := process(ctx, ev)
			if out == inbox.Processed && err == nil {
				lc.processed.Add(1)
			}
			return out, err
		},
		RedeliveryMin: 10 * time.Millisecond, RedeliveryMax: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	lc.Stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consumer of %s: %v", group, err)
		}
	}
	t.Cleanup(lc.Stop)
	return lc
}

// Applied returns how many times each event was applied.
func (l *Ledger) Applied(t testing.TB) map[uuid.UUID]int {
	t.Helper()
	rows, err := l.store.Pool().Query(context.Background(), "select event_id, count(*) from "+l.table+" group by event_id")
	if err != nil {
		t.Fatal(err)
	}
	out := map[uuid.UUID]int{}
	for rows.Next() {
		var id uuid.UUID
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// WaitExactlyOnce waits until every one of ids is applied, then checks
// that each was applied exactly once and nothing else was.
func (l *Ledger) WaitExactlyOnce(t testing.TB, ids []uuid.UUID, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	applied := l.Applied(t)
	for len(applied) < len(ids) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %d of %d events applied", timeout, len(applied), len(ids))
		}
		time.Sleep(50 * time.Millisecond)
		applied = l.Applied(t)
	}
	lost, twice := 0, 0
	for _, id := range ids {
		switch n := applied[id]; {
		case n == 0:
			lost++
		case n > 1:
			twice++
		}
	}
	if lost > 0 || twice > 0 || len(applied) != len(ids) {
		t.Fatalf("%d events: %d lost, %d applied more than once, %d applied in all", len(ids), lost, twice, len(applied))
	}
}
