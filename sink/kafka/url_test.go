package kafka_test

import (
	"errors"
	"flag"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/kafka"
)

// openURL opens raw through kafka.URL, closing the sink when the test
// ends.
func openURL(t *testing.T, raw string, o sink.URLOptions) (sink.Sink, error) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	s, err := kafka.URL.Open(t.Context(), u, o)
	if err == nil {
		t.Cleanup(func() { _ = s.(io.Closer).Close() })
	}
	return s, err
}

func TestURLKind(t *testing.T) {
	if k, _, err := sink.Lookup([]sink.URLKind{kafka.URL}, "kafka://h:9092?topic=t"); err != nil || k.Name != "kafka" {
		t.Errorf("Lookup = %q, %v, want kafka", k.Name, err)
	}
	if kafka.URL.Concurrency != 1024 || kafka.URL.PublishBatch != 256 {
		t.Errorf("Concurrency %d, PublishBatch %d, want 1024 and 256", kafka.URL.Concurrency, kafka.URL.PublishBatch)
	}
}

// Open's sink publishes batches (the relay's default --publish-batch for
// kafka:// needs it) and closes.
func TestURLOpenIsABatchSink(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t, kfake.SeedTopics(1, "t"))
	s, err := openURL(t, kafkatest.URL(brokers, "topic=t"), sink.URLOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	bs, ok := s.(sink.BatchSink)
	if !ok {
		t.Fatalf("%T is not a sink.BatchSink", s)
	}
	errs := make([]error, 1)
	bs.PublishBatch(t.Context(), []*sink.Message{message("order", "1", []byte(`{}`))}, errs)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
}

// A URL without credentials takes the options' for its SASL mechanism;
// the URL's own win. Open's sink closes.
func TestURLOpenTakesCredentialsFromTheOptions(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t, kfake.EnableSASL(), kfake.SeedTopics(1, "t"), kfake.Superuser("PLAIN", "relay", "s3cret"))
	bare := kafkatest.URL(brokers, "topic=t&sasl=plain")
	own := strings.Replace(bare, "kafka://", "kafka://relay:s3cret@", 1)
	for _, c := range []struct {
		name   string
		url    string
		o      sink.URLOptions
		opened bool
	}{
		{"the options'", bare, sink.URLOptions{User: "relay", Password: "s3cret"}, true},
		{"a wrong password", bare, sink.URLOptions{User: "relay", Password: "wrong-s3cret"}, false},
		{"the URL's first", own, sink.URLOptions{User: "relay", Password: "wrong-s3cret"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.Timeout = 10 * time.Second
			s, err := openURL(t, c.url, c.o)
			if !c.opened {
				var refused *sink.OptionError
				if err == nil || errors.As(err, &refused) || strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("Open: %v, want the brokers' refusal, not an OptionError, without the password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if err := s.Publish(t.Context(), message("order", "1", []byte(`{}`))); err != nil {
				t.Errorf("publish: %v", err)
			}
			if !strings.Contains(s.String(), "sasl plain") || strings.Contains(s.String(), "s3cret") {
				t.Errorf("String() = %q, want sasl plain without the password", s.String())
			}
		})
	}
}

// A URL that ParseURL refuses is an OptionError for the URL: sasl without
// credentials in the URL nor the options, a misspelt option. A missing
// topic is the destination's error.
func TestURLOpenRefuses(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	var refused *sink.OptionError
	for _, raw := range []string{
		kafkatest.URL(brokers, "topic=t&sasl=plain"),
		strings.Replace(kafkatest.URL(brokers, "topc=t"), "kafka://", "kafka://relay:s3cret@", 1),
	} {
		_, err := openURL(t, raw, sink.URLOptions{})
		if !errors.As(err, &refused) || refused.Option != "URL" || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v, want an OptionError for the URL, without the password", raw, err)
		}
	}
	_, err := openURL(t, kafkatest.URL(brokers, "topic=missing"), sink.URLOptions{Timeout: 10 * time.Second})
	if err == nil || errors.As(err, &refused) || !strings.Contains(err.Error(), `topic "missing" does not exist`) {
		t.Errorf("a missing topic: %v, want the sink's error, not an OptionError", err)
	}
}

// A Kafka sink is described by its brokers and topic; the other
// parameters' values are secrets.
func TestURLDescribe(t *testing.T) {
	desc, secrets := sink.Describe([]sink.URLKind{kafka.URL}, "kafka://b1:9092,b2:9092?topic=orders&client_id=abcd", sink.URLOptions{})
	if desc != "kafka kafka://b1:9092,b2:9092 topic=orders" || !slices.Contains(secrets, "abcd") {
		t.Errorf("Describe = %q, %q", desc, secrets)
	}
}

// The setup refuses a URL the sink would refuse, and partitions or
// replicas that are not positive, before connecting.
func TestURLSetupRefuses(t *testing.T) {
	for _, c := range []struct {
		raw  string
		args []string
	}{
		{"kafka://127.0.0.1:1?topik=x", nil},
		{"kafka://127.0.0.1:1?topic=x", []string{"--partitions", "0"}},
		{"kafka://127.0.0.1:1?topic=x", []string{"--replication-factor", "40000"}},
	} {
		fs := flag.NewFlagSet("setup", flag.ContinueOnError)
		setup := kafka.URL.Setup(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(c.raw)
		_, err := setup(t.Context(), u, sink.SetupOptions{DryRun: true})
		if !errors.As(err, new(*sink.OptionError)) {
			t.Errorf("setup of %s %v: %v, want an OptionError", c.raw, c.args, err)
		}
	}
}
