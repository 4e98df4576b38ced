package amqp

import (
	"context"
	"errors"
	"fmt"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox/internal/amqpconn"
)

// BindingKeyDefault binds a queue Setup declares to every routing key of
// the topic exchange.
const BindingKeyDefault = "#"

// SetupConfig says what Setup creates besides the exchange.
type SetupConfig struct {
	// Queue, when not empty, is a durable quorum queue Setup declares and
	// binds to the exchange with BindingKey.
	Queue string
	// BindingKey binds Queue to the exchange. Default BindingKeyDefault.
	BindingKey string
	// DryRun changes nothing: Setup only reports what it would do (a step
	// Created is one it would create).
	DryRun bool
}

// SetupStep is what Setup did with one resource.
type SetupStep struct {
	// Resource names it: `exchange "orders" in vhost "/"`.
	Resource string
	// Created is false when it existed already (and was left unchanged).
	Created bool
	// Settings describes it.
	Settings string
}

// ErrDiffers is wrapped by Setup's error when a resource exists with
// settings that differ from those asked; Setup changes nothing then.
var ErrDiffers = errors.New("exists with different settings; not changed")

// Setup declares what a Sink of c publishes to: c.Exchange, a durable
// topic exchange, and, when s names one, a durable quorum queue bound to
// it with s.BindingKey. A resource that exists is left as it is and
// reported as not created; one the server finds inequivalent (another
// exchange type, a classic queue) is reported in an error wrapping
// ErrDiffers. Binding is idempotent: a binding that exists is kept (AMQP
// cannot ask whether one exists, so the binding of an exchange and a queue
// that both existed is reported as not created).
func Setup(ctx context.Context, c Config, s SetupConfig) ([]SetupStep, error) {
	st, err := c.settle()
	if err != nil {
		return nil, err
	}
	if s.BindingKey == "" {
		s.BindingKey = BindingKeyDefault
	}
	conn, err := amqpconn.Dial(ctx, st.server.dialURL, amqpconn.Options{
		Vhost: st.server.vhost, Timeout: st.DialTimeout, Heartbeat: st.Heartbeat, Name: amqpconn.ProcessName("postbox sink setup"),
	})
	if err != nil {
		return nil, fmt.Errorf("amqp: connect to %s vhost %q: %w", st.server.address, st.server.vhost, err)
	}
	defer amqpconn.Close(conn)
	where := fmt.Sprintf("in vhost %q on %s", st.server.vhost, st.server.address)
	exchange := SetupStep{Resource: fmt.Sprintf("exchange %q in vhost %q", c.Exchange, st.server.vhost), Settings: "type topic, durable"}
	exchange.Created, err = declare(conn, s.DryRun,
		func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclarePassive(c.Exchange, amqp091.ExchangeTopic, true, false, false, false, nil)
		},
		func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare(c.Exchange, amqp091.ExchangeTopic, true, false, false, false, nil)
		})
	if err != nil {
		return nil, fmt.Errorf("amqp: exchange %q %s: %w", c.Exchange, where, err)
	}
	steps := []SetupStep{exchange}
	if s.Queue == "" {
		return steps, nil
	}
	args := amqp091.Table{"x-queue-type": "quorum"}
	queue := SetupStep{Resource: fmt.Sprintf("queue %q in vhost %q", s.Queue, st.server.vhost), Settings: "quorum, durable"}
	queue.Created, err = declare(conn, s.DryRun,
		func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive(s.Queue, true, false, false, false, nil)
			return err
		},
		func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare(s.Queue, true, false, false, false, args)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("amqp: queue %q %s: %w", s.Queue, where, err)
	}
	if !s.DryRun {
		err = onChannel(conn, func(ch *amqp091.Channel) error { return ch.QueueBind(s.Queue, s.BindingKey, c.Exchange, false, nil) })
	}
	if err != nil {
		return nil, fmt.Errorf("amqp: bind queue %q to exchange %q with key %q %s: %w", s.Queue, c.Exchange, s.BindingKey, where, err)
	}
	binding := SetupStep{
		Resource: fmt.Sprintf("binding of queue %q to exchange %q", s.Queue, c.Exchange),
		Created:  exchange.Created || queue.Created,
		Settings: fmt.Sprintf("binding key %q (binding again changes nothing)", s.BindingKey),
	}
	return append(steps, queue, binding), nil
}

// declare runs exists on a channel of its own and, when the server says
// the resource is not found, create on another (unless dryRun). A resource that exists is
// declared again with the settings asked, which the server refuses when
// they are inequivalent (ErrDiffers) and which otherwise changes nothing.
// It reports whether it created the resource.
func declare(conn *amqp091.Connection, dryRun bool, exists, create func(*amqp091.Channel) error) (bool, error) {
	err := onChannel(conn, exists)
	var e *amqp091.Error
	switch {
	case errors.As(err, &e) && e.Code == amqp091.NotFound && dryRun:
		return true, nil
	case errors.As(err, &e) && e.Code == amqp091.NotFound:
		return true, onChannel(conn, create)
	case err != nil:
		return false, err
	}
	err = onChannel(conn, create)
	if errors.As(err, &e) && e.Code == amqp091.PreconditionFailed {
		return false, fmt.Errorf("%w: %s", ErrDiffers, e.Reason)
	}
	return false, err
}

// onChannel runs fn on a new channel (a failed declaration closes its
// channel) and closes it.
func onChannel(conn *amqp091.Connection, fn func(*amqp091.Channel) error) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := fn(ch); err != nil {
		return err
	}
	return ch.Close()
}
