package amqp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/internal/amqpconn"
	"github.com/postbox-go/postbox/sink"
)

// Defaults of the Config fields left zero.
const (
	// RoutingKeyDefault routes each event by its type.
	RoutingKeyDefault   = sink.PlaceholderEventType
	ChannelsDefault     = 4
	DialTimeoutDefault  = 10 * time.Second
	TimeoutDefault      = 10 * time.Second
	HeartbeatDefault    = 10 * time.Second
	ReconnectMinDefault = 100 * time.Millisecond
	ReconnectMaxDefault = 10 * time.Second
	// MaxMessageBytesDefault is RabbitMQ's own default max_message_size
	// since 4.0 (16 MiB; 128 MiB in 3.8 to 3.13).
	MaxMessageBytesDefault = 16 << 20
)

// Config configures a Sink. URL and Exchange are required; a zero field
// takes its default and a negative one is refused.
type Config struct {
	// URL is the server: amqp://USER:PASS@HOST:PORT/VHOST or amqps://...
	// (TLS). An empty VHOST is the default vhost "/", also written %2F.
	// Required.
	URL string
	// Exchange receives every message. It must exist: New checks it.
	// Required.
	Exchange string
	// RoutingKey is the routing key of each message, a sink.Template such
	// as "orders.{event_type}". Default RoutingKeyDefault ({event_type}).
	RoutingKey string
	// Channels is the number of AMQP channels that publish, each with many
	// publishes awaiting their confirms at once. Default ChannelsDefault.
	Channels int
	// DialTimeout bounds connecting, TLS and the AMQP handshake. Default
	// DialTimeoutDefault.
	DialTimeout time.Duration
	// Timeout bounds one publish: sending the message and the server's
	// confirm. A publish past it fails with an error whose Timeout() is
	// true (a relay takes several in a row for an outage). Default
	// TimeoutDefault.
	Timeout time.Duration
	// Heartbeat is the AMQP heartbeat interval, which detects a dead
	// connection. Default HeartbeatDefault.
	Heartbeat time.Duration
	// ReconnectMin and ReconnectMax bound the delay between attempts to
	// reconnect after the connection or a channel closed, doubling from
	// the first to the second. Defaults ReconnectMinDefault,
	// ReconnectMaxDefault.
	ReconnectMin, ReconnectMax time.Duration
	// MaxMessageBytes is the largest payload published: a larger event
	// fails at once, permanently, and is never sent (a message over the
	// server's max_message_size closes the channel). Set it to the
	// server's max_message_size, which AMQP does not advertise. When the
	// server's is lower after all, the first larger message it refuses
	// fails permanently, and the sink refuses larger ones from then on.
	// Default MaxMessageBytesDefault (16 MiB). The other limits come from AMQP
	// and the connection: header names and the event type of at most 255
	// bytes, and the properties and headers within the negotiated
	// frame_max (128 KiB by default) in one frame.
	MaxMessageBytes int
	// ConnectionName is the connection's name on the server (the
	// connection_name client property, which the management UI and
	// rabbitmqctl list_connections show). Default "postbox relay on HOST
	// pid PID", this process.
	ConnectionName string
	// Logger receives the connection's state changes (lost, reconnected,
	// blocked by the server), never credentials. Default slog.Default().
	Logger *slog.Logger
}

// Query parameters of a sink URL.
const (
	paramExchange   = "exchange"
	paramRoutingKey = "routing_key"
	paramChannels   = "channels"
	paramMaxMessage = "max_message_bytes"
)

// ParseURL reads the sink URL of `postbox relay --sink`:
//
//	amqp://USER:PASS@HOST:PORT/VHOST?exchange=NAME&routing_key=TEMPLATE
//
// into a Config whose URL is the server part (without the query).
// routing_key defaults to {event_type}; channels sets Config.Channels,
// max_message_bytes Config.MaxMessageBytes.
// Other query parameters are refused, so that a misspelt one is not
// silently ignored. Errors never show the password.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("amqp: %q is not a URL", amqpconn.Redact(raw))
	}
	if _, err := serverOf(u); err != nil {
		return Config{}, err
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("amqp: %s: query: %v", u.Redacted(), err)
	}
	cfg := Config{Exchange: q.Get(paramExchange), RoutingKey: q.Get(paramRoutingKey)}
	if s := q.Get(paramChannels); s != "" {
		if cfg.Channels, err = strconv.Atoi(s); err != nil || cfg.Channels < 1 {
			return Config{}, fmt.Errorf("amqp: %s: channels=%q: want a positive number", u.Redacted(), s)
		}
	}
	if s := q.Get(paramMaxMessage); s != "" {
		if cfg.MaxMessageBytes, err = strconv.Atoi(s); err != nil || cfg.MaxMessageBytes < 1 {
			return Config{}, fmt.Errorf("amqp: %s: %s=%q: want a positive number of bytes", u.Redacted(), paramMaxMessage, s)
		}
	}
	for name, values := range q {
		switch {
		case name != paramExchange && name != paramRoutingKey && name != paramChannels && name != paramMaxMessage:
			return Config{}, fmt.Errorf("amqp: %s: unknown parameter %q (want %s, %s, %s or %s)", u.Redacted(), name, paramExchange, paramRoutingKey, paramChannels, paramMaxMessage)
		case len(values) > 1:
			return Config{}, fmt.Errorf("amqp: %s: parameter %q given %d times", u.Redacted(), name, len(values))
		}
	}
	if cfg.Exchange == "" {
		return Config{}, fmt.Errorf("amqp: %s: exchange=NAME is required", u.Redacted())
	}
	u.RawQuery, u.ForceQuery, u.Fragment = "", false, ""
	cfg.URL = u.String()
	return cfg, nil
}

// server is where a Config's URL points, without credentials.
type server struct {
	// dialURL is the URL without path or query, which amqp091 dials.
	dialURL string
	// address is scheme://host:port, for logs.
	address string
	vhost   string
}

// serverOf checks a server URL and splits it into what dials it and what
// names it.
func serverOf(u *url.URL) (server, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "amqp" && scheme != "amqps" {
		return server{}, fmt.Errorf("amqp: %s: scheme %q: want amqp or amqps", u.Redacted(), u.Scheme)
	}
	if u.Hostname() == "" {
		return server{}, fmt.Errorf("amqp: %s: no host", u.Redacted())
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"amqp": "5672", "amqps": "5671"}[scheme]
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return server{}, fmt.Errorf("amqp: %s: port %q is not a port number", u.Redacted(), port)
	}
	vhost, err := vhostOf(u)
	if err != nil {
		return server{}, err
	}
	host := u.Hostname()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	d := url.URL{Scheme: scheme, User: u.User, Host: host + ":" + port, Path: "/"}
	return server{dialURL: d.String(), address: scheme + "://" + host + ":" + port, vhost: vhost}, nil
}

// vhostOf returns the vhost a URL's path names: "" and "/" are the default
// vhost "/", as is "/%2F"; "/orders" is "orders". A path of several
// segments is refused: a vhost's own slash is written %2F.
func vhostOf(u *url.URL) (string, error) {
	p := u.EscapedPath()
	if p == "" || p == "/" {
		return "/", nil
	}
	p = strings.TrimPrefix(p, "/")
	if strings.Contains(p, "/") {
		return "", fmt.Errorf("amqp: %s: path %q: the vhost is one path segment (write a slash in it as %%2F)", u.Redacted(), u.EscapedPath())
	}
	vhost, err := url.PathUnescape(p)
	if err != nil {
		return "", fmt.Errorf("amqp: %s: vhost %q: %v", u.Redacted(), p, err)
	}
	return vhost, nil
}

// settings is a Config checked and filled with its defaults.
type settings struct {
	Config
	server     server
	routingKey sink.Template
}

// settle returns c with its defaults, or an error naming the field that is
// wrong.
func (c Config) settle() (settings, error) {
	if c.URL == "" {
		return settings{}, errors.New("amqp: Config.URL is empty")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return settings{}, fmt.Errorf("amqp: Config.URL %q is not a URL", amqpconn.Redact(c.URL))
	}
	if u.RawQuery != "" {
		return settings{}, fmt.Errorf("amqp: Config.URL %s has a query: parse a sink URL with ParseURL", u.Redacted())
	}
	srv, err := serverOf(u)
	if err != nil {
		return settings{}, err
	}
	if c.Exchange == "" {
		return settings{}, errors.New("amqp: Config.Exchange is empty (the default exchange cannot be checked; name one)")
	}
	if c.RoutingKey == "" {
		c.RoutingKey = RoutingKeyDefault
	}
	key, err := sink.ParseTemplate(c.RoutingKey)
	if err != nil {
		return settings{}, fmt.Errorf("amqp: Config.RoutingKey: %w", err)
	}
	for name, v := range map[string]int64{
		"Channels": int64(c.Channels), "DialTimeout": int64(c.DialTimeout), "Timeout": int64(c.Timeout), "Heartbeat": int64(c.Heartbeat),
		"ReconnectMin": int64(c.ReconnectMin), "ReconnectMax": int64(c.ReconnectMax), "MaxMessageBytes": int64(c.MaxMessageBytes),
	} {
		if v < 0 {
			return settings{}, fmt.Errorf("amqp: Config.%s is negative", name)
		}
	}
	setDefault(&c.Channels, ChannelsDefault)
	setDefault(&c.DialTimeout, DialTimeoutDefault)
	setDefault(&c.Timeout, TimeoutDefault)
	setDefault(&c.Heartbeat, HeartbeatDefault)
	setDefault(&c.ReconnectMin, ReconnectMinDefault)
	setDefault(&c.ReconnectMax, ReconnectMaxDefault)
	setDefault(&c.MaxMessageBytes, MaxMessageBytesDefault)
	if c.ReconnectMax < c.ReconnectMin {
		return settings{}, fmt.Errorf("amqp: Config.ReconnectMax %v is under ReconnectMin %v", c.ReconnectMax, c.ReconnectMin)
	}
	if c.ConnectionName == "" {
		c.ConnectionName = amqpconn.ProcessName("postbox relay")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return settings{Config: c, server: srv, routingKey: key}, nil
}

func setDefault[T int | time.Duration](field *T, def T) {
	if *field == 0 {
		*field = def
	}
}
