package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
)

// ParseClientCertificate returns the client certificate of Config
// (ClientCertificate) in certPEM, the certificate chain, leaf first, and
// keyPEM, its private key (PKCS #1, PKCS #8 or SEC 1), both PEM-encoded.
// It refuses a key that does not belong to the certificate. Errors never
// quote the key.
func ParseClientCertificate(certPEM, keyPEM []byte) (tls.Certificate, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// crypto/tls's messages name PEM block types and what is wrong,
		// never the bytes.
		return tls.Certificate{}, fmt.Errorf("webhook: client certificate: %w", err)
	}
	return cert, nil
}

// ParseCertPool returns a pool of the PEM-encoded CERTIFICATE blocks of
// bundle, such as the private CA of a partner, for Config.RootCAs. It
// refuses a bundle without certificates, a block of another type (such
// as a private key, never quoted), a certificate that does not parse, and
// bytes after the last block that are not white space. The pool holds only
// these certificates: to trust the system's roots as well, add them to
// x509.SystemCertPool() instead.
func ParseCertPool(bundle []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	rest, n := bundle, 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("webhook: CA bundle: block %d is a %q block, not a CERTIFICATE", n, block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("webhook: CA bundle: certificate %d: %w", n, err)
		}
		pool.AddCert(cert)
	}
	switch {
	case len(bytes.TrimSpace(rest)) > 0:
		return nil, errors.New("webhook: CA bundle: it holds bytes that are not a PEM block")
	case n == 0:
		return nil, errors.New("webhook: CA bundle: no CERTIFICATE block")
	}
	return pool, nil
}

// WithTLS returns a copy of c whose transport, a clone of c's
// *http.Transport (http.DefaultTransport's when it has none), presents
// cert and trusts roots, where set: what New does with
// Config.ClientCertificate and RootCAs, for a caller that wraps the
// transport itself afterwards (and so cannot give them to New).
func WithTLS(c *http.Client, cert *tls.Certificate, roots *x509.CertPool) (*http.Client, error) {
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	t, ok := base.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("webhook: Config.ClientCertificate and Config.RootCAs configure an *http.Transport, and Config.Client's Transport is a %T: set them on that transport yourself, or give a Client whose Transport is an *http.Transport or nil", base)
	}
	t = t.Clone()
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{}
	}
	if cert != nil {
		if t.TLSClientConfig.GetClientCertificate != nil {
			return nil, errors.New("webhook: Config.ClientCertificate: Config.Client's transport chooses its client certificates itself (TLSClientConfig.GetClientCertificate)")
		}
		t.TLSClientConfig.Certificates = []tls.Certificate{*cert}
	}
	if roots != nil {
		t.TLSClientConfig.RootCAs = roots
	}
	copied := *c
	copied.Transport = t
	return &copied, nil
}

// validateCertificate checks a Config.ClientCertificate.
func validateCertificate(cert *tls.Certificate) error {
	switch {
	case cert == nil:
		return nil
	case len(cert.Certificate) == 0:
		return errors.New("webhook: Config.ClientCertificate holds no certificate (see ParseClientCertificate)")
	case cert.PrivateKey == nil:
		return errors.New("webhook: Config.ClientCertificate holds no private key (see ParseClientCertificate)")
	}
	return nil
}
