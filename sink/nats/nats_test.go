package nats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/nats"
)

func message(aggregateID string, payload []byte) *sink.Message {
	return &sink.Message{Event: postbox.Event{
		ID: uuid.New(), EventType: "order.paid", AggregateType: "order", AggregateID: aggregateID, Payload: payload,
	}, Attempt: 1}
}

// Without a stream for the subject, New fails and says how to create one.
func TestNewWithoutStream(t *testing.T) {
	subject := strings.ToLower(natstest.Name("nostream"))
	cases := []struct{ query, want string }{
		{"subject=" + subject + ".paid", "no JetStream stream captures subject " + subject + ".paid"},
		{"subject=" + subject + ".{event_type}", "no JetStream stream captures subject " + subject + ".>"},
		{"subject={event_type}&stream=NOSUCHSTREAM", "stream NOSUCHSTREAM not found"},
	}
	for _, c := range cases {
		cfg, err := nats.ParseURL(natstest.URL() + "?" + c.query)
		if err != nil {
			t.Fatal(err)
		}
		_, err = nats.New(t.Context(), cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "postbox sink setup") {
			t.Errorf("New with %s: %v, want an error with %q and how to create the stream", c.query, err, c.want)
		}
	}
}

// stream= names the stream that must capture a fixed subject.
func TestNewStreamMismatch(t *testing.T) {
	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, nil)
	other, _ := natstest.Stream(t, js, nil)
	name, otherName := st.CachedInfo().Config.Name, other.CachedInfo().Config.Name
	cfg, err := nats.ParseURL(natstest.URL() + "?subject=" + prefix + ".paid&stream=" + otherName)
	if err != nil {
		t.Fatal(err)
	}
	_, err = nats.New(t.Context(), cfg)
	if want := "captured by stream " + name + ", not by stream " + otherName; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New: %v, want %q", err, want)
	}
	newSink(t, natstest.URL(), prefix+".paid&stream="+name)
}

// A subject the template makes invalid fails its event at once
// (Permanent) and is never published; a valid one next to it is.
func TestInvalidSubjectNeverPublished(t *testing.T) {
	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, nil)
	s := newSink(t, natstest.URL(), prefix+".{aggregate_id}")
	for _, agg := range []string{"", "a b", "a\tb", "*", ">", "a..b", "a.", ".a", "a.*.b", "x\r\nPUB y 1"} {
		err := s.Publish(t.Context(), message(agg, []byte(`{}`)))
		if kind, _, _ := sink.Classify(err); kind != sink.Permanent {
			t.Errorf("aggregate id %q: Publish = %v (%v), want permanent", agg, err, kind)
		}
	}
	dollar := newSink(t, natstest.URL(), "{aggregate_id}")
	if err := dollar.Publish(t.Context(), message("$JS.API.STREAM.DELETE."+st.CachedInfo().Config.Name, []byte(`{}`))); err == nil ||
		!strings.Contains(err.Error(), "reserved") {
		t.Errorf("a subject of $JS.API...: %v, want refused", err)
	}
	ok := message("ok", []byte(`{}`))
	if err := s.Publish(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	if ids := natstest.MessageIDs(t, st); len(ids) != 1 || ids[ok.ID.String()] != 1 {
		t.Fatalf("the stream holds %v, want only the valid message", ids)
	}
}

// A payload over the stream's maximum message size, or over the server's
// max_payload, fails its event at once with a clear error.
func TestPayloadTooLarge(t *testing.T) {
	_, js := natstest.Connect(t, natstest.URL())
	_, prefix := natstest.Stream(t, js, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 1024 })
	s := newSink(t, natstest.URL(), prefix+".{event_type}")
	if err := s.Publish(t.Context(), message("1", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{2048, 2 << 20} {
		payload := fmt.Appendf(nil, `{"pad": "%s"}`, strings.Repeat("x", size))
		err := s.Publish(t.Context(), message("1", payload))
		kind, _, _ := sink.Classify(err)
		if kind != sink.Permanent || !strings.Contains(err.Error(), "exceed") {
			t.Errorf("a payload of %d bytes: %v (%v), want permanent, saying it exceeds a limit", len(payload), err, kind)
		}
	}
}

// With the server down, Publish fails as Unavailable within the timeout;
// once the server is back the sink has reconnected by itself and
// publishes again.
func TestServerDownAndBack(t *testing.T) {
	srv := natstest.StartServer(t)
	_, js := natstest.Connect(t, srv.URL)
	st, prefix := natstest.Stream(t, js, nil)
	cfg, err := nats.ParseURL(srv.URL + "?subject=" + prefix + ".{event_type}&timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ReconnectWait = 50 * time.Millisecond
	s, err := nats.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	before := message("1", []byte(`{"n": 1}`))
	if err := s.Publish(t.Context(), before); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	err = s.Publish(t.Context(), message("1", []byte(`{"n": 2}`)))
	if kind, _, _ := sink.Classify(err); kind != sink.Unavailable {
		t.Fatalf("Publish with the server down: %v (%v), want unavailable", err, kind)
	}

	srv.Start()
	after := message("1", []byte(`{"n": 3}`))
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.Publish(t.Context(), after)
		if err == nil {
			break
		}
		if kind, _, _ := sink.Classify(err); kind != sink.Unavailable || time.Now().After(deadline) {
			t.Fatalf("Publish after the restart: %v (%v)", err, kind)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ids := natstest.MessageIDs(t, st)
	if len(ids) != 2 || ids[before.ID.String()] != 1 || ids[after.ID.String()] != 1 {
		t.Fatalf("the stream holds %v, want the messages before and after the restart", ids)
	}
}

// A cancelled Publish returns at once, and its slot comes back once the
// PubAck arrives: MaxPending publishes later all succeed.
func TestCancelledPublishesFreeTheirSlots(t *testing.T) {
	_, js := natstest.Connect(t, natstest.URL())
	_, prefix := natstest.Stream(t, js, nil)
	s := newSink(t, natstest.URL(), prefix+".{event_type}&max_pending=2")
	for range 10 {
		ctx, cancel := context.WithCancel(t.Context())
		go cancel()
		err := s.Publish(ctx, message("1", []byte(`{}`)))
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Publish: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for range 10 {
		if err := s.Publish(ctx, message("1", []byte(`{}`))); err != nil {
			t.Fatalf("Publish after cancelled ones: %v", err)
		}
	}
}

// An event's own Nats-* headers are not sent: they could change the
// message id, or purge the stream (Nats-Rollup).
func TestEventNATSHeadersAreNotSent(t *testing.T) {
	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, func(c *jetstream.StreamConfig) { c.AllowRollup = true })
	s := newSink(t, natstest.URL(), prefix+".{event_type}")
	first := message("1", []byte(`{"n": 1}`))
	if err := s.Publish(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	m := message("1", []byte(`{"n": 2}`))
	m.Headers = map[string]string{"Nats-Rollup": "all", "nats-msg-id": first.ID.String(), "traceparent": "00-1-2-01"}
	if err := s.Publish(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	ids := natstest.MessageIDs(t, st)
	if len(ids) != 2 || ids[first.ID.String()] != 1 || ids[m.ID.String()] != 1 {
		t.Fatalf("the stream holds %v, want both messages, each under its own event id", ids)
	}
}

// A templated subject that no stream captures fails its event as
// Rejected, naming the subject, while the others are published.
func TestUncapturedSubjectIsRejected(t *testing.T) {
	_, js := natstest.Connect(t, natstest.URL())
	_, prefix := natstest.Stream(t, js, func(c *jetstream.StreamConfig) { c.Subjects = []string{strings.ToLower(c.Name) + ".order.>"} })
	s := newSink(t, natstest.URL(), prefix+".{event_type}")
	if err := s.Publish(t.Context(), message("1", []byte(`{}`))); err != nil { // order.paid
		t.Fatal(err)
	}
	m := message("1", []byte(`{}`))
	m.EventType = "invoice.paid"
	err := s.Publish(t.Context(), m)
	if kind, _, _ := sink.Classify(err); kind != sink.Rejected || !strings.Contains(err.Error(), "no JetStream stream captures subject") {
		t.Fatalf("Publish of an uncaptured subject: %v (%v), want rejected, saying so", err, kind)
	}
}

// PublishBatch publishes a batch larger than the publishes allowed to await
// their PubAck at once (MaxPending) without waiting forever for a slot it
// holds itself, gives each message its own outcome (an invalid subject
// fails its message alone), and stores every valid one once.
func TestPublishBatchOutcomesPerMessage(t *testing.T) {
	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, nil)
	cfg, err := nats.ParseURL(natstest.URL() + "?subject=" + prefix + ".{aggregate_id}")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxPending = 4
	s, err := nats.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	msgs := make([]*sink.Message, 50)
	for i := range msgs {
		msgs[i] = message(fmt.Sprint(i), fmt.Appendf(nil, `{"n": %d}`, i))
	}
	msgs[17].AggregateID = "a..b" // an invalid subject
	errs := make([]error, len(msgs))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s.PublishBatch(ctx, msgs, errs)
	for i, err := range errs {
		kind, _, _ := sink.Classify(err)
		switch {
		case i == 17 && kind != sink.Permanent:
			t.Errorf("message with an invalid subject: %v (%v), want permanent", err, kind)
		case i != 17 && err != nil:
			t.Errorf("message %d: %v", i, err)
		}
	}
	ids := natstest.MessageIDs(t, st)
	if len(ids) != len(msgs)-1 {
		t.Fatalf("the stream holds %d messages, want %d", len(ids), len(msgs)-1)
	}
	for i, m := range msgs {
		if want := map[bool]int{true: 0, false: 1}[i == 17]; ids[m.ID.String()] != want {
			t.Errorf("message %d stored %d times, want %d", i, ids[m.ID.String()], want)
		}
	}
}

// The Content-Type header is the message's own content type, JSON when it
// names none; an event header of that name never replaces it.
func TestContentTypeHeader(t *testing.T) {
	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, nil)
	s := newSink(t, natstest.URL(), prefix+".{event_type}")
	received := readStream(t, st)
	plain := message("1", []byte(`{}`))
	plain.Headers = map[string]string{"content-type": "text/forged"}
	enveloped := message("1", []byte(`{"specversion":"1.0"}`))
	enveloped.ContentType = "application/cloudevents+json; charset=utf-8"
	for _, m := range []*sink.Message{plain, enveloped} {
		if err := s.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(received()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("read %d messages, want 2", len(received()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := map[uuid.UUID]string{plain.ID: postbox.ContentTypeJSON, enveloped.ID: enveloped.ContentType}
	for _, d := range received() {
		var got []string
		for name, value := range d.Headers {
			if strings.EqualFold(name, postbox.HeaderContentType) {
				got = append(got, name+": "+value)
			}
		}
		if w := postbox.HeaderContentType + ": " + want[d.ID]; len(got) != 1 || got[0] != w {
			t.Errorf("message %s: content type headers %q, want [%q]", d.ID, got, w)
		}
	}
}
