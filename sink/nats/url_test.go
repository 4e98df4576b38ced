package nats_test

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/nats"
)

// openURL opens raw through nats.URL, closing the sink when the test ends.
func openURL(t *testing.T, raw string, o sink.URLOptions) (sink.Sink, error) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	s, err := nats.URL.Open(t.Context(), u, o)
	if err == nil {
		t.Cleanup(func() { _ = s.(io.Closer).Close() })
	}
	return s, err
}

func TestURLKind(t *testing.T) {
	if k, _, err := sink.Lookup([]sink.URLKind{nats.URL}, "nats://h:4222?subject=x"); err != nil || k.Name != "nats" {
		t.Errorf("Lookup = %q, %v, want nats", k.Name, err)
	}
	if nats.URL.Concurrency != 1024 || nats.URL.PublishBatch != 256 {
		t.Errorf("Concurrency %d, PublishBatch %d, want 1024 and 256", nats.URL.Concurrency, nats.URL.PublishBatch)
	}
}

// Open's sink is a BatchSink that closes; the options set the timeout
// and a window for their concurrency, unless the URL sets its own.
func TestURLOpenTakesTheOptions(t *testing.T) {
	_, js := natstest.Connect(t, natstest.URL())
	_, prefix := natstest.Stream(t, js, nil)
	base := natstest.URL() + "?subject=" + prefix + ".{event_type}"
	for _, c := range []struct {
		query string
		o     sink.URLOptions
		want  string
	}{
		{"", sink.URLOptions{Timeout: 3 * time.Second, Concurrency: 5000}, "at most 5000 publishes awaiting their PubAck, timeout 3s"},
		{"", sink.URLOptions{Timeout: 3 * time.Second, Concurrency: 10}, fmt.Sprintf("at most %d publishes awaiting their PubAck, timeout 3s", nats.MaxPendingDefault)},
		{"&max_pending=10&timeout=2s", sink.URLOptions{Timeout: 3 * time.Second, Concurrency: 5000}, "at most 10 publishes awaiting their PubAck, timeout 2s"},
	} {
		s, err := openURL(t, base+c.query, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.(sink.BatchSink); !ok {
			t.Errorf("%T is not a sink.BatchSink", s)
		}
		if !strings.Contains(s.String(), c.want) {
			t.Errorf("URL %s, %+v: String() = %q, want %q", c.query, c.o, s.String(), c.want)
		}
		if err := s.Publish(t.Context(), message("1", []byte(`{}`))); err != nil {
			t.Errorf("publish: %v", err)
		}
	}
}

// A URL without credentials takes the options' user and password, or
// their user alone as a token; the URL's own win.
func TestURLOpenTakesCredentialsFromTheOptions(t *testing.T) {
	users := natstest.StartServer(t, "--user", "alice", "--pass", "s3cret")
	tokens := natstest.StartServer(t, "--auth", "t0ken-s3cret")
	for _, c := range []struct {
		name   string
		srv    *natstest.Server
		cred   string // the URL's
		o      sink.URLOptions
		opened bool
	}{
		{"user and password", users, "", sink.URLOptions{User: "alice", Password: "s3cret"}, true},
		{"none", users, "", sink.URLOptions{}, false},
		{"wrong password", users, "", sink.URLOptions{User: "alice", Password: "wrong"}, false},
		{"the URL's first", users, "alice:s3cret@", sink.URLOptions{User: "alice", Password: "wrong"}, true},
		{"token", tokens, "", sink.URLOptions{User: "t0ken-s3cret"}, true},
		{"wrong token", tokens, "", sink.URLOptions{User: "t0ken-wrong"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			admin := strings.Replace(c.srv.URL, "nats://", "nats://alice:s3cret@", 1)
			if c.srv == tokens {
				admin = strings.Replace(c.srv.URL, "nats://", "nats://t0ken-s3cret@", 1)
			}
			_, js := natstest.Connect(t, admin)
			_, prefix := natstest.Stream(t, js, nil)
			raw := strings.Replace(c.srv.URL, "nats://", "nats://"+c.cred, 1) + "?subject=" + prefix + ".x"
			s, err := openURL(t, raw, c.o)
			if c.opened && err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !c.opened {
				var refused *sink.OptionError
				if err == nil || errors.As(err, &refused) {
					t.Fatalf("Open: %v, want the server's refusal (not an OptionError)", err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("Open: %q shows a secret", err)
				}
				return
			}
			if strings.Contains(s.String(), "s3cret") {
				t.Errorf("String() = %q shows a secret", s.String())
			}
		})
	}
}

// A URL that ParseURL refuses is an OptionError for the URL, which never
// shows the password; a missing stream is the destination's error.
func TestURLOpenRefuses(t *testing.T) {
	_, err := openURL(t, "nats://alice:s3cret@h:4222?subjet=x", sink.URLOptions{})
	var refused *sink.OptionError
	if !errors.As(err, &refused) || refused.Option != "URL" || !strings.Contains(err.Error(), `"subjet"`) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a misspelt parameter: %v, want an OptionError for the URL naming it, without the password", err)
	}
	_, err = openURL(t, natstest.URL()+"?subject="+strings.ToLower(natstest.Name("nostream"))+".x", sink.URLOptions{Timeout: 5 * time.Second})
	if err == nil || errors.As(err, &refused) {
		t.Errorf("no stream: %v, want the sink's error, not an OptionError", err)
	}
}

// A NATS sink is described by its server and subject; the other
// parameters' values are secrets.
func TestURLDescribe(t *testing.T) {
	desc, secrets := sink.Describe([]sink.URLKind{nats.URL}, "nats://h:4222?subject=orders.{event_type}&token=tok-123", sink.URLOptions{})
	if desc != "nats nats://h:4222 subject=orders.{event_type}" || !slices.Contains(secrets, "tok-123") {
		t.Errorf("Describe = %q, %q", desc, secrets)
	}
	// A user without a password is a token: a secret; with a password,
	// the password is (the user name is not).
	desc, secrets = sink.Describe([]sink.URLKind{nats.URL}, "nats://s3cr3t-token@h:4222?subject=x", sink.URLOptions{})
	if strings.Contains(desc, "s3cr3t") || !slices.Contains(secrets, "s3cr3t-token") {
		t.Errorf("Describe of a token URL = %q, %q: want the token a secret, not shown", desc, secrets)
	}
	_, secrets = sink.Describe([]sink.URLKind{nats.URL}, "nats://alice:pa55word@h:4222?subject=x", sink.URLOptions{})
	if !slices.Contains(secrets, "pa55word") || slices.Contains(secrets, "alice") {
		t.Errorf("Describe of a user and password = %q: want the password alone a secret", secrets)
	}
}

// The setup refuses a URL the sink would refuse, before connecting.
func TestURLSetupRefusesBadURLs(t *testing.T) {
	setup := nats.URL.Setup(flag.NewFlagSet("setup", flag.ContinueOnError))
	u, _ := url.Parse("nats://127.0.0.1:1?subjet=x")
	_, err := setup(t.Context(), u, sink.SetupOptions{DryRun: true})
	var refused *sink.OptionError
	if !errors.As(err, &refused) || refused.Option != "URL" {
		t.Fatalf("setup of a misspelt URL: %v, want an OptionError for the URL", err)
	}
}
