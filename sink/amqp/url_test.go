package amqp_test

import (
	"errors"
	"flag"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/amqp"
)

// openURL opens raw through amqp.URL, closing the sink when the test ends.
func openURL(t *testing.T, raw string, o sink.URLOptions) (sink.Sink, error) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	s, err := amqp.URL.Open(t.Context(), u, o)
	if err == nil {
		t.Cleanup(func() { _ = s.(io.Closer).Close() })
	}
	return s, err
}

func TestURLKind(t *testing.T) {
	for _, raw := range []string{"amqp://h/?exchange=x", "amqps://h/?exchange=x"} {
		if k, _, err := sink.Lookup([]sink.URLKind{amqp.URL}, raw); err != nil || k.Name != "amqp" {
			t.Errorf("Lookup(%q) = %q, %v, want amqp", raw, k.Name, err)
		}
	}
	if amqp.URL.Concurrency != 1024 || amqp.URL.PublishBatch != 1 {
		t.Errorf("Concurrency %d, PublishBatch %d, want 1024 and 1", amqp.URL.Concurrency, amqp.URL.PublishBatch)
	}
}

// A URL without credentials takes the options' (else the client would
// log in as guest); the URL's own win.
func TestURLOpenTakesCredentialsFromTheOptions(t *testing.T) {
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	queue := srv.Queue(exchange, "#", nil)
	server, err := url.Parse(amqptest.URL())
	if err != nil {
		t.Fatal(err)
	}
	user := server.User.Username()
	password, _ := server.User.Password()
	bare := *server
	bare.User = nil
	query := "?exchange=" + exchange
	for _, c := range []struct {
		name   string
		url    string
		o      sink.URLOptions
		opened bool
	}{
		{"the options'", bare.String() + query, sink.URLOptions{User: user, Password: password}, true},
		{"a wrong password", bare.String() + query, sink.URLOptions{User: user, Password: "wrong-s3cret"}, false},
		{"the URL's first", server.String() + query, sink.URLOptions{User: user, Password: "wrong-s3cret"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.Timeout = 5 * time.Second
			s, err := openURL(t, c.url, c.o)
			if !c.opened {
				var refused *sink.OptionError
				if err == nil || errors.As(err, &refused) || strings.Contains(err.Error(), "wrong-s3cret") {
					t.Fatalf("Open: %v, want the server's refusal, not an OptionError, without the password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			before := srv.Count(queue)
			if err := s.Publish(t.Context(), message("order.paid")); err != nil {
				t.Errorf("publish: %v", err)
			}
			if got := srv.Count(queue) - before; got != 1 {
				t.Errorf("the queue has %d more messages, want 1", got)
			}
			if strings.Contains(s.String(), password) || !strings.Contains(s.String(), exchange) {
				t.Errorf("String() = %q, want the exchange without the password", s.String())
			}
		})
	}
}

// A URL that ParseURL refuses is an OptionError for the URL, without the
// password; a missing exchange is the destination's error.
func TestURLOpenRefuses(t *testing.T) {
	_, err := openURL(t, "amqp://relay:s3cr3t-pw@127.0.0.1:5672/?exchange=x&routing_kye=y", sink.URLOptions{})
	var refused *sink.OptionError
	if !errors.As(err, &refused) || refused.Option != "URL" || !strings.Contains(err.Error(), "routing_kye") || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("a misspelt parameter: %v, want an OptionError for the URL naming it, without the password", err)
	}
	_, err = openURL(t, amqptest.URL()+"?exchange="+amqptest.Name("pbtest_missing"), sink.URLOptions{Timeout: 5 * time.Second})
	if err == nil || errors.As(err, &refused) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a missing exchange: %v, want the sink's error, not an OptionError", err)
	}
}

// A RabbitMQ sink is described by its server, vhost, exchange and routing
// key, never its password.
func TestURLDescribe(t *testing.T) {
	desc, secrets := sink.Describe([]sink.URLKind{amqp.URL}, "amqp://u:p4ss-word@h:5672/vh?exchange=orders&routing_key={event_type}", sink.URLOptions{})
	if desc != "amqp amqp://h:5672/vh exchange=orders routing_key={event_type}" || !slices.Contains(secrets, "p4ss-word") {
		t.Errorf("Describe = %q, %q", desc, secrets)
	}
}

// The setup refuses a URL the sink would refuse, before connecting.
func TestURLSetupRefusesBadURLs(t *testing.T) {
	setup := amqp.URL.Setup(flag.NewFlagSet("setup", flag.ContinueOnError))
	u, _ := url.Parse("amqp://127.0.0.1:1/")
	_, err := setup(t.Context(), u, sink.SetupOptions{DryRun: true})
	var refused *sink.OptionError
	if !errors.As(err, &refused) || refused.Option != "URL" {
		t.Fatalf("setup of a URL without exchange: %v, want an OptionError for the URL", err)
	}
}
