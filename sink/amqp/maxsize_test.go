package amqp

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
)

// A server whose max_message_size is below Config.MaxMessageBytes closes
// the channel on a larger message (406 PRECONDITION_FAILED, which AMQP
// gives no other way to learn). That message fails permanently, not as an
// outage that would be probed with it again and again; the others in
// flight on the channel are unavailable (sent again, no attempt counted);
// and the sink refuses larger messages from then on, before sending.
func TestServerMaxMessageSizeFailsTheLargeMessageAlone(t *testing.T) {
	p := &publisher{pending: map[uint64]*waiter{}, returned: map[string]amqp091.Return{}}
	big := &waiter{messageID: "big", size: 2000, done: make(chan error, 1)}
	small := &waiter{messageID: "small", size: 10, done: make(chan error, 1)}
	p.pending[1], p.pending[2] = big, small
	confirms, returns := make(chan amqp091.Confirmation), make(chan amqp091.Return)
	closes := make(chan *amqp091.Error, 1)
	close(confirms)
	close(returns)
	closes <- &amqp091.Error{Code: amqp091.PreconditionFailed, Reason: "PRECONDITION_FAILED - message size 2000 is larger than configured max size 1024"}
	var lost error
	p.settle(confirms, returns, closes, func(err error) { lost = err })

	err := <-big.done
	if kind, _, _ := sink.Classify(err); kind != sink.Permanent || !strings.Contains(err.Error(), "2000 bytes") || !strings.Contains(err.Error(), "max_message_size of 1024") {
		t.Errorf("the large message: %v (%v), want permanent, naming its size and the server's limit", err, kind)
	}
	if err := <-small.done; !isKind(err, sink.Unavailable) {
		t.Errorf("the small message: %v, want unavailable", err)
	}

	k := &Sink{s: settings{Config: Config{MaxMessageBytes: MaxMessageBytesDefault}}}
	k.learn(lost)
	m := &sink.Message{Event: postbox.Event{ID: uuid.New(), Payload: make([]byte, 1500)}}
	pub := amqp091.Publishing{Body: m.Payload}
	if err := k.refusal(m, &pub, 0); err == nil || !strings.Contains(err.Error(), "max_message_size of 1024") {
		t.Errorf("after the server's refusal, a message of 1500 bytes: %v, want refused before sending", err)
	}
}

func isKind(err error, kind sink.Kind) bool {
	k, _, _ := sink.Classify(err)
	return err != nil && k == kind
}
