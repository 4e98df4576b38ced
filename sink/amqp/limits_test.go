package amqp_test

import (
	"strings"
	"testing"

	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/amqp"
)

// An event that AMQP or the connection's negotiated limits cannot carry
// fails alone, permanently, with an error naming the limit and the size;
// the connection stays up (no reconnection is logged) and the 20 events
// published after it are delivered. On the old code each of these broke
// the connection or a channel: sink.Unavailable, an outage probed with
// the same event forever.
func TestEventOverALimitFailsAloneAndKeepsTheConnection(t *testing.T) {
	for _, c := range []struct {
		name  string
		tweak func(m *sink.Message)
		says  []string
	}{
		{"header name over 255 bytes", func(m *sink.Message) {
			m.Headers = map[string]string{strings.Repeat("n", 256): "v"}
		}, []string{"header name", "256 bytes", "255"}},
		{"headers over frame_max", func(m *sink.Message) {
			m.Headers = map[string]string{"big": strings.Repeat("x", 200<<10)}
		}, []string{"frame_max", "131072"}},
		{"sender-selected distribution header", func(m *sink.Message) {
			m.Headers = map[string]string{"BCC": "other.queue"}
		}, []string{`header "BCC"`}},
		{"event type over 255 bytes", func(m *sink.Message) {
			m.EventType = strings.Repeat("t", 300)
		}, []string{"event type", "300 bytes", "255"}},
		{"payload over MaxMessageBytes", func(m *sink.Message) {
			m.Payload = []byte(`"` + strings.Repeat("p", 2000) + `"`)
		}, []string{"2002 bytes", "MaxMessageBytes", "1024"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := amqptest.Connect(t)
			exchange := srv.Exchange()
			queue := srv.Queue(exchange, "#", nil)
			cfg := sinkConfig(t, exchange, "fixed.key")
			cfg.MaxMessageBytes = 1024
			var logs *amqptest.Logs
			cfg.Logger, logs = amqptest.NewLogs()
			k, err := amqp.New(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			bad := message("order.created")
			c.tweak(bad)
			err = k.Publish(t.Context(), bad)
			if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Permanent {
				t.Fatalf("Publish: %v (%v), want a permanent failure", err, kind)
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			for i := range 20 {
				if err := k.Publish(t.Context(), message("order.created")); err != nil {
					t.Fatalf("publish %d after the refused event: %v", i, err)
				}
			}
			waitQueue(t, srv, queue, 20)
			if strings.Contains(logs.String(), "connection lost") {
				t.Errorf("the connection was lost:\n%s", logs.String())
			}
		})
	}
}
