// Package amqp is the RabbitMQ sink: it publishes each event to an
// exchange with publisher confirms, as a persistent message whose
// message_id is the event id, and counts it delivered only on the server's
// ack of a message that reached a queue.
//
// Messages are published with the mandatory flag: a message that no queue
// is bound for is returned by the server, and its Publish fails (retried,
// then failed by the relay) instead of vanishing. The body is the event's
// payload, unchanged; the headers table holds the broker wire headers
// (sink.BrokerHeaders), type is the event type, content_type the
// message's (sink.Message.ContentType), application/json when it names
// none.
//
// Publishes go out on a few channels, each with many awaiting their
// confirms at once. When the connection or a channel closes, the sink
// reconnects by itself, with backoff; meanwhile Publish fails at once with
// a sink.Unavailable error.
package amqp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/amqpconn"
	"github.com/postbox-go/postbox/sink"
)

var errChannelClosed = errors.New("the channel closed")

// maxRoutingKey is the longest routing key AMQP carries (a short string).
const maxRoutingKey = 255

// Sink publishes messages to a RabbitMQ exchange. It is safe for concurrent
// use.
type Sink struct {
	s settings

	mu sync.RWMutex
	// pubs are the channels of the current connection; nil while the sink
	// reconnects, with down saying why.
	pubs []*publisher
	down error
	// blocked is set while the server blocks the connection (a memory or
	// disk alarm): a publish would wait until the alarm clears.
	blocked atomic.Bool
	next    atomic.Uint64
	// serverMax is the server's max_message_size once it refused a
	// larger message (it closes the channel), else 0.
	serverMax atomic.Int64

	stop      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
}

var _ sink.Sink = (*Sink)(nil)

// New connects to the server of cfg, checks that its exchange exists and
// opens the publishing channels. A missing exchange, refused credentials or
// an unreachable server are errors here, so that a relay stops at start
// with a clear message. Close releases the connection.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	s, err := cfg.settle()
	if err != nil {
		return nil, err
	}
	k := &Sink{s: s, stop: make(chan struct{}), stopped: make(chan struct{})}
	sess, err := k.connect(ctx)
	if err != nil {
		return nil, err
	}
	k.pubs = sess.pubs
	go k.supervise(sess)
	return k, nil
}

// Publish sends m to the exchange, with the routing key of its template,
// and waits for the server's confirm, for at most Config.Timeout. It fails at once with a
// sink.Unavailable error while the connection is down, and with a
// retryable error when the server returns the message as unroutable or
// refuses it. An event that AMQP or the server's limits cannot carry
// (see Config.MaxMessageBytes) fails at once as sink.Permanent and is
// never sent: sending it would close the channel or the connection.
func (k *Sink) Publish(ctx context.Context, m *sink.Message) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("amqp: message %s: %w", m.ID, err)
	}
	key := k.s.routingKey.Expand(&m.Event)
	if len(key) > maxRoutingKey {
		return &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("amqp: message %s: routing key %.64q… is %d bytes, over AMQP's %d", m.ID, key, len(key), maxRoutingKey)}
	}
	p, err := k.publisher()
	if err != nil {
		return err
	}
	pub := publishing(m)
	if err := k.refusal(m, &pub, p.frameMax); err != nil {
		return &sink.Error{Kind: sink.Permanent, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, k.s.Timeout)
	defer cancel()
	return p.publish(ctx, k.s.Exchange, key, pub)
}

// publishing is the AMQP message of m.
func publishing(m *sink.Message) amqp091.Publishing {
	headers := amqp091.Table{}
	sink.BrokerHeaders(m, func(name, value string) { headers[name] = value })
	contentType := m.ContentType
	if contentType == "" {
		contentType = postbox.ContentTypeJSON
	}
	return amqp091.Publishing{
		Headers:      headers,
		ContentType:  contentType,
		DeliveryMode: amqp091.Persistent,
		MessageId:    m.ID.String(),
		Type:         m.EventType,
		Timestamp:    time.Now(),
		Body:         m.Payload,
	}
}

// publisher returns the channel for the next publish, or why there is
// none.
func (k *Sink) publisher() (*publisher, error) {
	if k.blocked.Load() {
		return nil, unavailable(fmt.Errorf("amqp: %s blocks publishing (a resource alarm on the server)", k.s.server.address))
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	switch {
	case errors.Is(k.down, errSinkClosed):
		return nil, unavailable(fmt.Errorf("amqp: %w", errSinkClosed))
	case k.pubs == nil:
		return nil, unavailable(fmt.Errorf("amqp: %s is unavailable, reconnecting: %w", k.s.server.address, k.down))
	}
	return k.pubs[k.next.Add(1)%uint64(len(k.pubs))], nil
}

// String names the server, vhost, exchange and routing key, without
// credentials.
func (k *Sink) String() string {
	return fmt.Sprintf("rabbitmq %s vhost %q exchange %q routing key %q", k.s.server.address, k.s.server.vhost, k.s.Exchange, k.s.routingKey)
}

// Destination is the exchange, for traces.
func (k *Sink) Destination() sink.Destination {
	return sink.Destination{System: "rabbitmq", Name: k.s.Exchange}
}

// Close closes the connection; publishes still awaiting their confirm fail.
// It returns once the sink has stopped reconnecting.
func (k *Sink) Close() error {
	k.closeOnce.Do(func() { close(k.stop) })
	<-k.stopped
	return nil
}

// session is one connection and its publishing channels.
type session struct {
	conn *amqp091.Connection
	pubs []*publisher
	// closed receives why the connection closed; lost why one of its
	// channels did; blocked the server's flow control.
	closed  chan *amqp091.Error
	lost    chan error
	blocked chan amqp091.Blocking
}

// connect dials the server, checks the exchange and opens the publishing
// channels.
func (k *Sink) connect(ctx context.Context) (*session, error) {
	conn, err := k.dial(ctx)
	if err != nil {
		return nil, err
	}
	sess := &session{
		conn:    conn,
		closed:  conn.NotifyClose(make(chan *amqp091.Error, 1)),
		lost:    make(chan error, k.s.Channels), // each channel sends at most once
		blocked: conn.NotifyBlocked(make(chan amqp091.Blocking, 1)),
	}
	if err := k.checkExchange(conn); err != nil {
		sess.close()
		return nil, err
	}
	for range k.s.Channels {
		p, err := openPublisher(conn, conn.Config.FrameSize, func(err error) {
			k.learn(err)
			sess.lost <- err
		})
		if err != nil {
			sess.close()
			return nil, err
		}
		sess.pubs = append(sess.pubs, p)
	}
	return sess, nil
}

// close closes the connection, which fails the publishes awaiting their
// confirm.
func (sess *session) close() { amqpconn.Close(sess.conn) }

// dial opens a connection within DialTimeout and ctx.
func (k *Sink) dial(ctx context.Context) (*amqp091.Connection, error) {
	conn, err := amqpconn.Dial(ctx, k.s.server.dialURL, amqpconn.Options{
		Vhost: k.s.server.vhost, Timeout: k.s.DialTimeout, Heartbeat: k.s.Heartbeat, Name: k.s.ConnectionName,
	})
	if err != nil {
		return nil, fmt.Errorf("amqp: connect to %s vhost %q: %w", k.s.server.address, k.s.server.vhost, err)
	}
	return conn, nil
}

// checkExchange declares the exchange passively on a channel of its own,
// which the server closes when the exchange is missing.
func (k *Sink) checkExchange(conn *amqp091.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("amqp: open a channel on %s: %w", k.s.server.address, err)
	}
	err = ch.ExchangeDeclarePassive(k.s.Exchange, amqp091.ExchangeDirect, true, false, false, false, nil)
	var e *amqp091.Error
	switch {
	case errors.As(err, &e) && e.Code == amqp091.NotFound:
		return fmt.Errorf("amqp: exchange %q does not exist in vhost %q on %s: declare it first: postbox sink setup --sink URL, or amqp.Setup", k.s.Exchange, k.s.server.vhost, k.s.server.address)
	case err != nil:
		return fmt.Errorf("amqp: check exchange %q in vhost %q on %s: %w", k.s.Exchange, k.s.server.vhost, k.s.server.address, err)
	}
	return ch.Close()
}
