package amqp

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/sink"
)

// The frame_max check counts the content header frame as the server
// does: headers that fill the frame exactly are delivered, a byte more is
// refused before sending.
func TestHeadersThatFillTheFrameAreDelivered(t *testing.T) {
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	queue := srv.Queue(exchange, "#", nil)
	cfg, err := ParseURL(amqptest.URL() + "?exchange=" + exchange)
	if err != nil {
		t.Fatal(err)
	}
	k, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	frameMax := k.pubs[0].frameMax
	filling := func(extra int) *sink.Message {
		m := &sink.Message{Event: postbox.Event{ID: uuid.New(), EventType: "order.created", AggregateType: "order",
			AggregateID: "1", Payload: []byte(`{}`), Headers: map[string]string{"X-Fill": ""}}, Attempt: 1}
		pub := publishing(m)
		size, _ := headerFrameSize(&pub)
		m.Headers["X-Fill"] = strings.Repeat("f", frameMax-size+extra)
		return m
	}
	if err := k.Publish(t.Context(), filling(0)); err != nil {
		t.Fatalf("headers that fill the %d-byte frame: %v", frameMax, err)
	}
	err = k.Publish(t.Context(), filling(1))
	if kind, _, _ := sink.Classify(err); kind != sink.Permanent {
		t.Fatalf("headers a byte over the frame: %v (%v), want permanent", err, kind)
	}
	if err := k.Publish(t.Context(), filling(-100)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for got := srv.Count(queue); got != 2; got = srv.Count(queue) {
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d messages, want the 2 sent", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
