package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/postbox-go/postbox/signature"
)

// Defaults of the Config fields left zero.
const (
	TimeoutDefault         = 10 * time.Second
	MaxConcurrencyDefault  = 64
	MaxResponseBodyDefault = 64 << 10
	RetryAfterMaxDefault   = 10 * time.Minute
	UserAgentDefault       = "postbox/1"
	// MaxMessageBytesDefault is the default largest payload: above the
	// 10–20 MB events an outbox may hold, below what a relay should hold
	// in memory per event.
	MaxMessageBytesDefault = 32 << 20
)

// Config configures a Sink. Only URL and Secrets are required; a zero field
// takes its default and a negative one is refused.
type Config struct {
	// URL is the endpoint every message is POSTed to: an absolute http or
	// https URL. Required.
	URL string
	// Secrets sign every request, each one (several during a rotation). In
	// the Standard scheme a secret is "whsec_<base64 key>" or raw bytes
	// (an HMAC v1 signature, each at least signature.SecretMinLen bytes),
	// or an ed25519 secret key "whsk_<base64>" (an asymmetric v1a
	// signature, which receivers verify with its "whpk_" public key); in
	// XSignature raw bytes. Required.
	Secrets []string
	// Scheme is the signature scheme. Default signature.Standard (the zero
	// value).
	Scheme signature.Scheme
	// HeaderNames rename the signature's id, timestamp and signature
	// headers, for receivers that expect another provider's (such as
	// signature.SvixNames): all three or none (the scheme's own). With
	// Scheme they make a signature.Profile (signature.ParseProfile reads
	// "svix", "standard;prefix=acme"...: set Scheme and HeaderNames to its
	// Scheme and Names), which New checks as Profile.Validate does.
	HeaderNames signature.HeaderNames
	// Headers are sent with every request, such as an API key a partner's
	// gateway asks for; values may be secret: they never show in a log
	// line or an error. They replace an event's own headers of the same
	// name. New refuses a name that is not an HTTP token, given twice (in
	// another case), or that the sink sets itself (Content-Type,
	// User-Agent, Postbox-*, the signature's); one that TransportHeader
	// refuses (Authorization goes through Auth); and a value with a
	// control character other than tab.
	Headers map[string]string
	// Auth authenticates the sink to the endpoint: Basic, Bearer or OAuth2
	// client credentials (see Auth). Default none. It cannot be combined
	// with credentials in the URL's user information.
	Auth Auth
	// ClientCertificate is presented to endpoints that ask for one
	// (mutual TLS); ParseClientCertificate reads it from PEM. It and
	// RootCAs are set on a clone of Client's *http.Transport
	// (http.DefaultTransport's when Client has none, the default client's
	// when Client is nil): New refuses a Client whose Transport is
	// another RoundTripper. They apply to OAuth2 token requests too.
	ClientCertificate *tls.Certificate
	// RootCAs, when set, are the certificate authorities that the
	// endpoint's (and the token endpoint's) certificate is verified
	// against, in place of the system's: a partner's private CA
	// (ParseCertPool reads a PEM bundle).
	RootCAs *x509.CertPool
	// Timeout bounds one whole request: connecting, sending, and reading
	// the response. Default TimeoutDefault (10s).
	Timeout time.Duration
	// MaxConcurrency bounds the requests in flight to the endpoint at once;
	// further publishes wait for a free slot. Default
	// MaxConcurrencyDefault (64).
	MaxConcurrency int
	// MaxResponseBody is how many bytes of a response are read; the rest
	// is not read, and the connection is then closed rather than reused.
	// Default MaxResponseBodyDefault (64 KiB).
	MaxResponseBody int64
	// RetryAfterMax caps the Retry-After an endpoint asks for. Default
	// RetryAfterMaxDefault (10 minutes).
	RetryAfterMax time.Duration
	// Client sends the requests; the Sink uses a copy that never follows
	// redirects, whatever the client's own policy. Unless the client has
	// a cookie Jar or a Timeout, requests go straight to its Transport
	// (http.DefaultTransport when nil), as its Do would send them, Basic
	// credentials of the URL's user information included. Default: a
	// client with its own transport, keeping up to MaxConcurrency idle
	// connections alive, with dial, TLS handshake and response header
	// timeouts of Timeout. Its Transport must not modify the requests
	// (net/http's rule for a RoundTripper): they share one parsed URL.
	Client *http.Client
	// MaxMessageBytes is the largest payload POSTed: a larger event fails
	// at once, permanently, and is never sent. HTTP sets no limit; set it
	// to the endpoint's (a reverse proxy's body limit, such as nginx's
	// client_max_body_size) to fail such events without a request. An
	// endpoint's 413 or 431 answer fails its event permanently anyway.
	// Default MaxMessageBytesDefault (32 MiB).
	MaxMessageBytes int64
	// UserAgent is the User-Agent header; New refuses control characters
	// other than tab. Default UserAgentDefault ("postbox/1").
	UserAgent string
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = TimeoutDefault
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = MaxConcurrencyDefault
	}
	if c.MaxResponseBody == 0 {
		c.MaxResponseBody = MaxResponseBodyDefault
	}
	if c.RetryAfterMax == 0 {
		c.RetryAfterMax = RetryAfterMaxDefault
	}
	if c.UserAgent == "" {
		c.UserAgent = UserAgentDefault
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = MaxMessageBytesDefault
	}
	if c.Client == nil {
		c.Client = NewClient(c.Timeout, c.MaxConcurrency)
	}
	return c
}

// validate checks c before withDefaults; errors name the field and never
// carry the URL, a header's value or a secret.
func (c Config) validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return errors.New("webhook: Config.URL is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("webhook: Config.URL must be an absolute http or https URL")
	case len(c.Secrets) == 0:
		return errors.New("webhook: Config.Secrets is required")
	case c.Timeout < 0:
		return fmt.Errorf("webhook: Config.Timeout %v is negative", c.Timeout)
	case c.MaxConcurrency < 0:
		return fmt.Errorf("webhook: Config.MaxConcurrency %d is negative", c.MaxConcurrency)
	case c.MaxResponseBody < 0:
		return fmt.Errorf("webhook: Config.MaxResponseBody %d is negative", c.MaxResponseBody)
	case c.MaxMessageBytes < 0:
		return fmt.Errorf("webhook: Config.MaxMessageBytes %d is negative", c.MaxMessageBytes)
	case c.RetryAfterMax < 0:
		return fmt.Errorf("webhook: Config.RetryAfterMax %v is negative", c.RetryAfterMax)
	case !validHeaderValue(c.UserAgent):
		return errors.New("webhook: Config.UserAgent holds a control character")
	}
	if err := c.profile().Validate(); err != nil {
		if errors.Is(err, signature.ErrUnknownScheme) {
			return fmt.Errorf("webhook: Config.Scheme: %w", err)
		}
		return fmt.Errorf("webhook: Config.HeaderNames: %w", err)
	}
	if err := c.validateHeaders(); err != nil {
		return err
	}
	if err := c.Auth.validate(u.User != nil); err != nil {
		return err
	}
	return validateCertificate(c.ClientCertificate)
}

// profile is the signature profile of c: its Scheme and HeaderNames.
func (c Config) profile() signature.Profile {
	return signature.Profile{Scheme: c.Scheme, Names: c.HeaderNames}
}

// validateHeaders checks c.Headers; errors name the header, never its
// value.
func (c Config) validateHeaders() error {
	sigNames := c.profile().HeaderNames()
	own := [3]string{sigNames.ID, sigNames.Timestamp, sigNames.Signature}
	seen := make(map[string]bool, len(c.Headers))
	for name, value := range c.Headers {
		canonical := http.CanonicalHeaderKey(name)
		switch {
		case !validHeaderName(name):
			return fmt.Errorf("webhook: Config.Headers: %q is not a valid header name", name)
		case seen[canonical]:
			return fmt.Errorf("webhook: Config.Headers: %s is given twice, in different cases", canonical)
		case canonical == headerAuthorization:
			return errors.New("webhook: Config.Headers cannot set Authorization: use Config.Auth")
		case ownHeader(canonical, &own) || strings.HasPrefix(canonical, "Postbox-"):
			return fmt.Errorf("webhook: Config.Headers cannot set %s, which the sink sets itself", canonical)
		case TransportHeader(canonical):
			return fmt.Errorf("webhook: Config.Headers cannot set %s: credentials, proxy, hop-by-hop and framing headers are the transport's", canonical)
		case !validHeaderValue(value):
			return fmt.Errorf("webhook: Config.Headers: the value of %s holds a control character", canonical)
		}
		seen[canonical] = true
	}
	return nil
}
