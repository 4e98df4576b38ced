package kafka_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/sink/kafka"
)

// parsed parses a sink URL of the test's brokers.
func parsed(t *testing.T, brokers []string, userinfo, query string) kafka.Config {
	t.Helper()
	url := kafkatest.URL(brokers, query)
	if userinfo != "" {
		url = strings.Replace(url, "kafka://", "kafka://"+userinfo+"@", 1)
	}
	cfg, err := kafka.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Each SASL mechanism authenticates and publishes; a wrong password stops
// New.
func TestSASL(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t, kfake.EnableSASL(), kfake.SeedTopics(1, "t"),
		kfake.Superuser("PLAIN", "plain-user", "plain-pass"),
		kfake.Superuser("SCRAM-SHA-256", "scram256-user", "scram256-pass"),
		kfake.Superuser("SCRAM-SHA-512", "scram512-user", "scram512-pass"))
	for _, c := range []struct{ mechanism, user, pass string }{
		{kafka.SASLPlain, "plain-user", "plain-pass"},
		{kafka.SASLScramSHA256, "scram256-user", "scram256-pass"},
		{kafka.SASLScramSHA512, "scram512-user", "scram512-pass"},
	} {
		s := newSink(t, parsed(t, brokers, c.user+":"+c.pass, "topic=t&sasl="+c.mechanism))
		if err := s.Publish(t.Context(), message("order", "1", []byte(`{}`))); err != nil {
			t.Errorf("%s: publish: %v", c.mechanism, err)
		}
		if strings.Contains(s.String(), c.pass) || !strings.Contains(s.String(), "sasl "+c.mechanism) {
			t.Errorf("%s: String() = %q", c.mechanism, s.String())
		}
		if _, err := kafka.New(t.Context(), parsed(t, brokers, c.user+":wrong", "topic=t&sasl="+c.mechanism)); err == nil {
			t.Errorf("%s: New with a wrong password succeeded", c.mechanism)
		}
	}
}

// ca_file verifies the brokers' certificate; tls=true alone verifies it
// with the system's roots, which do not know this one.
func TestTLS(t *testing.T) {
	cert, caFile := selfSigned(t)
	_, brokers := kafkatest.NewCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}}), kfake.SeedTopics(1, "t"))
	s := newSink(t, parsed(t, brokers, "", "topic=t&ca_file="+caFile))
	if err := s.Publish(t.Context(), message("order", "1", []byte(`{}`))); err != nil {
		t.Fatalf("publish over TLS: %v", err)
	}
	if !strings.Contains(s.String(), "tls") {
		t.Errorf("String() = %q, want tls named", s.String())
	}
	if _, err := kafka.New(t.Context(), parsed(t, brokers, "", "topic=t&tls=true")); err == nil {
		t.Fatal("New trusted a certificate no root signed")
	}
}

// selfSigned returns a certificate for 127.0.0.1 and the path of its PEM.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, path
}
