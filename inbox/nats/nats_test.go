package nats_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	inboxnats "github.com/postbox-go/postbox/inbox/nats"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/sink"
	sinknats "github.com/postbox-go/postbox/sink/nats"
)

// fixture is a stream, a durable consumer of it, the NATS sink publishing
// to it, and an inbox in a fresh schema applying events into the business
// table applied(event_id), which has no unique constraint: an event
// applied twice shows as two rows.
type fixture struct {
	js     jetstream.JetStream
	prefix string
	cons   jetstream.Consumer
	sink   *sinknats.Sink
	ib     *inbox.Inbox[pgx.Tx]
	pool   *pgxpool.Pool
	table  string
	calls  atomic.Int64 // Process calls
}

func newFixture(t *testing.T, ackWait time.Duration) *fixture {
	t.Helper()
	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, nil)
	cons, err := st.CreateConsumer(t.Context(), jetstream.ConsumerConfig{
		Durable: "inbox", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sinknats.ParseURL(natstest.URL() + "?subject=" + prefix + ".{event_type}")
	if err != nil {
		t.Fatal(err)
	}
	sk, err := sinknats.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sk.Close() })
	s := pgtest.Store(t)
	table := s.Table("applied")
	if _, err := s.Pool().Exec(t.Context(), "create table "+table+" (event_id uuid not null)"); err != nil {
		t.Fatal(err)
	}
	return &fixture{js: js, prefix: prefix, cons: cons, sink: sk, ib: inbox.New(s.Driver()), pool: s.Pool(), table: table}
}

// apply is the application's handler: it writes its row, then fails at
// random failRate of the time, after writing, as a bug would.
func (f *fixture) apply(failRate float64) inbox.ProcessFunc[pgx.Tx] {
	return func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
		if _, err := tx.Exec(ctx, "insert into "+f.table+" (event_id) values ($1)", ev.ID); err != nil {
			return err
		}
		if rand.Float64() < failRate {
			return errors.New("the handler failed after writing")
		}
		return nil
	}
}

// consume runs Consume with process until the test ends, and returns a
// function that stops it and returns its error.
func (f *fixture) consume(t *testing.T, process func(context.Context, *inbox.Event) (inbox.Outcome, error)) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- inboxnats.Consume(ctx, f.cons, inboxnats.Config{
			Process: func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
				f.calls.Add(1)
				return process(ctx, ev)
			},
			RedeliveryMin: 10 * time.Millisecond, RedeliveryMax: 100 * time.Millisecond,
			Logger: quiet,
		})
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func (f *fixture) publish(t *testing.T, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	var wg sync.WaitGroup
	for i := range ids {
		ids[i] = uuid.New()
		m := &sink.Message{Event: postbox.Event{ID: ids[i], EventType: "order.paid", AggregateType: "order",
			AggregateID: fmt.Sprint(i), Payload: fmt.Appendf(nil, `{"n": %d}`, i)}, Attempt: 1}
		wg.Go(func() {
			if err := f.sink.Publish(t.Context(), m); err != nil {
				t.Errorf("Publish: %v", err)
			}
		})
	}
	wg.Wait()
	return ids
}

// count returns the rows of applied, and the event ids with more than one.
func (f *fixture) count(t *testing.T) (rows, twice int) {
	t.Helper()
	err := f.pool.QueryRow(t.Context(), "select count(*), count(*) - count(distinct event_id) from "+f.table).Scan(&rows, &twice)
	if err != nil {
		t.Fatal(err)
	}
	return rows, twice
}

// settled waits until the consumer has nothing pending or awaiting an ack.
func (f *fixture) settled(t *testing.T) *jetstream.ConsumerInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := f.cons.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0 {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer is not settled: %d pending, %d awaiting an ack, %d redelivered", info.NumPending, info.NumAckPending, info.NumRedelivered)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every event is applied exactly once although the handler fails 30% of
// the time after writing and some events arrive twice (stored twice, as
// when the relay retries after the stream's duplicate window).
func TestConsumeAppliesEachEventOnce(t *testing.T) {
	f := newFixture(t, 5*time.Second)
	ids := f.publish(t, 200)
	for _, id := range ids[:20] { // the same events again, past de-duplication
		msg := natsgo.NewMsg(f.prefix + ".order.paid")
		msg.Header.Set(postbox.HeaderEventID, id.String())
		msg.Header.Set(jetstream.MsgIDHeader, id.String()+"-again")
		msg.Data = []byte(`{}`)
		if _, err := f.js.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
	}
	stop := f.consume(t, f.ib.Processor(f.apply(0.3)))
	f.settled(t)
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	rows, twice := f.count(t)
	if rows != len(ids) || twice != 0 {
		t.Fatalf("%d rows applied, %d events twice; want %d, 0", rows, twice, len(ids))
	}
	if calls := f.calls.Load(); calls <= int64(len(ids))+20 {
		t.Fatalf("%d Process calls for %d messages: the handler never failed, the test proves nothing", calls, len(ids)+20)
	}
}

// A message that is not a postbox event is terminated without reaching
// Process, and never delivered again.
func TestConsumeTerminatesWhatCannotBeProcessed(t *testing.T) {
	f := newFixture(t, 5*time.Second)
	for _, id := range []string{"", "not-a-uuid"} {
		msg := natsgo.NewMsg(f.prefix + ".junk")
		if id != "" {
			msg.Header.Set(jetstream.MsgIDHeader, id)
		}
		msg.Data = []byte(`{}`)
		if _, err := f.js.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
	}
	f.publish(t, 1)
	stop := f.consume(t, f.ib.Processor(f.apply(0)))
	info := f.settled(t)
	_ = stop()
	if calls := f.calls.Load(); calls != 1 {
		t.Fatalf("Process called %d times, want once (for the one postbox event)", calls)
	}
	if info.Delivered.Consumer != 3 {
		t.Fatalf("%d deliveries, want 3: a terminated message came back", info.Delivered.Consumer)
	}
}

// A handler that runs longer than the consumer's AckWait is kept alive: its
// message is not delivered a second time meanwhile.
func TestLongHandlerIsKeptAlive(t *testing.T) {
	f := newFixture(t, time.Second)
	f.publish(t, 1)
	apply := f.ib.Processor(f.apply(0))
	f.consume(t, func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
		time.Sleep(2500 * time.Millisecond)
		return apply(ctx, ev)
	})
	info := f.settled(t)
	if calls := f.calls.Load(); calls != 1 || info.Delivered.Consumer != 1 {
		t.Fatalf("Process called %d times, %d deliveries; want 1 and 1", calls, info.Delivered.Consumer)
	}
}

// Stopping lets the handler in progress finish; its message is then
// acknowledged before Consume returns.
func TestStopSettlesWhatIsInProgress(t *testing.T) {
	f := newFixture(t, 30*time.Second)
	f.publish(t, 1)
	started, release := make(chan struct{}), make(chan struct{})
	apply := f.ib.Processor(f.apply(0))
	stop := f.consume(t, func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
		close(started)
		<-release
		return apply(ctx, ev)
	})
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(100 * time.Millisecond) // let the stop begin while the handler runs
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	info, err := f.cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rows, _ := f.count(t); rows != 1 || info.NumAckPending != 0 || info.AckFloor.Consumer != 1 {
		t.Fatalf("after stop: %d rows applied, %d awaiting an ack, ack floor %d; want 1, 0, 1", rows, info.NumAckPending, info.AckFloor.Consumer)
	}
}

func TestConsumeRefusesBadConfig(t *testing.T) {
	f := newFixture(t, 5*time.Second)
	if err := inboxnats.Consume(t.Context(), f.cons, inboxnats.Config{}); err == nil || !strings.Contains(err.Error(), "Process") {
		t.Errorf("Consume without Process: %v", err)
	}
	st, err := f.js.Stream(t.Context(), f.cons.CachedInfo().Stream)
	if err != nil {
		t.Fatal(err)
	}
	none, err := st.CreateConsumer(t.Context(), jetstream.ConsumerConfig{Durable: "noack", AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	err = inboxnats.Consume(t.Context(), none, inboxnats.Config{Process: f.ib.Processor(f.apply(0))})
	if err == nil || !strings.Contains(err.Error(), "explicit") {
		t.Errorf("Consume of an AckNone consumer: %v, want refused", err)
	}
}
