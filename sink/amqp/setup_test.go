package amqp_test

import (
	"errors"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/sink/amqp"
)

// setupNames returns a new exchange and queue name, deleted from the
// server when the test ends.
func setupNames(t *testing.T, srv *amqptest.Server) (exchange, queue string) {
	t.Helper()
	exchange, queue = amqptest.Name("pbtest_setup_x"), amqptest.Name("pbtest_setup_q")
	t.Cleanup(func() {
		srv.Do("delete the queue", func(ch *amqp091.Channel) error { _, err := ch.QueueDelete(queue, false, false, false); return err })
		srv.Do("delete the exchange", func(ch *amqp091.Channel) error { return ch.ExchangeDelete(exchange, false, false) })
	})
	return exchange, queue
}

// A dry run declares nothing; Setup declares a durable topic exchange and a quorum queue bound to it;
// the second time it finds them and says nothing was created; the sink
// then starts, and what it publishes reaches the queue.
func TestSetupDeclaresTheExchangeAndQueueOnce(t *testing.T) {
	srv := amqptest.Connect(t)
	exchange, queue := setupNames(t, srv)
	cfg := amqp.Config{URL: amqptest.URL(), Exchange: exchange, RoutingKey: "orders.{event_type}"}
	setup := amqp.SetupConfig{Queue: queue, BindingKey: "orders.#"}
	dry, err := amqp.Setup(t.Context(), cfg, amqp.SetupConfig{Queue: queue, DryRun: true})
	if err != nil || len(dry) != 3 || !dry[0].Created || !dry[1].Created {
		t.Fatalf("dry run = %+v, %v; want the exchange and queue to create", dry, err)
	}
	if _, err := amqp.New(t.Context(), cfg); err == nil {
		t.Fatal("the exchange exists after a dry run")
	}
	steps, err := amqp.Setup(t.Context(), cfg, setup)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 || !steps[0].Created || !steps[1].Created {
		t.Fatalf("first Setup = %+v, want the exchange, queue and binding created", steps)
	}
	srv.Do("check the queue is a quorum queue", func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclarePassive(queue, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
		return err
	})
	srv.Do("check the exchange is a topic exchange", func(ch *amqp091.Channel) error {
		return ch.ExchangeDeclare(exchange, amqp091.ExchangeTopic, true, false, false, false, nil)
	})
	again, err := amqp.Setup(t.Context(), cfg, setup)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range again {
		if s.Created {
			t.Errorf("second Setup created %s", s.Resource)
		}
	}
	s, err := amqp.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New after Setup: %v", err)
	}
	defer s.Close()
	if err := s.Publish(t.Context(), message("order.paid")); err != nil {
		t.Fatal(err)
	}
	if n := srv.Count(queue); n != 1 {
		t.Errorf("the bound queue holds %d messages, want 1", n)
	}
}

// An exchange of another type is reported and left as it was.
func TestSetupReportsAnExchangeThatDiffers(t *testing.T) {
	srv := amqptest.Connect(t)
	exchange, _ := setupNames(t, srv)
	srv.Do("declare a direct exchange", func(ch *amqp091.Channel) error {
		return ch.ExchangeDeclare(exchange, amqp091.ExchangeDirect, true, false, false, false, nil)
	})
	_, err := amqp.Setup(t.Context(), amqp.Config{URL: amqptest.URL(), Exchange: exchange}, amqp.SetupConfig{})
	if !errors.Is(err, amqp.ErrDiffers) || !strings.Contains(err.Error(), "direct") {
		t.Fatalf("Setup on a direct exchange: %v, want ErrDiffers naming its type", err)
	}
	srv.Do("check the exchange is still direct", func(ch *amqp091.Channel) error {
		return ch.ExchangeDeclare(exchange, amqp091.ExchangeDirect, true, false, false, false, nil)
	})
}
