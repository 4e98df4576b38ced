// Package amqptest gives tests a real RabbitMQ: exchanges and queues of
// their own, deleted when the test ends, and a way to cut a client's
// connections from the server side.
//
// The server is TEST_AMQP_URL, by default
// amqp://guest:guest@127.0.0.1:5672/. A missing server fails the test: it
// is never skipped. Cutting connections runs rabbitmqctl, which needs the
// rights to reach the server's node (root on a test machine).
package amqptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// URLDefault is the server tests use when TEST_AMQP_URL is not set.
const URLDefault = "amqp://guest:guest@127.0.0.1:5672/"

// URL returns the test server's URL.
func URL() string {
	if u := os.Getenv("TEST_AMQP_URL"); u != "" {
		return u
	}
	return URLDefault
}

// Name returns a new unique name starting with prefix, for an exchange, a
// queue or a connection.
func Name(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// Server is an administrative connection to the test server.
type Server struct {
	t    testing.TB
	conn *amqp091.Connection
}

// Connect connects to the test server; the connection is closed when t
// ends.
func Connect(t testing.TB) *Server {
	t.Helper()
	conn, err := amqp091.DialConfig(URL(), amqp091.Config{
		Dial:       amqp091.DefaultDial(10 * time.Second),
		Properties: amqp091.Table{"connection_name": "amqptest admin"},
	})
	if err != nil {
		t.Fatalf("amqptest: RabbitMQ is not reachable at %s (start it, or set TEST_AMQP_URL): %v", redacted(URL()), err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &Server{t: t, conn: conn}
}

// Do runs fn on a channel of its own (a failed AMQP operation closes its
// channel) and fails the test on its error.
func (s *Server) Do(what string, fn func(ch *amqp091.Channel) error) {
	s.t.Helper()
	if err := s.do(fn); err != nil {
		s.t.Fatalf("amqptest: %s: %v", what, err)
	}
}

func (s *Server) do(fn func(ch *amqp091.Channel) error) error {
	ch, err := s.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	return fn(ch)
}

// Exchange declares a new durable topic exchange, deleted when the test
// ends, and returns its name.
func (s *Server) Exchange() string {
	s.t.Helper()
	name := Name("pbtest_x")
	s.Do("declare exchange "+name, func(ch *amqp091.Channel) error {
		return ch.ExchangeDeclare(name, amqp091.ExchangeTopic, true, false, false, false, nil)
	})
	s.t.Cleanup(func() {
		_ = s.do(func(ch *amqp091.Channel) error { return ch.ExchangeDelete(name, false, false) })
	})
	return name
}

// Queue declares a new durable quorum queue with the arguments args (such
// as x-dead-letter-exchange; nil for none), bound to exchange with
// bindingKey ("#": every message of a topic exchange), deleted when the
// test ends, and returns its name.
func (s *Server) Queue(exchange, bindingKey string, args amqp091.Table) string {
	s.t.Helper()
	name := Name("pbtest_q")
	all := amqp091.Table{"x-queue-type": "quorum"}
	for k, v := range args {
		all[k] = v
	}
	s.Do("declare queue "+name, func(ch *amqp091.Channel) error {
		if _, err := ch.QueueDeclare(name, true, false, false, false, all); err != nil {
			return err
		}
		return ch.QueueBind(name, bindingKey, exchange, false, nil)
	})
	s.t.Cleanup(func() {
		_ = s.do(func(ch *amqp091.Channel) error { _, err := ch.QueueDelete(name, false, false, false); return err })
	})
	return name
}

// Count returns the number of ready messages in queue.
func (s *Server) Count(queue string) int {
	s.t.Helper()
	var n int
	s.Do("inspect queue "+queue, func(ch *amqp091.Channel) error {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		n = q.Messages
		return err
	})
	return n
}

// CloseConnections closes, from the server side, every connection whose
// client named it connectionName (the connection_name client property),
// and returns how many it closed. Other clients of the server are left
// alone.
func CloseConnections(t testing.TB, connectionName, reason string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", "list_connections", "-q", "--no-table-headers", "pid", "client_properties").Output()
	if err != nil {
		t.Fatalf("amqptest: rabbitmqctl list_connections: %v", err)
	}
	// A line is "<pid>\t[{\"connection_name\",\"NAME\"},...]".
	property := `{"connection_name","` + connectionName + `"}`
	closed := 0
	for line := range strings.Lines(string(out)) {
		pid, props, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok || !strings.Contains(props, property) {
			continue
		}
		if out, err := exec.CommandContext(ctx, "rabbitmqctl", "close_connection", pid, reason).CombinedOutput(); err != nil {
			t.Fatalf("amqptest: rabbitmqctl close_connection %s: %v\n%s", pid, err, out)
		}
		closed++
	}
	return closed
}

func redacted(raw string) string {
	if at := strings.LastIndexByte(raw, '@'); at >= 0 {
		return "…@" + raw[at+1:]
	}
	return raw
}
