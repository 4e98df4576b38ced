package endpoint_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/internal/pgtest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
	"github.com/postbox-go/postbox/store/sqlite"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil)).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// addEndpoint writes an endpoint at url with the filter types.
func addEndpoint(t *testing.T, s store.Endpoints, name, url string, tweak func(*store.Endpoint), types ...string) store.Endpoint {
	t.Helper()
	e := store.Endpoint{Name: name, URL: url, Types: types, Secret: secret, Concurrency: 4}
	if tweak != nil {
		tweak(&e)
	}
	e, err := s.EndpointCreate(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// refusingURL is an address on 127.0.0.1 where nothing listens.
func refusingURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/hook"
}

// startDispatcher runs a dispatcher with quick test settings until the test
// ends.
func startDispatcher(t *testing.T, s store.Endpoints, tweak func(*endpoint.Config)) *endpoint.Dispatcher {
	t.Helper()
	cfg := endpoint.Config{
		Store: s, Logger: testLogger(t), Timeout: 5 * time.Second, Lease: 30 * time.Second,
		PollInterval: 50 * time.Millisecond, RefreshEvery: 100 * time.Millisecond,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		BreakerFailures: 1000, AttemptsFlush: 20 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	d, err := endpoint.NewDispatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := d.Run(ctx); err != nil {
			t.Errorf("dispatcher: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return d
}

// fanOut publishes events of the given types through a FanOut and returns
// their ids by type.
func fanOut(t *testing.T, f *endpoint.FanOut, types ...string) map[string][]uuid.UUID {
	t.Helper()
	ids := map[string][]uuid.UUID{}
	for i, typ := range types {
		ev := postbox.Event{ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: strconv.Itoa(i),
			EventType: typ, Payload: []byte(`{"n":` + strconv.Itoa(i) + `}`)}
		if err := f.Publish(context.Background(), &sink.Message{Event: ev, Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		ids[typ] = append(ids[typ], ev.ID)
	}
	return ids
}

func newFanOut(t *testing.T, s store.Endpoints, d *endpoint.Dispatcher) *endpoint.FanOut {
	t.Helper()
	cfg := endpoint.FanOutConfig{Store: s, RefreshEvery: time.Millisecond}
	if d != nil {
		cfg.Written = d.Wake
	}
	f, err := endpoint.NewFanOut(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// waitFor polls cond until it holds, failing t after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func counts(t *testing.T, s store.Endpoints, id uuid.UUID) store.DeliveryCounts {
	t.Helper()
	c, err := s.DeliveryCounts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pgStore(t *testing.T) *postgres.Store { return pgtest.Store(t) }

// testStore is a store of both kinds, and how a plain-SQL producer
// writes an event into it.
type testStore interface {
	store.Outbox
	store.Endpoints
}

// eachStore runs test on a fresh PostgreSQL store and a fresh SQLite one;
// insert writes an event with the article's plain SQL and returns its id.
func eachStore(t *testing.T, test func(t *testing.T, s testStore, insert func(aggregateID, eventType string) string)) {
	t.Run("postgres", func(t *testing.T) {
		s := pgStore(t)
		test(t, s, func(aggregateID, eventType string) string {
			var id string
			err := s.Pool().QueryRow(context.Background(), "insert into "+s.Table("outbox_events")+
				" (aggregate_type, aggregate_id, event_type, payload) values ('order', $1, $2, '{\"n\": 1}') returning id::text",
				aggregateID, eventType).Scan(&id)
			if err != nil {
				t.Fatal(err)
			}
			return id
		})
	})
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "postbox.db"), sqlite.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		test(t, s, func(aggregateID, eventType string) string {
			var id string
			err := s.DB().QueryRow("insert into outbox_events (aggregate_type, aggregate_id, event_type, payload) values ('order', ?, ?, '{\"n\": 1}') returning id",
				aggregateID, eventType).Scan(&id)
			if err != nil {
				t.Fatal(err)
			}
			return id
		})
	})
}

// messageOf is the message a relay would publish again for the event id,
// rebuilt from its delivery row.
func messageOf(t *testing.T, s store.Endpoints, id string) *sink.Message {
	t.Helper()
	all, err := s.EndpointList(context.Background())
	if err != nil || len(all) == 0 {
		t.Fatal(err)
	}
	list, err := s.DeliveryList(context.Background(), all[0].ID, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		if d.ID.String() == id {
			return &sink.Message{Event: d.Event, Attempt: 1}
		}
	}
	t.Fatalf("no delivery of %s", id)
	return nil
}
