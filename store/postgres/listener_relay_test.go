package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store/postgres"
)

// chanSink hands each published event's id to a channel.
type chanSink chan uuid.UUID

func (c chanSink) Publish(ctx context.Context, m *sink.Message) error {
	select {
	case c <- m.ID:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (chanSink) String() string { return "chan" }

func (chanSink) Destination() sink.Destination {
	return sink.Destination{System: "chan", Name: "chan"}
}

// Relays of three schemas on one Listener, polling only every hour, are
// woken by their own schema's commits: each relay dozes and wakes on the
// shared connection.
func TestListenerWakesRelays(t *testing.T) {
	pool, app := appPool(t)
	l := postgres.NewListener(pool)
	t.Cleanup(l.Close)
	stores := sharedStores(t, pool, l, 3)
	sinks := make([]chanSink, len(stores))
	for i, s := range stores {
		sinks[i] = make(chanSink, 10)
		r := relaytest.Start(t, relay.Config{Store: s.Driver(), Sink: sinks[i], PollInterval: time.Hour})
		for deadline := time.Now().Add(10 * time.Second); !r.Stats().Listening; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("relay %d does not listen: %s", i, r.Stats().PollingReason)
			}
		}
	}
	if got, pooled := backends(t, app), int(pool.Stat().TotalConns()); got != pooled+1 {
		t.Fatalf("%d backends with %d connections in the pool; want one listening connection more", got, pooled)
	}
	ctx := context.Background()
	for round := range 3 {
		for i, s := range stores {
			// Let the relays go back to dozing.
			time.Sleep(150 * time.Millisecond)
			e := postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: "1", EventType: "order.created", Payload: []byte(`{}`)}
			if err := s.Enqueue(ctx, e); err != nil {
				t.Fatal(err)
			}
			select {
			case id := <-sinks[i]:
				if id != e.ID {
					t.Fatalf("round %d, store %d: relay published %s; want %s", round, i, id, e.ID)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d, store %d: the relay was not woken by its schema's commit", round, i)
			}
		}
	}
}
