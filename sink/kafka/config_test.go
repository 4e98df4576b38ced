package kafka_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/sink/kafka"
)

func TestParseURL(t *testing.T) {
	cfg, err := kafka.ParseURL("kafka://alice:s3cret@b1:9092,b2:9093/?topic=orders.{event_type}&sasl=scram-sha-512&tls=true&allow_auto_topic_creation=true")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Brokers, " ") != "b1:9092 b2:9093" || cfg.Topic != "orders.{event_type}" || cfg.TLS == nil || !cfg.AllowAutoTopicCreation {
		t.Fatalf("parsed %+v", cfg)
	}
	if cfg.SASL != (kafka.SASL{Mechanism: kafka.SASLScramSHA512, User: "alice", Password: "s3cret"}) {
		t.Fatalf("sasl %+v", cfg.SASL)
	}

	plain, err := kafka.ParseURL("kafka://127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	if plain.Topic != "" || plain.TLS != nil || plain.SASL.Mechanism != "" || plain.AllowAutoTopicCreation {
		t.Fatalf("defaults: %+v (the topic is left to New's default, %s)", plain, kafka.TopicDefault)
	}
}

func TestParseURLCAFile(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kafka.ParseURL("kafka://b:9092?ca_file=" + notPEM); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("ca_file without a certificate: %v", err)
	}
	if _, err := kafka.ParseURL("kafka://b:9092?ca_file=" + filepath.Join(dir, "missing.pem")); err == nil {
		t.Fatal("a missing ca_file parsed")
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"kafka://", "names no broker"},
		{"nats://b:4222", "scheme"},
		{"kafka://b:9092/orders", "a path is not allowed"},
		{"kafka://b:9092?topick=x", `option "topick" is unknown`},
		{"kafka://b:9092?topic={eventtype}", "unknown placeholder"},
		{"kafka://b:9092?tls=maybe", "want true or false"},
		{"kafka://b:9092?sasl=gssapi", `sasl="gssapi" is unknown`},
		{"kafka://b:9092?sasl=plain", "needs a user and a password"},
		{"kafka://alice:pw@b:9092", "no sasl mechanism"},
		{"kafka://alice:pw@b:9092?sasl=oauth", "is unknown"},
		{"kafka://b:9092?max_message_bytes=10", "max_message_bytes"},
	} {
		_, err := kafka.ParseURL(c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseURL(%q) = %v, want an error with %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw@") {
			t.Errorf("ParseURL(%q): the error shows the password: %v", c.url, err)
		}
	}
}

func TestParseURLMaxMessageBytes(t *testing.T) {
	cfg, err := kafka.ParseURL("kafka://b:9092?max_message_bytes=4194304")
	if err != nil || cfg.MaxMessageBytes != 4<<20 {
		t.Fatalf("ParseURL: MaxMessageBytes %d (%v), want 4 MiB", cfg.MaxMessageBytes, err)
	}
}
