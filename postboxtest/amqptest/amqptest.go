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
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
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

// Proxy is a TCP proxy in front of the test server, which a test can
// freeze: it then stops passing bytes either way, as a network that drops
// packets would, without closing anything.
type Proxy struct {
	// URL is the test server's URL through the proxy.
	URL    string
	frozen atomic.Bool
	closed chan struct{}
}

// NewProxy starts a proxy to the test server, closed when the test ends.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	u, err := url.Parse(URL())
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5672")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.Host = ln.Addr().String()
	p := &Proxy{URL: u.String(), closed: make(chan struct{})}
	var conns sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		close(p.closed)
		conns.Wait()
	})
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.DialTimeout("tcp", target, 10*time.Second)
			if err != nil {
				_ = client.Close()
				continue
			}
			closeBoth := sync.OnceFunc(func() { _ = client.Close(); _ = server.Close() })
			conns.Go(func() { p.pipe(server, client); closeBoth() })
			conns.Go(func() { p.pipe(client, server); closeBoth() })
		}
	}()
	return p
}

// Freeze stops passing bytes; Thaw passes them again, those held first.
func (p *Proxy) Freeze() { p.frozen.Store(true) }

// Thaw undoes Freeze.
func (p *Proxy) Thaw() { p.frozen.Store(false) }

// pipe copies from src to dst until either closes or the proxy does,
// holding what it read while the proxy is frozen.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		_ = src.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := src.Read(buf)
		for p.frozen.Load() {
			select {
			case <-p.closed:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			return
		}
		select {
		case <-p.closed:
			return
		default:
		}
	}
}
