package nats_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/sink/nats"
)

func TestParseURL(t *testing.T) {
	good := []struct {
		url  string
		want func(nats.Config) bool
	}{
		{"nats://127.0.0.1:4222?subject=orders.{event_type}", func(c nats.Config) bool {
			return slices.Equal(c.Servers, []string{"nats://127.0.0.1:4222"}) && c.Subject.String() == "orders.{event_type}" && c.Stream == ""
		}},
		{"nats://a:1,b:2,c:3?subject=x&stream=ORDERS", func(c nats.Config) bool {
			return slices.Equal(c.Servers, []string{"nats://a:1", "nats://b:2", "nats://c:3"}) && c.Stream == "ORDERS"
		}},
		{"nats://h?subject=x", func(c nats.Config) bool { return slices.Equal(c.Servers, []string{"nats://h:4222"}) }},
		{"nats://alice:s3cret@h:4222?subject=x", func(c nats.Config) bool { return c.User == "alice" && c.Password == "s3cret" && c.Token == "" }},
		{"nats://t0ken@h:4222?subject=x", func(c nats.Config) bool { return c.Token == "t0ken" && c.User == "" }},
		{"nats://h:4222/?subject=x&max_pending=10&timeout=3s", func(c nats.Config) bool {
			return c.MaxPending == 10 && c.Timeout == 3*time.Second
		}},
	}
	for _, g := range good {
		c, err := nats.ParseURL(g.url)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", g.url, err)
			continue
		}
		if !g.want(c) {
			t.Errorf("ParseURL(%q) = %+v", g.url, c)
		}
	}

	bad := []struct{ url, want string }{
		{"nats://h:4222", "Subject is required"},
		{"nats://h:4222?subject=", "Subject is required"},
		{"amqp://h:4222?subject=x", "scheme"},
		{"nats://?subject=x", "no host"},
		{"nats://h:4222/orders?subject=x", "path"},
		{"nats://h:4222?subject=orders.{eventtype}", "unknown placeholder"},
		{"nats://h:4222?subject=orders.*", "wildcard"},
		{"nats://h:4222?subject=orders..x", "empty token"},
		{"nats://h:4222?subjet=x", `unknown URL parameter "subjet"`},
		{"nats://h:4222?subject=x&subject=y", "2 times"},
		{"nats://h:4222?subject=x&max_pending=0", "max_pending"},
		{"nats://h:4222?subject=x&timeout=soon", "timeout"},
		{"nats://h:4222?subject=x&stream=a.b", "stream name"},
		{"nats://a:1,,b:2?subject=x", "empty entry"},
		{"nats://alice:s3cret@h:4222:x?subject=x", "does not parse"},
	}
	for _, b := range bad {
		_, err := nats.ParseURL(b.url)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("ParseURL(%q) = %v, want an error with %q", b.url, err, b.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseURL(%q): the error shows the password: %v", b.url, err)
		}
	}
}

// String and Destination name the servers, subject and stream, never the
// password or the token.
func TestStringHidesCredentials(t *testing.T) {
	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, nil)
	host := strings.TrimPrefix(natstest.URL(), "nats://")
	for _, cred := range []string{"alice:s3cret@", "t0kens3cret@"} {
		s := newSink(t, "nats://"+cred+host, prefix+".{event_type}")
		for _, text := range []string{s.String(), s.Destination().Name} {
			if strings.Contains(text, "s3cret") {
				t.Errorf("%q shows a secret", text)
			}
		}
		if want := st.CachedInfo().Config.Name; !strings.Contains(s.String(), want) || !strings.Contains(s.String(), host) {
			t.Errorf("String() = %q, want the server %s and the stream %s", s.String(), host, want)
		}
		if d := s.Destination(); d.System != "nats" || d.Name != prefix+".{event_type}" {
			t.Errorf("Destination() = %+v", d)
		}
	}
}
