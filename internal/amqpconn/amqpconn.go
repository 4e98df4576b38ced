// Package amqpconn opens the AMQP connections of postbox's RabbitMQ sink
// and inbox consumer, with the same bounds on every network step.
package amqpconn

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// CloseTimeout bounds the closing handshake of a connection.
const CloseTimeout = 5 * time.Second

// Options say how to connect.
type Options struct {
	// Vhost overrides the URL's vhost when not empty.
	Vhost string
	// Timeout bounds connecting, TLS and the AMQP handshake.
	Timeout time.Duration
	// Heartbeat is the AMQP heartbeat interval.
	Heartbeat time.Duration
	// Name is the connection_name client property, which the server's
	// tools show.
	Name string
}

// Dial connects to the server at rawURL (amqp:// or amqps://) within
// o.Timeout and ctx.
func Dial(ctx context.Context, rawURL string, o Options) (*amqp091.Connection, error) {
	timeout := o.Timeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	return amqp091.DialConfig(rawURL, amqp091.Config{
		Vhost:      o.Vhost,
		Heartbeat:  o.Heartbeat,
		Properties: amqp091.Table{"connection_name": o.Name, "product": "postbox"},
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: timeout}
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// Bounds the TLS and AMQP handshakes; amqp091 clears it once
			// the connection is open.
			return conn, conn.SetDeadline(time.Now().Add(timeout))
		},
	})
}

// ProcessName names a connection of this process: what, the host and the
// process id, which tell an operator where a connection comes from.
func ProcessName(what string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s on %s pid %d", what, host, os.Getpid())
}

// Close closes conn within CloseTimeout.
func Close(conn *amqp091.Connection) { _ = conn.CloseDeadline(time.Now().Add(CloseTimeout)) }

// Redact hides the password of a server URL, also of one that does not
// parse.
func Redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if at := strings.LastIndexByte(raw, '@'); at >= 0 {
		if i := strings.Index(raw, "://"); i >= 0 && i < at {
			return raw[:i+3] + "…@" + raw[at+1:]
		}
		return "…@" + raw[at+1:]
	}
	return raw
}
