package endpoint_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// testKeyring seals and opens the tests' endpoints' secrets.
var testKeyring = func() *keyring.Keyring {
	k, err := keyring.Parse(keyring.GenerateKey())
	if err != nil {
		panic(err)
	}
	return k
}()

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

// startSupervisor runs a supervisor with quick test settings until the
// test ends.
func startSupervisor(t *testing.T, s store.Endpoints, tweak func(*endpoint.SupervisorConfig)) *endpoint.Supervisor {
	t.Helper()
	cfg := endpoint.SupervisorConfig{
		Store: s, Keyring: testKeyring, Logger: testlog.New(t),
		Relay: relay.Config{
			Lease: 5 * time.Second, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
			ProbeInterval: 100 * time.Millisecond, ShutdownTimeout: 2 * time.Second,
		},
		Webhook:      webhook.Config{Timeout: 5 * time.Second},
		PollInterval: 50 * time.Millisecond, RefreshEvery: 100 * time.Millisecond,
		BreakerFailures: 1000, AttemptsFlush: 20 * time.Millisecond,
		// The tests count delivered deliveries: they are kept.
		KeepDelivered: true,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	sup, err := endpoint.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := sup.Run(ctx); err != nil {
			t.Errorf("supervisor: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return sup
}

// fanOut publishes events of the given types through a FanOut, each of an
// aggregate of its own, and returns their ids by type.
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

// startRelay runs a relay over the outbox of s into f until the test ends.
func startRelay(t *testing.T, s store.Outbox, f *endpoint.FanOut, tweak func(*relay.Config)) {
	t.Helper()
	cfg := relay.Config{Store: s, Sink: f, Logger: testlog.New(t), PollInterval: 50 * time.Millisecond, PublishBatch: 16}
	if tweak != nil {
		tweak(&cfg)
	}
	relaytest.Start(t, cfg)
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

func pgStore(t *testing.T) *postgres.Driver { return pgtest.Store(t).Driver() }

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

// newSupervisor returns a supervisor with quick test settings, not running.
func newSupervisor(t *testing.T, s store.Endpoints, tweak func(*endpoint.SupervisorConfig)) *endpoint.Supervisor {
	t.Helper()
	cfg := endpoint.SupervisorConfig{Store: s, Keyring: testKeyring, Logger: testlog.New(t), RefreshEvery: time.Millisecond}
	if tweak != nil {
		tweak(&cfg)
	}
	sup, err := endpoint.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sup
}
