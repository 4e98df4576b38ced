package bench_test

import (
	"context"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox/cmd/postbox/internal/bench"
	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// The amqp scenario measures the sink through `postbox relay --sink
// amqp://...` beside its two limits, and deletes its exchange and queue.
func TestRunAMQP(t *testing.T) {
	srv := amqptest.Connect(t)
	var (
		progress logbuf.Buffer
		relays   relayCalls
	)
	rep, err := bench.Run(context.Background(), bench.Config{
		DB: pgtest.URL(), Scenarios: []string{bench.ScenarioAMQP}, BrokerEvents: 1000, AMQPURL: amqptest.URL(),
		Progress: &progress, Command: relays.command,
	})
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	for key, relay := range map[string]string{
		"amqp.client": "", "amqp.noop": bench.RelayInProcess, "amqp.postbox": bench.RelayProcess, "amqp.ratio": bench.RelayProcess,
	} {
		m, ok := rep.Measure(key)
		if !ok || !(m.Value > 0) || m.Relay != relay {
			t.Errorf("measure %s = %+v (present %v), want a positive number with relay %q", key, m, ok, relay)
		}
	}
	if m, _ := rep.Measure("amqp.ratio"); m.Goal == nil || m.Met == nil {
		t.Errorf("amqp.ratio has no goal judged: %+v", m)
	}
	if len(relays.args) != 1 {
		t.Fatalf("started `postbox relay` %d times, want 1", len(relays.args))
	}
	args := strings.Join(relays.args[0], " ")
	if !strings.Contains(args, "--sink amqp://") || !strings.Contains(args, "exchange="+rep.Run+"_amqp") {
		t.Errorf("relay args %q: want --sink amqp://... with the scenario's exchange", args)
	}
	// The exchange and the queue are gone: a passive declare fails.
	for what, declare := range map[string]func(ch *amqp091.Channel) error{
		"queue": func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive(rep.Run+"_amqp", true, false, false, false, nil)
			return err
		},
		"exchange": func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclarePassive(rep.Run+"_amqp", "topic", true, false, false, false, nil)
		},
	} {
		var err error
		srv.Do("check the "+what, func(ch *amqp091.Channel) error { err = declare(ch); return nil })
		if err == nil {
			t.Errorf("the scenario's %s is left on the server", what)
		}
	}
}
