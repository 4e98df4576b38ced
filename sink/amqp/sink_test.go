package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/amqp"
)

func message(eventType string) *sink.Message {
	return &sink.Message{Event: postbox.Event{
		ID: uuid.New(), EventType: eventType, AggregateType: "order", AggregateID: "42", Payload: []byte(`{"n": 1}`),
	}, Attempt: 1}
}

// A message that no queue is bound for is a failure that says so, not a
// success.
func TestUnroutableFails(t *testing.T) {
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	k := newSink(t, exchange, "")
	err := k.Publish(t.Context(), message("order.created"))
	if err == nil {
		t.Fatal("Publish of an unroutable message returned nil")
	}
	if !strings.Contains(err.Error(), "no queue is bound") || !strings.Contains(err.Error(), `"order.created"`) {
		t.Errorf("error %q does not say that no queue is bound for the routing key", err)
	}
	if kind, _, _ := sink.Classify(err); kind != sink.Retryable {
		t.Errorf("an unroutable message is %v, want retryable (a binding may come)", kind)
	}
}

// Under concurrency, each return fails its own publish and no other: half
// the messages go to a routing key with a queue, half to one without.
func TestUnroutableAmongConcurrentPublishes(t *testing.T) {
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	queue := srv.Queue(exchange, "routed", nil)
	k := newSink(t, exchange, "{event_type}")
	const n = 400
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		m := message([]string{"routed", "nowhere"}[i%2])
		wg.Go(func() { errs[i] = k.Publish(t.Context(), m) })
	}
	wg.Wait()
	for i, err := range errs {
		if routed := i%2 == 0; routed != (err == nil) {
			t.Fatalf("publish %d (routed %v): %v", i, routed, err)
		}
	}
	waitQueue(t, srv, queue, n/2)
}

func waitQueue(t *testing.T, srv *amqptest.Server, queue string, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for got := srv.Count(queue); got != n; got = srv.Count(queue) {
		if got > n || time.Now().After(deadline) {
			t.Fatalf("queue %s holds %d messages, want %d", queue, got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A routing key too long for AMQP fails its event for good, before
// anything is sent.
func TestRoutingKeyTooLong(t *testing.T) {
	srv := amqptest.Connect(t)
	k := newSink(t, srv.Exchange(), "{aggregate_id}")
	m := message("order.created")
	m.AggregateID = strings.Repeat("a", 256)
	err := k.Publish(t.Context(), m)
	if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Permanent || !strings.Contains(err.Error(), "256 bytes") {
		t.Fatalf("Publish with a 256-byte routing key: %v, want a permanent failure saying so", err)
	}
}

// A missing exchange stops New with an error that names it and its vhost.
func TestMissingExchange(t *testing.T) {
	amqptest.Connect(t)
	name := amqptest.Name("pbtest_missing")
	_, err := amqp.New(t.Context(), sinkConfig(t, name, ""))
	if err == nil {
		t.Fatal("New with a missing exchange returned nil")
	}
	if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), `vhost "/"`) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("error %q does not name the missing exchange and its vhost", err)
	}
}

// A server that accepts connections but never answers: New gives up after
// the dial timeout.
func TestDialTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, err = amqp.New(t.Context(), amqp.Config{URL: "amqp://guest:guest@" + ln.Addr().String() + "/", Exchange: "x", DialTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("New on a silent server: %v, want an error naming it", err)
	}
}

// The connection cut by the server: publishes fail fast as unavailable
// meanwhile, the sink reconnects by itself and publishes again.
func TestReconnectsAfterConnectionCut(t *testing.T) {
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	queue := srv.Queue(exchange, "#", nil)
	cfg := sinkConfig(t, exchange, "")
	cfg.ConnectionName = amqptest.Name("pbtest_sink")
	cfg.ReconnectMin = 500 * time.Millisecond // long enough to see the sink down
	var logs *amqptest.Logs
	cfg.Logger, logs = amqptest.NewLogs()
	k, err := amqp.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := k.Publish(t.Context(), message("before")); err != nil {
		t.Fatal(err)
	}
	if n := amqptest.CloseConnections(t, cfg.ConnectionName, "test cut"); n != 1 {
		t.Fatalf("closed %d connections named %s, want 1", n, cfg.ConnectionName)
	}
	var sawUnavailable bool
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := k.Publish(t.Context(), message("after"))
		if err == nil && sawUnavailable {
			break
		}
		if kind, _, _ := sink.Classify(err); err != nil && kind != sink.Unavailable {
			t.Fatalf("publish while reconnecting: %v (%v), want unavailable", err, kind)
		}
		sawUnavailable = sawUnavailable || err != nil
		if time.Now().After(deadline) {
			t.Fatalf("no publish went through within 20s of the cut (saw unavailable: %v); log:\n%s", sawUnavailable, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "test cut") || !strings.Contains(logs.String(), "connection is back") {
		t.Errorf("the log does not tell of the cut and the reconnection:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "guest") {
		t.Errorf("the log shows credentials:\n%s", logs.String())
	}
	// The queue holds "before", the one that succeeded after, and maybe
	// others that were sent before the cut was seen.
	if got := srv.Count(queue); got < 2 {
		t.Errorf("queue holds %d messages, want at least 2", got)
	}
}

// After Close, Publish fails as unavailable rather than hanging.
func TestPublishAfterClose(t *testing.T) {
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	srv.Queue(exchange, "#", nil)
	k := newSink(t, exchange, "")
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	err := k.Publish(t.Context(), message("late"))
	if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Unavailable {
		t.Fatalf("Publish after Close: %v, want unavailable", err)
	}
}

// A publish whose confirm never comes (the network stopped passing bytes)
// ends at its context's deadline, as a retryable failure.
func TestPublishEndsAtDeadlineWithoutConfirm(t *testing.T) {
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	srv.Queue(exchange, "#", nil)
	proxy := amqptest.NewProxy(t)
	k, err := amqp.New(t.Context(), amqp.Config{URL: proxy.URL, Exchange: exchange})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := k.Publish(t.Context(), message("before")); err != nil {
		t.Fatal(err)
	}
	proxy.Freeze()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = k.Publish(ctx, message("lost"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish without a confirm: %v, want the context's deadline", err)
	}
	if kind, _, _ := sink.Classify(err); kind != sink.Retryable {
		t.Fatalf("a publish past its deadline is %v, want retryable", kind)
	}
	proxy.Thaw() // for a quick Close
}

// Config.Timeout bounds a publish whose confirm never comes, whatever the
// caller's context: a timeout, as the relay's outage rule reads one.
func TestPublishEndsAtItsTimeoutWithoutConfirm(t *testing.T) {
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	srv.Queue(exchange, "#", nil)
	proxy := amqptest.NewProxy(t)
	k, err := amqp.New(t.Context(), amqp.Config{URL: proxy.URL, Exchange: exchange, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := k.Publish(t.Context(), message("before")); err != nil {
		t.Fatal(err)
	}
	proxy.Freeze()
	err = k.Publish(t.Context(), message("lost"))
	var timeout interface{ Timeout() bool }
	if !errors.As(err, &timeout) || !timeout.Timeout() {
		t.Fatalf("Publish without a confirm: %v, want a timeout", err)
	}
	proxy.Thaw() // for a quick Close
}

// The content_type property (and the Content-Type header) is the
// message's own content type, JSON when it names none; a content type
// longer than the property can hold fails its event alone, Permanent.
func TestContentType(t *testing.T) {
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	queue := srv.Queue(exchange, "#", nil)
	k := newSink(t, exchange, "")
	plain := message("order.created")
	enveloped := message("order.created")
	enveloped.ContentType = "application/cloudevents+json; charset=utf-8"
	long := message("order.created")
	long.ContentType = "application/" + strings.Repeat("x", 250)
	for _, m := range []*sink.Message{plain, enveloped} {
		if err := k.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	err := k.Publish(t.Context(), long)
	if kind, _, _ := sink.Classify(err); kind != sink.Permanent || !strings.Contains(err.Error(), "content type is 262 bytes") {
		t.Errorf("a content type of 262 bytes: %v (%v), want a Permanent error naming it", err, kind)
	}
	waitQueue(t, srv, queue, 2)
	want := map[string]string{plain.ID.String(): postbox.ContentTypeJSON, enveloped.ID.String(): enveloped.ContentType}
	srv.Do("get", func(ch *amqp091.Channel) error {
		for range 2 {
			d, ok, err := ch.Get(queue, true)
			if err != nil || !ok {
				return fmt.Errorf("get: %v (a message: %v)", err, ok)
			}
			if w := want[d.MessageId]; d.ContentType != w || d.Headers[postbox.HeaderContentType] != w {
				t.Errorf("message %s: content_type %q, header %v; want %q", d.MessageId, d.ContentType, d.Headers[postbox.HeaderContentType], w)
			}
		}
		return nil
	})
}
