package amqp

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		raw                        string
		address, vhost, routingKey string
		channels                   int
	}{
		{"amqp://guest:guest@127.0.0.1:5672/?exchange=orders&routing_key={event_type}", "amqp://127.0.0.1:5672", "/", "{event_type}", 0},
		{"amqp://guest:guest@127.0.0.1:5672?exchange=orders", "amqp://127.0.0.1:5672", "/", "{event_type}", 0},
		{"amqp://u:p@mq.example/%2F?exchange=orders", "amqp://mq.example:5672", "/", "{event_type}", 0},
		{"amqps://u:p@mq.example/shop?exchange=orders&routing_key=orders.{aggregate_type}.{event_type}&channels=8", "amqps://mq.example:5671", "shop", "orders.{aggregate_type}.{event_type}", 8},
		{"amqp://u:p@mq.example/a%2Fb?exchange=orders", "amqp://mq.example:5672", "a/b", "{event_type}", 0},
		{"AMQP://[::1]:5673/?exchange=orders", "amqp://[::1]:5673", "/", "{event_type}", 0},
	} {
		cfg, err := ParseURL(c.raw)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", c.raw, err)
			continue
		}
		s, err := cfg.settle()
		if err != nil {
			t.Errorf("ParseURL(%q) gave a Config that does not settle: %v", c.raw, err)
			continue
		}
		if s.server.address != c.address || s.server.vhost != c.vhost || s.routingKey.String() != c.routingKey || cfg.Channels != c.channels || s.Exchange != "orders" {
			t.Errorf("ParseURL(%q): address %q vhost %q routing key %q channels %d exchange %q; want %q %q %q %d orders",
				c.raw, s.server.address, s.server.vhost, s.routingKey, cfg.Channels, s.Exchange, c.address, c.vhost, c.routingKey, c.channels)
		}
		if strings.Contains(cfg.URL, "?") || strings.Contains(s.server.dialURL, "?") {
			t.Errorf("ParseURL(%q): the server URL %q keeps the query", c.raw, cfg.URL)
		}
	}
}

func TestParseURLRefuses(t *testing.T) {
	for raw, want := range map[string]string{
		"amqp://u:secret@h/":                                 "exchange=NAME is required",
		"amqp://u:secret@h/?exchange=":                       "exchange=NAME is required",
		"nats://u:secret@h/?exchange=x":                      "scheme",
		"amqp://u:secret@/?exchange=x":                       "no host",
		"amqp://u:secret@h:99999/?exchange=x":                "port",
		"amqp://u:secret@h/a/b?exchange=x":                   "one path segment",
		"amqp://u:secret@h/?exchange=x&routing_kye=y":        `unknown parameter "routing_kye"`,
		"amqp://u:secret@h/?exchange=x&exchange=y":           "given 2 times",
		"amqp://u:secret@h/?exchange=x&channels=0":           "channels",
		"amqp://u:secret@h/?exchange=x&max_message_bytes=-1": "max_message_bytes",
		"amqp://u:secret@h/?exchange=x&routing_key={type}":   "unknown placeholder",
		"amqp://u:secret@h\x7f/?exchange=x":                  "not a URL",
	} {
		cfg, err := ParseURL(raw)
		if err == nil {
			_, err = cfg.settle()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%q): %v, want an error saying %q", raw, err, want)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q): the error shows the password: %v", raw, err)
		}
	}
}

func TestStringHasNoCredentials(t *testing.T) {
	cfg, err := ParseURL("amqp://relay:s3cr3t-pw@mq.example:5672/shop?exchange=orders")
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.settle()
	if err != nil {
		t.Fatal(err)
	}
	k := &Sink{s: s}
	got := k.String()
	if strings.Contains(got, "s3cr3t") || strings.Contains(got, "relay") {
		t.Errorf("String() = %q shows the credentials", got)
	}
	for _, want := range []string{"amqp://mq.example:5672", `"shop"`, `"orders"`, "{event_type}"} {
		if !strings.Contains(got, want) {
			t.Errorf("String() = %q, want it to name %s", got, want)
		}
	}
	if d := k.Destination(); d.System != "rabbitmq" || d.Name != "orders" {
		t.Errorf("Destination() = %+v, want rabbitmq orders", d)
	}
}

func TestConfigRefuses(t *testing.T) {
	for name, c := range map[string]Config{
		"no URL":          {Exchange: "x"},
		"query":           {URL: "amqp://h/?exchange=x", Exchange: "x"},
		"no exchange":     {URL: "amqp://h/"},
		"negative":        {URL: "amqp://h/", Exchange: "x", Channels: -1},
		"backoff":         {URL: "amqp://h/", Exchange: "x", ReconnectMin: 10e9, ReconnectMax: 1e9},
		"routing key":     {URL: "amqp://h/", Exchange: "x", RoutingKey: "{event_type"},
		"negative dial":   {URL: "amqp://h/", Exchange: "x", DialTimeout: -1},
		"negative beat":   {URL: "amqp://h/", Exchange: "x", Heartbeat: -1},
		"negative resume": {URL: "amqp://h/", Exchange: "x", ReconnectMin: -1},
	} {
		if _, err := c.settle(); err == nil {
			t.Errorf("%s: %+v settled", name, c)
		}
	}
}

// max_message_bytes sets Config.MaxMessageBytes; without it, the default.
func TestParseURLMaxMessageBytes(t *testing.T) {
	for raw, want := range map[string]int{
		"amqp://h/?exchange=x&max_message_bytes=134217728": 134217728,
		"amqp://h/?exchange=x":                             MaxMessageBytesDefault,
	} {
		cfg, err := ParseURL(raw)
		if err != nil {
			t.Fatal(err)
		}
		s, err := cfg.settle()
		if err != nil || s.MaxMessageBytes != want {
			t.Errorf("ParseURL(%q): MaxMessageBytes %d (%v), want %d", raw, s.MaxMessageBytes, err, want)
		}
	}
}
