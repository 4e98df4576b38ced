package consumertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store/postgres"
)

// waitTimeout bounds every wait of the suite: for events to be applied,
// and for a consumer to return once stopped.
const waitTimeout = 60 * time.Second

// app is the application under test: an inbox in a schema of its own, and
// a business table that its handler writes in two parts, with no unique
// key, so that an event applied twice shows as two rows of each part and
// one applied by half as a first part alone.
type app struct {
	t     *testing.T
	b     Broker
	store *postgres.Store
	ib    *inbox.Inbox[pgx.Tx]
	table string
	logs  *logs

	mu sync.Mutex
	// between runs between the two parts of the handler, when set; its
	// error fails the handler.
	between func(ctx context.Context, ev *inbox.Event) error
	calls   map[uuid.UUID][]call
}

// call is one call of Process, as it returned.
type call struct {
	ev      inbox.Event
	outcome inbox.Outcome
	err     error
}

// String says what the call returned: "processed", "duplicate", or its
// error.
func (c call) String() string {
	if c.err != nil {
		return "error: " + c.err.Error()
	}
	return c.outcome.String()
}

func newApp(t *testing.T, b Broker) *app {
	t.Helper()
	s := pgtest.Store(t)
	a := &app{t: t, b: b, store: s, ib: inbox.New(s.Driver()), table: s.Table("applied"), logs: newLogs(), calls: map[uuid.UUID][]call{}}
	_, err := s.Pool().Exec(t.Context(), "create table "+a.table+
		" (n bigserial primary key, event_id uuid not null, aggregate_id text not null, seq bigint not null, part int not null)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the consumer's log:\n%s", a.logs)
		}
	})
	return a
}

// config is the Config of the consumer under test: the suite's Process,
// short redelivery delays, and a log the suite reads.
func (a *app) config() Config {
	return Config{
		Process:       a.process,
		Concurrency:   8,
		RedeliveryMin: 10 * time.Millisecond, RedeliveryMax: 100 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second,
		Logger:          slog.New(a.logs),
	}
}

// process is Config.Process: the inbox's, with the handler, recorded.
func (a *app) process(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
	outcome, err := a.ib.Process(ctx, ev, a.handle)
	a.mu.Lock()
	a.calls[ev.ID] = append(a.calls[ev.ID], call{ev: *ev, outcome: outcome, err: err})
	a.mu.Unlock()
	return outcome, err
}

// handle is the application's handler: its first part, between, its
// second part. A payload {"reject": true} is rejected for good.
func (a *app) handle(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
	if strings.Contains(string(ev.Payload), `"reject": true`) {
		return inbox.Reject(errors.New("the payload asks to be rejected"))
	}
	insert := "insert into " + a.table + " (event_id, aggregate_id, seq, part) values ($1, $2, $3, $4)"
	if _, err := tx.Exec(ctx, insert, ev.ID, ev.AggregateID, ev.Seq, 1); err != nil {
		return err
	}
	a.mu.Lock()
	between := a.between
	a.mu.Unlock()
	if between != nil {
		if err := between(ctx, ev); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, insert, ev.ID, ev.AggregateID, ev.Seq, 2)
	return err
}

// setBetween sets what runs between the handler's two parts.
func (a *app) setBetween(fn func(ctx context.Context, ev *inbox.Event) error) {
	a.mu.Lock()
	a.between = fn
	a.mu.Unlock()
}

// callsOf returns the calls of Process for the event id.
func (a *app) callsOf(id uuid.UUID) []call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]call(nil), a.calls[id]...)
}

// called returns the event ids Process was given.
func (a *app) called() map[uuid.UUID]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := map[uuid.UUID]bool{}
	for id := range a.calls {
		ids[id] = true
	}
	return ids
}

// processed reports whether Process applied the event (Processed) in one
// of its calls.
func (a *app) processed(id uuid.UUID) bool {
	for _, c := range a.callsOf(id) {
		if c.err == nil && c.outcome == inbox.Processed {
			return true
		}
	}
	return false
}

// allProcessed reports whether every one of ids was applied.
func (a *app) allProcessed(ids []uuid.UUID) func() bool {
	return func() bool {
		for _, id := range ids {
			if !a.processed(id) {
				return false
			}
		}
		return true
	}
}

// rows returns the business table's rows of each event: how many of its
// first part and of its second.
func (a *app) rows() map[uuid.UUID][2]int {
	a.t.Helper()
	rows, err := a.store.Pool().Query(context.Background(), "select event_id, part, count(*) from "+a.table+" group by event_id, part")
	if err != nil {
		a.t.Fatal(err)
	}
	out := map[uuid.UUID][2]int{}
	for rows.Next() {
		var id uuid.UUID
		var part, n int
		if err := rows.Scan(&id, &part, &n); err != nil {
			a.t.Fatal(err)
		}
		r := out[id]
		r[part-1] = n
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		a.t.Fatal(err)
	}
	return out
}

// checkAppliedOnce fails the test unless each of ids was applied exactly
// once, both parts, and nothing else was applied.
func (a *app) checkAppliedOnce(ids []uuid.UUID) {
	a.t.Helper()
	rows := a.rows()
	for _, id := range ids {
		if r := rows[id]; r != [2]int{1, 1} {
			a.t.Errorf("event %s applied %d times (first part) and %d times (second part), want once", id, r[0], r[1])
		}
	}
	if len(rows) != len(ids) {
		a.t.Errorf("%d events applied, want %d", len(rows), len(ids))
	}
}

// checkSettled fails the test unless the broker holds nothing more for
// the destination's next consumer. Call it once the consumer returned.
func (a *app) checkSettled() {
	a.t.Helper()
	if n := a.b.Unsettled(a.t); n != 0 {
		a.t.Errorf("the broker would deliver %d messages again after the consumer stopped, want 0: something was not acknowledged", n)
	}
}

// consumer is a consumer the suite runs.
type consumer struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// start runs the destination's consumer with cfg until stop, or the end of
// the test.
func (a *app) start(cfg Config) *consumer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- a.b.Consume(ctx, cfg) }()
	a.t.Cleanup(func() { _ = c.stop() })
	return c
}

// stop cancels the consumer's context and returns its error, or one
// saying that it did not return.
func (c *consumer) stop() error {
	c.once.Do(func() {
		c.cancel()
		select {
		case c.err = <-c.done:
		case <-time.After(waitTimeout):
			c.err = fmt.Errorf("the consumer did not return within %v of its context's end", waitTimeout)
		}
	})
	return c.err
}

// running fails the test if the consumer has returned.
func (c *consumer) running(t *testing.T) {
	t.Helper()
	select {
	case err := <-c.done:
		c.once.Do(func() { c.err = err })
		t.Fatalf("the consumer returned while it should run: %v", err)
	default:
	}
}

// stopped stops the consumer and fails the test on its error.
func (c *consumer) stopped(t *testing.T) {
	t.Helper()
	if err := c.stop(); err != nil {
		t.Fatalf("the consumer: %v", err)
	}
}

// waitFor waits until cond holds, while c runs.
func (a *app) waitFor(c *consumer, what string, cond func() bool) {
	a.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		c.running(a.t)
		if time.Now().After(deadline) {
			a.t.Fatalf("waited %v for %s", waitTimeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// event returns a new event of aggregate, as a relay hands it to a sink.
func event(aggregate string, payload string) *sink.Message {
	return &sink.Message{Event: postbox.Event{
		ID:            postbox.NewID(),
		EventType:     "order.created",
		AggregateType: "order",
		AggregateID:   aggregate,
		Payload:       []byte(payload),
	}, Attempt: 1}
}

// ordered returns event with its sequence number in its headers, as the
// relay sends an ordered event's.
func ordered(aggregate string, seq int) *sink.Message {
	m := event(aggregate, fmt.Sprintf(`{"seq": %d}`, seq))
	m.Headers = map[string]string{inbox.HeaderSequence: fmt.Sprint(seq)}
	return m
}

// raw returns m's message as the sink sends it (its headers, body and
// key), to publish it past the broker's de-duplication.
func raw(m *sink.Message) Raw {
	r := Raw{Key: m.AggregateID, Headers: map[string]string{}, Body: m.Payload}
	sink.BrokerHeaders(m, func(name, value string) { r.Headers[name] = value })
	return r
}

// publishAll publishes ms one after the other, each once the broker
// acknowledged the one before.
func publishAll(t *testing.T, b Broker, ms ...*sink.Message) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, len(ms))
	for i, m := range ms {
		b.Publish(t, m)
		ids[i] = m.ID
	}
	return ids
}
