package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/sink"
)

// The consumer side reads back exactly what a broker sink writes.
func TestEventFromBrokerReadsTheSinksHeaders(t *testing.T) {
	m := &sink.Message{Event: postbox.Event{
		ID: postbox.NewID(), EventType: "order.paid", AggregateType: "order", AggregateID: "42",
		Payload: []byte(`{"order_id": 42}`),
	}, Attempt: 1}
	headers := map[string]string{}
	sink.BrokerHeaders(m, func(name, value string) { headers[name] = value })
	ev, err := inbox.EventFromBroker(func(name string) string { return headers[name] }, "", m.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID != m.ID || ev.EventType != m.EventType || ev.AggregateType != m.AggregateType || ev.AggregateID != m.AggregateID || string(ev.Payload) != string(m.Payload) {
		t.Fatalf("decoded %+v, want the fields of %+v", ev, m.Event)
	}
}

func TestEventFromBrokerFallsBackToTheMessageID(t *testing.T) {
	id := postbox.NewID()
	ev, err := inbox.EventFromBroker(func(string) string { return "" }, id.String(), []byte(`{}`))
	if err != nil || ev.ID != id {
		t.Fatalf("got %v, %v; want the broker's message id %v", ev, err, id)
	}
}

func TestEventFromBrokerRefusesWhatCanNeverBeProcessed(t *testing.T) {
	id := postbox.NewID().String()
	for name, c := range map[string]struct {
		headers map[string]string
		msgID   string
		body    string
	}{
		"no id":            {body: `{}`},
		"id not a uuid":    {msgID: "order-42", body: `{}`},
		"payload not json": {msgID: id, body: `{"a":`},
		"bad sequence":     {headers: map[string]string{inbox.HeaderSequence: "-3"}, msgID: id, body: `{}`},
		"huge hint":        {headers: map[string]string{postbox.HeaderEventType: string(make([]byte, 10000))}, msgID: id, body: `{}`},
	} {
		_, err := inbox.EventFromBroker(func(n string) string { return c.headers[n] }, c.msgID, []byte(c.body))
		if !errors.Is(err, inbox.ErrInvalidEvent) {
			t.Errorf("%s: got %v, want ErrInvalidEvent", name, err)
		}
		if v := inbox.VerdictOf(err); v != inbox.Discard {
			t.Errorf("%s: verdict %v, want discard", name, v)
		}
	}
}

func TestVerdictOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want inbox.Verdict
	}{
		{nil, inbox.Ack},
		{fmt.Errorf("claim: %w", inbox.ErrDuplicate), inbox.Ack},
		{errors.New("handler: stock table locked"), inbox.Redeliver},
		{fmt.Errorf("x: %w", inbox.ErrOutOfOrder), inbox.Redeliver},
		{fmt.Errorf("x: %w", inbox.ErrInProgress), inbox.Redeliver},
		{context.Canceled, inbox.Redeliver},
		{fmt.Errorf("x: %w", inbox.ErrSequenceApplied), inbox.Discard},
		{fmt.Errorf("x: %w", inbox.ErrInvalidEvent), inbox.Discard},
	} {
		if got := inbox.VerdictOf(c.err); got != c.want {
			t.Errorf("VerdictOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestRedeliveryDelayGrowsWithinBounds(t *testing.T) {
	lo, hi := 100*time.Millisecond, 2*time.Second
	for delivered := 1; delivered < 40; delivered++ {
		d := inbox.RedeliveryDelay(delivered, lo, hi)
		if d < lo || d > hi {
			t.Fatalf("delivery %d: delay %v outside [%v, %v]", delivered, d, lo, hi)
		}
	}
	if d := inbox.RedeliveryDelay(5, lo, hi); d < 1280*time.Millisecond {
		t.Fatalf("fifth delivery waits %v, want about 1.6s (lo doubled four times, less a fifth at most)", d)
	}
	if d := inbox.RedeliveryDelay(1, 0, 0); d != inbox.RedeliveryMinDefault {
		t.Fatalf("first delivery with defaults waits %v, want %v", d, inbox.RedeliveryMinDefault)
	}
}
