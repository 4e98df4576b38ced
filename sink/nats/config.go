package nats

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/sink"
)

// Defaults of the Config fields left zero.
const (
	// TimeoutDefault bounds connecting, each JetStream API call at start,
	// and the wait for one PubAck.
	TimeoutDefault = 10 * time.Second
	// MaxPendingDefault is the most publishes awaiting their PubAck at
	// once; it is above the relay's default concurrency (64), so the
	// relay's deliveries are never one round trip each.
	MaxPendingDefault = 1024
	// ReconnectWaitDefault is the pause between two reconnection attempts
	// to the same server.
	ReconnectWaitDefault = time.Second
	// NameDefault is the connection's name, as the server's monitoring
	// shows it.
	NameDefault = "postbox relay"
)

// Config configures a Sink. Servers and Subject are required; a zero field
// takes its default and a negative one is refused. ParseURL makes a Config
// from a nats:// URL.
type Config struct {
	// Servers are the NATS servers, nats://HOST:PORT each (several for a
	// cluster; the client also learns the other members from the server it
	// reaches). Required.
	Servers []string
	// User and Password authenticate with a user name and password; Token
	// with a token. Both may be empty (no authentication), not both set.
	User, Password, Token string
	// Subject names the subject of each event: "orders.{event_type}", or
	// a fixed subject (see sink.Template). Required. An expansion that is
	// not a valid subject (empty, with white space, an empty token or a
	// wildcard token, starting with "$" from a placeholder) fails its event
	// (sink.Permanent) and is never published.
	Subject sink.Template
	// Stream names the JetStream stream that must capture the subjects.
	// Optional: when set, New checks that it exists and, for a fixed
	// Subject, that it is the stream capturing it. Without it, New checks
	// that some stream captures a fixed Subject, or, for a templated one,
	// the subjects that begin with its text before the first placeholder.
	Stream string
	// Timeout bounds connecting, each JetStream API call of New, and the
	// wait for one PubAck. Default TimeoutDefault (10s).
	Timeout time.Duration
	// MaxPending bounds the publishes awaiting their PubAck at once;
	// further publishes wait for one to be acknowledged. Default
	// MaxPendingDefault (1024).
	MaxPending int
	// ReconnectWait is the pause between reconnection attempts to one
	// server; the sink reconnects forever. Default ReconnectWaitDefault
	// (1s).
	ReconnectWait time.Duration
	// Name is the connection's name on the server. Default NameDefault.
	Name string
	// Logger receives a line when the connection is lost and when it is
	// back. Default slog.Default().
	Logger *slog.Logger
}

// ParseURL returns the Config of a URL of the form
//
//	nats://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]?subject=TEMPLATE[&stream=NAME][&max_pending=N][&timeout=DURATION]
//
// A user without a password is a token. The subject template takes
// {event_type}, {aggregate_type} and {aggregate_id}. An unknown parameter
// is an error, so that a misspelt one is never silently ignored. Errors
// never hold the password or token.
func ParseURL(rawURL string) (Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Config{}, errors.New("nats: the URL does not parse (want nats://HOST:PORT?subject=TEMPLATE)")
	}
	if u.Scheme != "nats" {
		return Config{}, fmt.Errorf("nats: URL scheme %q, want nats", u.Scheme)
	}
	if u.Host == "" {
		return Config{}, errors.New("nats: the URL has no host (want nats://HOST:PORT?subject=TEMPLATE)")
	}
	if u.Path != "" && u.Path != "/" {
		return Config{}, fmt.Errorf("nats: the URL has a path %q; the subject goes in ?subject=", u.Path)
	}
	var c Config
	for _, host := range strings.Split(u.Host, ",") {
		if host == "" {
			return Config{}, fmt.Errorf("nats: the URL's host list %q has an empty entry", u.Host)
		}
		if !strings.Contains(host, ":") {
			host += ":4222"
		}
		c.Servers = append(c.Servers, "nats://"+host)
	}
	if u.User != nil {
		if password, ok := u.User.Password(); ok {
			c.User, c.Password = u.User.Username(), password
		} else {
			c.Token = u.User.Username()
		}
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("nats: the URL's query does not parse: %v", err)
	}
	for name, values := range query {
		if len(values) != 1 {
			return Config{}, fmt.Errorf("nats: URL parameter %s is given %d times", name, len(values))
		}
		v := values[0]
		switch name {
		case "subject":
			if c.Subject, err = sink.ParseTemplate(v); err != nil {
				return Config{}, fmt.Errorf("nats: URL parameter subject: %w", err)
			}
		case "stream":
			c.Stream = v
		case "max_pending":
			if c.MaxPending, err = strconv.Atoi(v); err != nil || c.MaxPending < 1 {
				return Config{}, fmt.Errorf("nats: URL parameter max_pending %q: want a positive integer", v)
			}
		case "timeout":
			if c.Timeout, err = time.ParseDuration(v); err != nil || c.Timeout <= 0 {
				return Config{}, fmt.Errorf("nats: URL parameter timeout %q: want a positive duration such as 5s", v)
			}
		default:
			return Config{}, fmt.Errorf("nats: unknown URL parameter %q (want subject, stream, max_pending or timeout)", name)
		}
	}
	return c, c.validate()
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = TimeoutDefault
	}
	if c.MaxPending == 0 {
		c.MaxPending = MaxPendingDefault
	}
	if c.ReconnectWait == 0 {
		c.ReconnectWait = ReconnectWaitDefault
	}
	if c.Name == "" {
		c.Name = NameDefault
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate checks c before withDefaults; errors name the field and never
// carry a password or token.
func (c Config) validate() error {
	switch {
	case len(c.Servers) == 0:
		return errors.New("nats: Config.Servers is required")
	case c.Subject.String() == "":
		return errors.New("nats: Config.Subject is required (the URL parameter subject=TEMPLATE)")
	case c.Token != "" && (c.User != "" || c.Password != ""):
		return errors.New("nats: Config.Token and Config.User/Password: give one or the other")
	case c.Password != "" && c.User == "":
		return errors.New("nats: Config.Password without Config.User")
	case c.Timeout < 0:
		return fmt.Errorf("nats: Config.Timeout %v is negative", c.Timeout)
	case c.MaxPending < 0:
		return fmt.Errorf("nats: Config.MaxPending %d is negative", c.MaxPending)
	case c.ReconnectWait < 0:
		return fmt.Errorf("nats: Config.ReconnectWait %v is negative", c.ReconnectWait)
	}
	if c.Subject.IsFixed() {
		if err := checkSubject(c.Subject.String(), false); err != nil {
			return fmt.Errorf("nats: Config.Subject: %w", err)
		}
	}
	if strings.ContainsAny(c.Stream, " \t\r\n.*>/\\") {
		return fmt.Errorf("nats: Config.Stream %q is not a valid stream name", c.Stream)
	}
	return nil
}
