// Package webhook is the sink that delivers each message as a signed HTTP
// POST to one endpoint.
//
// The body is the message payload, byte for byte, with the message's
// ContentType as Content-Type (application/json when it has none). Every
// attempt is signed afresh with the current time (package signature, the
// Standard Webhooks scheme by default, under the scheme's header names or
// those of Config.HeaderNames, such as Svix's); the id is always the
// message id. The event type, aggregate and attempt travel as
// Postbox-Event-Type, Postbox-Aggregate-Type, Postbox-Aggregate-Id and
// Postbox-Attempt headers, with the message's own headers (trace context)
// beside them; those never replace a header the sink sets itself, nor a
// static header of Config.Headers. Config.Auth authenticates the sink
// (Basic, Bearer, or an OAuth2 client credentials token, fetched and
// cached), and Config.ClientCertificate and RootCAs set up mutual TLS. An
// event that cannot be sent as it is fails at once (sink.Permanent) and is
// never sent: a header that is not valid HTTP (a name that is not a token,
// a value with a control character), one that TransportHeader refuses
// (credentials, Proxy-*, hop-by-hop and framing headers), a content type
// that is not a valid header value, or a payload over
// Config.MaxMessageBytes.
//
// The answer decides what the relay does next (see sink.Classify): 2xx is
// delivered; 410 Gone, 413 Content Too Large and 431 Request Header
// Fields Too Large fail the event at once (sink.Permanent); 429 and
// 5xx are sink.Retryable with the endpoint's Retry-After, capped, but for
// 502 Bad Gateway and 504 Gateway Timeout, a gateway's word that the
// endpoint behind it cannot be reached: sink.Unavailable (with the status);
// redirects are not followed, and 3xx and other 4xx are sink.Rejected. An
// endpoint that cannot be reached at all (a connection refused or timing
// out, a name that does not resolve, a certificate that cannot be
// verified) is sink.Unavailable: the relay pauses and probes rather than
// count attempts (a gateway's answers only once several come in a row).
// Other failures (no answer before Timeout, a dropped connection) are
// plain, retryable errors; the relay takes a run of timeouts for an outage. Errors carry a short,
// quoted start of the response body, but never a secret, nor the URL, whose
// path or query may hold a token.
package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook/guard"
)

// Sink publishes messages to one webhook endpoint. It is safe for
// concurrent use.
type Sink struct {
	cfg    Config // with defaults, Client without redirects
	target target
	// transport sends the requests when that is what cfg.Client would do
	// (see directTransport); nil: cfg.Client.Do sends them.
	transport http.RoundTripper
	signer    *signature.Signer
	profile   signature.Profile
	// sigNames are the canonical names of the signature's headers.
	sigNames [3]string
	// headers are Config.Headers under their canonical names.
	headers map[string]string
	// tokens fetches and caches the OAuth2 token; nil without
	// Config.Auth.OAuth2.
	tokens *oauthTokens
	slots  chan struct{} // one token per request in flight
	now    func() time.Time
	// dropIdle closes the idle connections of the sink's own client
	// (Config.Client nil), after a request timed out (see Publish); nil
	// with a client of the caller's, whose transport others may share.
	dropIdle func()
}

var _ sink.Sink = (*Sink)(nil)

// New returns a Sink for c, refusing an invalid Config with an error that
// names the field.
func New(c Config) (*Sink, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	ownClient := c.Client == nil
	c = c.withDefaults()
	if c.ClientCertificate != nil || c.RootCAs != nil {
		client, err := WithTLS(c.Client, c.ClientCertificate, c.RootCAs)
		if err != nil {
			return nil, err
		}
		c.Client = client
	}
	c.Client = withoutRedirects(c.Client)
	profile := c.profile()
	signer, err := signature.NewProfileSigner(profile, c.Secrets...)
	if err != nil { // validate checked the profile
		return nil, fmt.Errorf("webhook: Config.Secrets: %w", err)
	}
	t, err := newTarget(c.URL)
	if err != nil { // validate parsed it already
		return nil, errors.New("webhook: Config.URL must be an absolute http or https URL")
	}
	if auth := c.Auth.staticAuthorization(); auth != "" {
		t.authorization = auth
	}
	s := &Sink{
		cfg:       c,
		profile:   profile,
		target:    t,
		transport: directTransport(c.Client),
		signer:    signer,
		headers:   canonicalHeaders(c.Headers),
		slots:     make(chan struct{}, c.MaxConcurrency),
		now:       time.Now,
	}
	if ownClient {
		s.dropIdle = c.Client.CloseIdleConnections
	}
	if c.Auth.OAuth2 != nil {
		// The token requests go through the sink's client, bounded
		// by Timeout each: the token source keeps its context, not a
		// Publish's.
		tokenClient := *c.Client
		tokenClient.Timeout = c.Timeout
		s.tokens = newOAuthTokens(c.Auth.OAuth2, &tokenClient)
	}
	names := profile.HeaderNames()
	s.sigNames = [3]string{names.ID, names.Timestamp, names.Signature}
	return s, nil
}

// canonicalHeaders returns headers under their canonical names.
func canonicalHeaders(headers map[string]string) map[string]string {
	if len(headers) == 0 {
		return nil
	}
	canonical := make(map[string]string, len(headers))
	for name, value := range headers {
		canonical[http.CanonicalHeaderKey(name)] = value
	}
	return canonical
}

// Destination names the endpoint for traces: System "webhook", Name its
// scheme and host (never its path or query, which may hold a token).
func (s *Sink) Destination() sink.Destination {
	return sink.Destination{System: "webhook", Name: s.where()}
}

// where is the endpoint's scheme and host.
func (s *Sink) where() string { return s.target.url.Scheme + "://" + s.target.url.Host }

// String names the endpoint for logs: its scheme and host (the path and
// query may hold a token, and are left out), the signature profile, the
// number of secrets (never their value), the concurrency and the timeout,
// then the kind of Auth, the number of static headers and whether a client
// certificate or root CAs are set (never a credential nor a header's
// value).
func (s *Sink) String() string {
	where := s.where()
	if u := s.target.url; u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		where += "/… (path hidden)"
	}
	secrets := "1 secret"
	if n := len(s.cfg.Secrets); n != 1 {
		secrets = fmt.Sprintf("%d secrets", n)
	}
	desc := fmt.Sprintf("webhook %s, %s signatures with %s, at most %d requests at once, timeout %s",
		where, s.profile, secrets, s.cfg.MaxConcurrency, s.cfg.Timeout)
	if s.cfg.Auth.count() > 0 {
		desc += ", " + s.cfg.Auth.String() + " auth"
	}
	if n := len(s.headers); n == 1 {
		desc += ", 1 static header"
	} else if n > 1 {
		desc += fmt.Sprintf(", %d static headers", n)
	}
	if s.cfg.ClientCertificate != nil {
		desc += ", a TLS client certificate"
	}
	if s.cfg.RootCAs != nil {
		desc += ", its own root CAs"
	}
	return desc
}

// Publish POSTs m and returns nil once the endpoint answered 2xx. It waits
// for a free slot while MaxConcurrency requests are in flight, then, with
// OAuth2, for a token if none is cached (a token request is bounded by
// Timeout of its own), then gives the request Timeout.
func (s *Sink) Publish(ctx context.Context, m *sink.Message) error {
	caller := ctx
	select {
	case s.slots <- struct{}{}: // a free slot: no select over ctx
	default:
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("webhook: waiting for a free request slot: %w", context.Cause(ctx))
		}
	}
	defer func() { <-s.slots }()
	authorization, token, err := s.authorization()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := s.newRequest(ctx, m, authorization)
	if err != nil {
		return err
	}
	resp, err := s.send(req)
	if err != nil {
		if s.dropIdle != nil && caller.Err() == nil && timedOut(err) {
			// No answer in time: the connections kept idle to the
			// endpoint may be dead as well (a link gone half-open while
			// idle would time the next requests out one by one, which a
			// relay takes for an outage); the next requests dial afresh.
			s.dropIdle()
		}
		err = fmt.Errorf("webhook: post: %w", err)
		if errors.Is(err, guard.ErrBlocked) {
			// The endpoint's address is not allowed: no retry can
			// help until someone allows it.
			return &sink.Error{Kind: sink.Permanent, Err: err}
		}
		if caller.Err() == nil && unreachable(err) {
			return &sink.Error{Kind: sink.Unavailable, Err: err}
		}
		return err
	}
	err = s.readAnswer(resp)
	if token != nil && resp.StatusCode == http.StatusUnauthorized {
		s.tokens.invalidate(token)
	}
	return err
}

// authorization returns the Authorization of the next request: the OAuth2
// token, fetched if none is cached, with its cache; the static credentials
// of Config.Auth or the URL; or "".
func (s *Sink) authorization() (string, *tokenSource, error) {
	if s.tokens == nil {
		return s.target.authorization, nil, nil
	}
	return s.tokens.authorization()
}

// timedOut reports whether err, a request's failure, is a timeout.
func timedOut(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()
}

// unreachable reports whether err, a request's failure, says the endpoint
// cannot be reached at all, whatever the message: no connection could be
// made (refused, no route, a dial timeout), its name does not resolve, or
// its certificate cannot be verified. Failures after a connection was made
// (a timeout waiting for the answer, a dropped connection) may concern one
// message, and are not.
func unreachable(err error) bool {
	var (
		opErr   *net.OpError
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
	)
	return errors.As(err, &opErr) && (opErr.Op == "dial" || opErr.Op == "proxyconnect") ||
		errors.As(err, &dnsErr) || errors.As(err, &certErr)
}
