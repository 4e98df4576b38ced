package webhook_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
)

// pki is a private CA with a server certificate for 127.0.0.1 and a client
// certificate, all PEM-encoded, made for one test.
type pki struct {
	caPEM                  []byte
	serverCert             tls.Certificate
	clientCertPEM, keyPEM  []byte
	otherCertPEM, otherKey []byte // a client certificate of another CA
	clientPool             *x509.CertPool
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	caKey, caCert, caPEM := newCA(t, "partner CA")
	serverKey := newKey(t)
	serverDER := sign(t, caCert, caKey, &serverKey.PublicKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "partner endpoint"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	clientKey := newKey(t)
	clientDER := sign(t, caCert, caKey, &clientKey.PublicKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "postbox-relay"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	otherCAKey, otherCA, _ := newCA(t, "someone else's CA")
	otherKey := newKey(t)
	otherDER := sign(t, otherCA, otherCAKey, &otherKey.PublicKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "intruder"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	p := &pki{
		caPEM:         caPEM,
		serverCert:    tls.Certificate{Certificate: [][]byte{serverDER}, PrivateKey: serverKey},
		clientCertPEM: pemBlock("CERTIFICATE", clientDER),
		keyPEM:        keyPEM(t, clientKey),
		otherCertPEM:  pemBlock("CERTIFICATE", otherDER),
		otherKey:      keyPEM(t, otherKey),
		clientPool:    x509.NewCertPool(),
	}
	p.clientPool.AddCert(caCert)
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func newCA(t *testing.T, name string) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key := newKey(t)
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, pemBlock("CERTIFICATE", der)
}

func sign(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, pub *ecdsa.PublicKey, template *x509.Certificate) []byte {
	t.Helper()
	template.SerialNumber = big.NewInt(time.Now().UnixNano())
	template.NotBefore, template.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	template.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, template, ca, pub, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func keyPEM(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("PRIVATE KEY", der)
}

// testClientCertificate is a client certificate of a fresh PKI.
func testClientCertificate(t *testing.T) *tls.Certificate {
	p := newPKI(t)
	cert, err := webhook.ParseClientCertificate(p.clientCertPEM, p.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &cert
}

// newMTLSEndpoint is an endpoint with p's server certificate that requires
// a client certificate of p's CA, and records the CommonName of each.
func newMTLSEndpoint(t *testing.T, p *pki) (*httptest.Server, chan string) {
	t.Helper()
	names := make(chan string, 16)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		names <- r.TLS.PeerCertificates[0].Subject.CommonName
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{p.serverCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p.clientPool,
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, names
}

// An endpoint that requires a client certificate of its CA accepts the
// sink's, whatever client the sink was given, and verifies the endpoint
// against the partner's private CA (RootCAs); without the certificate, or
// with another CA's, the handshake fails and no request is handled.
func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	srv, names := newMTLSEndpoint(t, p)
	cert, err := webhook.ParseClientCertificate(p.clientCertPEM, p.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := webhook.ParseCertPool(p.caPEM)
	if err != nil {
		t.Fatal(err)
	}
	userTransport := &http.Transport{ResponseHeaderTimeout: 5 * time.Second}
	for name, client := range map[string]*http.Client{
		"default client":             nil,
		"client without a transport": {},
		"client with a transport":    {Transport: userTransport},
		"client with a timeout":      {Transport: userTransport, Timeout: 5 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			s := newSink(t, webhook.Config{URL: srv.URL + "/hooks", ClientCertificate: &cert, RootCAs: roots, Client: client})
			if err := s.Publish(t.Context(), newMessage()); err != nil {
				t.Fatal(err)
			}
			if cn := <-names; cn != "postbox-relay" {
				t.Errorf("the endpoint saw client certificate %q", cn)
			}
			if desc := s.String(); !strings.Contains(desc, "a TLS client certificate, its own root CAs") {
				t.Errorf("String() = %q", desc)
			}
		})
	}
	for _, tr := range []*http.Transport{userTransport, http.DefaultTransport.(*http.Transport)} {
		if c := tr.TLSClientConfig; c != nil && (c.Certificates != nil || c.RootCAs != nil) {
			t.Error("the client's own transport was given the certificate or the roots: the sink must clone it")
		}
	}

	other, err := webhook.ParseClientCertificate(p.otherCertPEM, p.otherKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]webhook.Config{
		"no client certificate":       {URL: srv.URL, RootCAs: roots},
		"another CA's certificate":    {URL: srv.URL, RootCAs: roots, ClientCertificate: &other},
		"endpoint's CA not trusted":   {URL: srv.URL, ClientCertificate: &cert},
		"endpoint's CA not trusted 2": {URL: srv.URL, ClientCertificate: &cert, Client: &http.Client{Transport: userTransport}},
	} {
		t.Run(name, func(t *testing.T) {
			err := newSink(t, c).Publish(t.Context(), newMessage())
			if err == nil {
				t.Fatal("the request went through")
			}
			if len(names) != 0 {
				t.Fatalf("the endpoint handled a request from %q", <-names)
			}
		})
	}
	err = newSink(t, webhook.Config{URL: srv.URL, ClientCertificate: &cert}).Publish(t.Context(), newMessage())
	var certErr *tls.CertificateVerificationError
	if kind, _, _ := sink.Classify(err); !errors.As(err, &certErr) || kind != sink.Unavailable {
		t.Errorf("an endpoint of an untrusted CA: %v (%v), want an unavailable certificate verification error", err, kind)
	}
}

// Parse errors never quote key material.
func TestParseClientCertificateRefusesWithoutQuotingTheKey(t *testing.T) {
	p := newPKI(t)
	corrupt := bytes.Replace(p.keyPEM, []byte("\n"), []byte("\nAAAA"), 2)
	truncated := p.keyPEM[:len(p.keyPEM)/2]
	for name, c := range map[string]struct{ cert, key []byte }{
		"key of another certificate": {p.clientCertPEM, p.otherKey},
		"corrupt key":                {p.clientCertPEM, corrupt},
		"truncated key":              {p.clientCertPEM, truncated},
		"swapped":                    {p.keyPEM, p.clientCertPEM},
		"key twice":                  {p.keyPEM, p.keyPEM},
		"no key":                     {p.clientCertPEM, nil},
		"no certificate":             {nil, p.keyPEM},
		"not PEM":                    {[]byte("certificate"), []byte("key")},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := webhook.ParseClientCertificate(c.cert, c.key)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.HasPrefix(err.Error(), "webhook: client certificate: ") {
				t.Errorf("error %q", err)
			}
			assertNoKeyMaterial(t, err, p.keyPEM, p.otherKey, corrupt)
		})
	}
}

func TestParseCertPool(t *testing.T) {
	p := newPKI(t)
	pool, err := webhook.ParseCertPool(append(append([]byte("\n"), p.caPEM...), p.otherCertPEM...))
	if err != nil || pool == nil {
		t.Fatalf("a bundle of two certificates: %v", err)
	}
	for name, bundle := range map[string][]byte{
		"empty":                 nil,
		"white space":           []byte(" \n\t"),
		"not PEM":               []byte("-----BEGIN nothing"),
		"a key among the certs": append(append([]byte{}, p.caPEM...), p.keyPEM...),
		"trailing garbage":      append(append([]byte{}, p.caPEM...), "trailing S3CRET"...),
		"corrupt certificate":   pemBlock("CERTIFICATE", []byte("not DER")),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := webhook.ParseCertPool(bundle)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "S3CRET") {
				t.Errorf("error %q quotes the bundle", err)
			}
			assertNoKeyMaterial(t, err, p.keyPEM)
		})
	}
}

// assertNoKeyMaterial fails if err quotes 8 bytes of a line of the keys'
// base64 bodies.
func assertNoKeyMaterial(t *testing.T, err error, keys ...[]byte) {
	t.Helper()
	for _, key := range keys {
		for _, line := range strings.Split(string(key), "\n") {
			if strings.HasPrefix(line, "-----") || len(line) < 8 {
				continue
			}
			for i := 0; i+8 <= len(line); i++ {
				if strings.Contains(err.Error(), line[i:i+8]) {
					t.Fatalf("error %q quotes key material %q", err, line[i:i+8])
				}
			}
		}
	}
}
