package manifest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/endpoint/manifest"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/nats"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// bothStores runs test on a migrated PostgreSQL schema and on a migrated
// SQLite file.
func bothStores(t *testing.T, test func(t *testing.T, s store.Endpoints)) {
	t.Run("postgres", func(t *testing.T) { test(t, pgtest.Store(t).Driver()) })
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "postbox.db"), sqlite.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		test(t, s.Driver())
	})
}

// newAdmin is an Admin of s with a new keyring, for webhooks and NATS
// endpoints.
func newAdmin(t *testing.T, s store.Endpoints) *admin.Admin {
	t.Helper()
	k, err := keyring.Parse(keyring.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	a, err := admin.New(admin.Config{Store: s, Keyring: k, Kinds: []sink.URLKind{nats.URL}, PrivateEndpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// env is a process environment of the test's own, for Resolve.
type env map[string]string

func (e env) lookup(name string) (string, bool) {
	v, ok := e[name]
	return v, ok
}

// planOf parses text, resolves it with env (relative files in dir) and
// plans it against a.
func planOf(t *testing.T, a *admin.Admin, text string, e env, dir string, o manifest.Options) *manifest.Plan {
	t.Helper()
	m := parse(t, text)
	m.Dir = dir
	if err := m.Resolve(e.lookup); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	p, err := m.Plan(context.Background(), a, o)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return p
}

// applyOK applies p, failing the test on an error.
func applyOK(t *testing.T, a *admin.Admin, p *manifest.Plan) manifest.Result {
	t.Helper()
	r, err := manifest.Apply(context.Background(), a, p)
	if err != nil {
		t.Fatalf("Apply: %v\nplan:\n%s", err, p)
	}
	return r
}

// counts are p's counts, as "create/update/remove/unchanged".
func counts(p *manifest.Plan) [4]int {
	c, u, r, n := p.Counts()
	return [4]int{c, u, r, n}
}

// stored returns the endpoint named name and its opened credentials.
func stored(t *testing.T, a *admin.Admin, name string) (store.Endpoint, endpoint.Credentials) {
	t.Helper()
	e, err := a.Find(context.Background(), name)
	if err != nil {
		t.Fatalf("Find %s: %v", name, err)
	}
	c, err := a.Open(e)
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}

// noSecrets fails t when text holds one of secrets.
func noSecrets(t *testing.T, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("%s holds a secret (%.12s...):\n%s", what, s, text)
		}
	}
}

// writeFile writes content to name in dir, mode 0600, and returns its
// path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// clientPEM is a self-signed client certificate and its key, PEM: what a
// file's tls.cert, tls.key and tls.ca may name.
func clientPEM(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "postbox-relay"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}))
}
