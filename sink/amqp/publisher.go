package amqp

import (
	"context"
	"fmt"
	"sync"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox/sink"
)

// publisher is one AMQP channel in confirm mode with many publishes
// awaiting their confirms at once. Its settle goroutine is the only reader
// of the channel's confirms and returns: the server sends a mandatory
// message's basic.return before its basic.ack, and amqp091 hands both over
// in that order from one goroutine, so a return is always recorded before
// the confirm of the same message is settled.
type publisher struct {
	ch *amqp091.Channel
	// frameMax is the connection's negotiated frame_max, 0 for none.
	frameMax int
	// sending serialises taking a delivery tag and sending the message
	// (a semaphore rather than a mutex, so that a waiting publish honours
	// its context).
	sending chan struct{}

	mu sync.Mutex
	// pending are the publishes awaiting their confirm, by delivery tag.
	pending map[uint64]*waiter
	// returned are messages the server returned as unroutable, by message
	// id, until the confirm of that message.
	returned map[string]amqp091.Return
	// closed is set, with why, once the channel has closed: every pending
	// publish has then failed, and new ones fail at once.
	closed   bool
	closeErr error
}

// waiter is one publish awaiting its confirm.
type waiter struct {
	messageID string
	// size is the message body's, to tell the message a server's
	// max_message_size refused.
	size int
	// done receives the publish's result, once.
	done chan error
}

// openPublisher opens a channel on conn in confirm mode and starts its
// settle goroutine; frameMax is the connection's negotiated frame_max;
// lost is called once, with why, when the channel closes.
func openPublisher(conn *amqp091.Connection, frameMax int, lost func(error)) (*publisher, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("amqp: open a channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("amqp: put a channel in confirm mode: %w", err)
	}
	p := &publisher{
		ch:       ch,
		frameMax: frameMax,
		sending:  make(chan struct{}, 1),
		pending:  map[uint64]*waiter{},
		returned: map[string]amqp091.Return{},
	}
	// Unbuffered: amqp091 hands each return and confirm over before it
	// reads the next frame, which keeps them in the server's order.
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation))
	returns := ch.NotifyReturn(make(chan amqp091.Return))
	closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
	go p.settle(confirms, returns, closes, lost)
	return p, nil
}

// publish sends msg and waits for its confirm. It returns nil only on the
// server's ack of a message that was routed to a queue.
func (p *publisher) publish(ctx context.Context, exchange, key string, msg amqp091.Publishing) error {
	w := &waiter{messageID: msg.MessageId, size: len(msg.Body), done: make(chan error, 1)}
	select {
	case p.sending <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("amqp: message %s: waiting to send: %w", msg.MessageId, ctx.Err())
	}
	err := p.send(ctx, w, exchange, key, msg)
	<-p.sending
	if err != nil {
		return err
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		// The waiter stays pending: its confirm, when it comes, also
		// clears a return recorded for the message.
		return fmt.Errorf("amqp: message %s: waiting for the publisher confirm: %w", msg.MessageId, ctx.Err())
	}
}

// send registers w under the channel's next delivery tag and sends msg.
// The caller holds p.sending. p.mu is never held while calling amqp091,
// whose reader goroutine may be waiting for settle, which takes p.mu.
func (p *publisher) send(ctx context.Context, w *waiter, exchange, key string, msg amqp091.Publishing) error {
	tag := p.ch.GetNextPublishSeqNo()
	p.mu.Lock()
	if p.closed {
		err := p.closeErr
		p.mu.Unlock()
		return unavailable(fmt.Errorf("amqp: the channel is closed: %w", err))
	}
	p.pending[tag] = w
	p.mu.Unlock()
	if err := p.ch.PublishWithContext(ctx, exchange, key, true, false, msg); err != nil {
		p.mu.Lock()
		delete(p.pending, tag)
		p.mu.Unlock()
		if ctx.Err() != nil {
			return fmt.Errorf("amqp: message %s: %w", msg.MessageId, ctx.Err())
		}
		return unavailable(fmt.Errorf("amqp: send message %s: %w", msg.MessageId, err))
	}
	return nil
}

// settle matches the channel's returns and confirms to the pending
// publishes until the channel closes, then fails those still pending.
func (p *publisher) settle(confirms <-chan amqp091.Confirmation, returns <-chan amqp091.Return, closes <-chan *amqp091.Error, lost func(error)) {
	for confirms != nil {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			p.mu.Lock()
			p.returned[r.MessageId] = r
			p.mu.Unlock()
		case c, ok := <-confirms:
			if !ok {
				confirms = nil
				continue
			}
			p.confirmed(c)
		}
	}
	var reason error = errChannelClosed
	if e := <-closes; e != nil {
		reason = e
	}
	p.mu.Lock()
	p.closed, p.closeErr = true, reason
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()
	limit := serverMaxSize(reason)
	for _, w := range pending {
		if limit > 0 && w.size > limit {
			// The message the server refused: it would be refused
			// again, and its retries taken for an outage.
			w.done <- &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("amqp: message %s: its payload of %d bytes is over the server's max_message_size of %d: %w", w.messageID, w.size, limit, reason)}
			continue
		}
		w.done <- unavailable(fmt.Errorf("amqp: message %s: the channel closed before its confirm: %w", w.messageID, reason))
	}
	lost(reason)
}

// confirmed settles the publish that c confirms.
func (p *publisher) confirmed(c amqp091.Confirmation) {
	p.mu.Lock()
	w := p.pending[c.DeliveryTag]
	delete(p.pending, c.DeliveryTag)
	var r amqp091.Return
	var returned bool
	if w != nil {
		if r, returned = p.returned[w.messageID]; returned {
			delete(p.returned, w.messageID)
		}
	}
	p.mu.Unlock()
	switch {
	case w == nil:
	case returned:
		w.done <- &sink.Error{Kind: sink.Retryable, Err: fmt.Errorf(
			"amqp: message %s is unroutable: no queue is bound to exchange %q for routing key %q (the server returned it: %d %s)",
			w.messageID, r.Exchange, r.RoutingKey, r.ReplyCode, r.ReplyText)}
	case !c.Ack:
		w.done <- &sink.Error{Kind: sink.Retryable, Err: fmt.Errorf("amqp: message %s: the server refused it (basic.nack)", w.messageID)}
	default:
		w.done <- nil
	}
}

// unavailable marks err as the destination being unreachable.
func unavailable(err error) error { return &sink.Error{Kind: sink.Unavailable, Err: err} }
