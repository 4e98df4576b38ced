package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

// credentialFlags are the flags of an endpoint's sealed credentials beside
// its signing secret: static headers, the Authorization of a webhook's
// requests, and its client certificate. endpoints add sets them; endpoints
// update replaces what is given, and has the flags that remove them
// (--clear-headers, --auth none, --no-tls).
type credentialFlags struct {
	headers                        secretList
	basic, bearer, oauth2Secret    secretValue
	oauth2TokenURL, oauth2ClientID string
	oauth2Scopes, oauth2Params     stringList
	tlsCert, tlsKey, tlsCA         string
	clearHeaders, noTLS            bool
	auth                           string
}

// authFlags are the flags that set a webhook's Authorization: one scheme
// at most.
var authFlags = []string{"basic", "bearer", "oauth2-token-url", "oauth2-client-id", "oauth2-client-secret", "oauth2-scope", "oauth2-param"}

// tlsFlags are the flags of a webhook's TLS: its client certificate and
// the CA its server's certificate must chain to.
var tlsFlags = []string{"tls-cert", "tls-key", "tls-ca"}

func (c *credentialFlags) register(fs *flag.FlagSet, update bool) {
	onUpdate := func(add, upd string) string {
		if update {
			return upd
		}
		return add
	}
	fs.Var(&c.headers, "header", "a static header 'Name: value' on every request to a webhook, or every message to a broker (repeatable); the value is a secret, sealed, "+
		secretFormsHelp+onUpdate("", "; replaces every header the endpoint has"))
	fs.Var(&c.basic, "basic", "HTTP Basic authentication of a webhook's requests, USER:PASSWORD, "+secretFormsHelp)
	fs.Var(&c.bearer, "bearer", "a bearer token on a webhook's requests (Authorization: Bearer TOKEN), "+secretFormsHelp)
	fs.StringVar(&c.oauth2TokenURL, "oauth2-token-url", "", "OAuth 2.0 client credentials for a webhook's requests: the token endpoint, https://... (with --oauth2-client-id and --oauth2-client-secret); the relay fetches a token and renews it before it expires")
	fs.StringVar(&c.oauth2ClientID, "oauth2-client-id", "", "the client id of --oauth2-token-url")
	fs.Var(&c.oauth2Secret, "oauth2-client-secret", "the client secret of --oauth2-token-url, "+secretFormsHelp)
	fs.Var(&c.oauth2Scopes, "oauth2-scope", "a scope the token is asked for (repeatable)")
	fs.Var(&c.oauth2Params, "oauth2-param", "a further parameter of the token request, NAME=VALUE, such as audience=https://api.partner.example (repeatable)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "a PEM file: the client certificate (chain, leaf first) a webhook presents to its https:// endpoint (mutual TLS), with --tls-key")
	fs.StringVar(&c.tlsKey, "tls-key", "", "a PEM file: the private key of --tls-cert (sealed with the endpoint's secrets)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "a PEM file of CA certificates: the webhook's https:// endpoint's certificate must chain to one of them (a partner's private CA), in place of the system's")
	names := append(append([]string{"header"}, authFlags...), tlsFlags...)
	if update {
		fs.BoolVar(&c.clearHeaders, "clear-headers", false, "remove the endpoint's static headers")
		fs.StringVar(&c.auth, "auth", "", "none: remove the endpoint's authentication (--basic, --bearer, --oauth2-*, and a broker URL's user and password)")
		fs.BoolVar(&c.noTLS, "no-tls", false, "remove the endpoint's client certificate and CA (--tls-*)")
		names = append(names, "clear-headers", "auth", "no-tls")
	}
	setCommandLineOnly(fs, !update, names...)
}

// credentialChange is what the credential flags given ask for: each part
// replaces the endpoint's when its set flag is true.
type credentialChange struct {
	setHeaders bool
	headers    map[string]string

	setAuth bool
	// authNone is --auth none: a broker URL's user and password go too.
	authNone bool
	basic    *endpoint.BasicAuth
	bearer   string
	oauth2   *endpoint.OAuth2

	setTLS bool
	tls    *endpoint.ClientTLS

	// given are the flags given, for the command's report.
	given []string
}

// any reports whether the change changes anything.
func (ch credentialChange) any() bool { return ch.setHeaders || ch.setAuth || ch.setTLS }

// apply makes the change to c.
func (ch credentialChange) apply(c *endpoint.Credentials) {
	if ch.setHeaders {
		c.Headers = ch.headers
	}
	if ch.setAuth {
		c.Basic, c.Bearer, c.OAuth2 = ch.basic, ch.bearer, ch.oauth2
	}
	if ch.authNone {
		c.URLUser, c.URLPassword = "", ""
	}
	if ch.setTLS {
		c.TLS = ch.tls
	}
}

// read reads the credential flags given in fs into a change, reading their
// secrets with r. Its errors name the flag, never a secret.
func (c *credentialFlags) read(fs *flag.FlagSet, r *secretReader) (credentialChange, error) {
	var ch credentialChange
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(authFlags, f.Name) || slices.Contains(tlsFlags, f.Name) || f.Name == "header" || f.Name == "clear-headers" || f.Name == "auth" || f.Name == "no-tls" {
			ch.given = append(ch.given, f.Name)
		}
	})
	given := func(name string) bool { return slices.Contains(ch.given, name) }
	anyGiven := func(names []string) string {
		for _, n := range names {
			if given(n) {
				return n
			}
		}
		return ""
	}
	switch {
	case given("header") && given("clear-headers"):
		return ch, fmt.Errorf("%w: give --header (which replaces every header) or --clear-headers, not both", errUsage)
	case given("auth") && c.auth != "none":
		return ch, fmt.Errorf("%w: --auth %q: the only value is none, which removes the authentication (give --basic, --bearer or --oauth2-* to set one)", errUsage, printable.String(c.auth))
	case given("auth") && anyGiven(authFlags) != "":
		return ch, fmt.Errorf("%w: give --auth none or --%s, not both", errUsage, anyGiven(authFlags))
	case given("no-tls") && anyGiven(tlsFlags) != "":
		return ch, fmt.Errorf("%w: give --no-tls or --%s, not both", errUsage, anyGiven(tlsFlags))
	}
	var err error
	if given("header") || given("clear-headers") {
		ch.setHeaders = true
		if ch.headers, err = readHeaders(c.headers, r); err != nil {
			return ch, err
		}
	}
	if given("auth") || anyGiven(authFlags) != "" {
		ch.setAuth, ch.authNone = true, given("auth")
		if err := c.readAuth(&ch, given, r); err != nil {
			return ch, err
		}
	}
	if given("no-tls") || anyGiven(tlsFlags) != "" {
		ch.setTLS = true
		if ch.tls, err = c.readTLS(given); err != nil {
			return ch, err
		}
	}
	return ch, nil
}

// readHeaders reads --header values, 'Name: value' each, the value read as
// a secret (readSecret). Names must be HTTP tokens, each given once (in
// any case); values must hold no control character but tab. An error
// names the header when its name is valid, and never holds a value.
func readHeaders(raw []string, r *secretReader) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	headers := make(map[string]string, len(raw))
	for i, h := range raw {
		name, spec, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: --header #%d: want 'Name: value' (the text given is not shown: it may hold a secret)", errUsage, i+1)
		case !httpguts.ValidHeaderFieldName(name):
			return nil, fmt.Errorf("%w: --header #%d: its name is not an HTTP header name (a token: letters, digits and !#$%%&'*+-.^_`|~; the text given is not shown)", errUsage, i+1)
		}
		canonical := http.CanonicalHeaderKey(name)
		if _, dup := headers[canonical]; dup {
			return nil, fmt.Errorf("%w: --header %s is given twice", errUsage, canonical)
		}
		value, err := r.read("header", strings.TrimLeft(spec, " \t"), "")
		if err != nil {
			return nil, fmt.Errorf("%w (header %s)", err, canonical)
		}
		switch {
		case value == "":
			return nil, fmt.Errorf("%w: --header %s: the value is empty", errUsage, canonical)
		case !httpguts.ValidHeaderFieldValue(value) || strings.ContainsAny(value, "\r\n"):
			return nil, fmt.Errorf("%w: --header %s: the value holds a control character (not shown)", errUsage, canonical)
		}
		headers[canonical] = value
	}
	for name, value := range headers {
		if err := endpoint.CheckHeaders(map[string]string{name: value}); err != nil {
			return nil, fmt.Errorf("%w: --header cannot set %s (%v)", errUsage, name, err)
		}
	}
	return headers, nil
}

// readAuth reads the authentication flags given into ch: at most one
// scheme, each whole.
func (c *credentialFlags) readAuth(ch *credentialChange, given func(string) bool, r *secretReader) error {
	oauth2 := slices.ContainsFunc(authFlags, func(n string) bool { return strings.HasPrefix(n, "oauth2-") && given(n) })
	var schemes []string
	for _, s := range []struct {
		name string
		on   bool
	}{{"--basic", given("basic")}, {"--bearer", given("bearer")}, {"--oauth2-*", oauth2}} {
		if s.on {
			schemes = append(schemes, s.name)
		}
	}
	if len(schemes) > 1 {
		return fmt.Errorf("%w: give one authentication of %s, not several", errUsage, strings.Join(schemes, ", "))
	}
	switch {
	case given("basic"):
		v, err := r.read("basic", c.basic.spec, "")
		if err != nil {
			return err
		}
		user, password, ok := strings.Cut(v, ":")
		if !ok {
			return fmt.Errorf("%w: --basic: want USER:PASSWORD (the text given is not shown)", errUsage)
		}
		ch.basic = &endpoint.BasicAuth{User: user, Password: password}
	case given("bearer"):
		v, err := r.read("bearer", c.bearer.spec, "")
		if err != nil {
			return err
		}
		if v == "" {
			return fmt.Errorf("%w: --bearer: the token is empty", errUsage)
		}
		ch.bearer = v
	case oauth2:
		o, err := c.readOAuth2(r)
		if err != nil {
			return err
		}
		ch.oauth2 = o
	}
	return nil
}

// readOAuth2 reads the --oauth2-* flags: the token URL, client id and
// client secret are required together.
func (c *credentialFlags) readOAuth2(r *secretReader) (*endpoint.OAuth2, error) {
	for name, v := range map[string]string{"oauth2-token-url": c.oauth2TokenURL, "oauth2-client-id": c.oauth2ClientID} {
		if v == "" {
			return nil, fmt.Errorf("%w: --%s is required with the other --oauth2-* flags", errUsage, name)
		}
	}
	if !c.oauth2Secret.set {
		return nil, fmt.Errorf("%w: --oauth2-client-secret is required with the other --oauth2-* flags", errUsage)
	}
	if u, err := url.Parse(c.oauth2TokenURL); err != nil || !u.IsAbs() || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%w: --oauth2-token-url: want an absolute https:// (or http://) URL without user information", errUsage)
	}
	secret, err := r.read("oauth2-client-secret", c.oauth2Secret.spec, "")
	if err != nil {
		return nil, err
	}
	if secret == "" {
		return nil, fmt.Errorf("%w: --oauth2-client-secret: the secret is empty", errUsage)
	}
	o := &endpoint.OAuth2{TokenURL: c.oauth2TokenURL, ClientID: c.oauth2ClientID, ClientSecret: secret, Scopes: slices.Clone(c.oauth2Scopes)}
	for _, p := range c.oauth2Params {
		name, value, ok := strings.Cut(p, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%w: --oauth2-param: want NAME=VALUE (the text given is not shown)", errUsage)
		}
		if o.Params == nil {
			o.Params = map[string][]string{}
		}
		o.Params[name] = append(o.Params[name], value)
	}
	return o, nil
}

// maxPEMFileSize bounds a --tls-* file: a certificate chain or a CA bundle.
const maxPEMFileSize = 1 << 20

// readTLS reads the --tls-* files, checked as the relay will use them
// (webhook.ParseClientCertificate, webhook.ParseCertPool); nil for
// --no-tls.
func (c *credentialFlags) readTLS(given func(string) bool) (*endpoint.ClientTLS, error) {
	if given("no-tls") {
		return nil, nil
	}
	if given("tls-cert") != given("tls-key") {
		return nil, fmt.Errorf("%w: give --tls-cert and --tls-key together: the client certificate and its private key", errUsage)
	}
	var t endpoint.ClientTLS
	read := func(name, path string) (string, error) {
		b, err := readFileLimited(path, maxPEMFileSize)
		if err != nil {
			return "", fmt.Errorf("%w: --%s: %v", errUsage, name, err)
		}
		return string(b), nil
	}
	var err error
	if given("tls-cert") {
		if t.CertPEM, err = read("tls-cert", c.tlsCert); err != nil {
			return nil, err
		}
		if t.KeyPEM, err = read("tls-key", c.tlsKey); err != nil {
			return nil, err
		}
		if _, err := webhook.ParseClientCertificate([]byte(t.CertPEM), []byte(t.KeyPEM)); err != nil {
			return nil, fmt.Errorf("%w: --tls-cert %s, --tls-key %s: %v", errUsage, c.tlsCert, c.tlsKey, err)
		}
	}
	if given("tls-ca") {
		if t.CAPEM, err = read("tls-ca", c.tlsCA); err != nil {
			return nil, err
		}
		if _, err := webhook.ParseCertPool([]byte(t.CAPEM)); err != nil {
			return nil, fmt.Errorf("%w: --tls-ca %s: %v", errUsage, c.tlsCA, err)
		}
	}
	return &t, nil
}

// checkCredentialsFor refuses credentials that the endpoint at rawURL
// (without user information) cannot use: a webhook's authentication and
// TLS on a broker's endpoint, TLS on a plain http:// webhook. update says
// whether to name the flags that remove them.
func checkCredentialsFor(rawURL string, c endpoint.Credentials, update bool) error {
	if err := c.Check(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	remove := func(flag string) string {
		if update {
			return " (" + flag + " removes it)"
		}
		return ""
	}
	var auth string
	switch {
	case c.Basic != nil:
		auth = "Basic authentication (--basic, or a webhook URL's user information)"
	case c.Bearer != "":
		auth = "a bearer token (--bearer)"
	case c.OAuth2 != nil:
		auth = "OAuth 2.0 client credentials (--oauth2-*)"
	}
	hasTLS := c.TLS != nil && (c.TLS.CertPEM != "" || c.TLS.CAPEM != "")
	if !isWebhook(rawURL) {
		switch {
		case auth != "":
			return fmt.Errorf("%w: %s authenticates a webhook's requests (http:// or https://), and this endpoint is a broker's: a broker's credentials are the user and password of its URL, sealed as well%s", errUsage, auth, remove("--auth none"))
		case hasTLS:
			return fmt.Errorf("%w: --tls-* configure a webhook's https:// requests, and this endpoint is a broker's (its URL's parameters configure its TLS)%s", errUsage, remove("--no-tls"))
		}
		return nil
	}
	if u, err := url.Parse(rawURL); err == nil && !strings.EqualFold(u.Scheme, "https") && hasTLS {
		return fmt.Errorf("%w: --tls-* need an https:// URL: this endpoint's is %s://%s", errUsage, printable.String(u.Scheme), remove("--no-tls"))
	}
	return nil
}

// hasUserInfo reports whether rawURL holds user information (credentials,
// which endpoint.MoveURLCredentials moves into the sealed ones).
func hasUserInfo(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.User != nil
}

// moveURLCredentials moves the user information of e's URL into c
// (endpoint.MoveURLCredentials), as a usage error that names --url when
// it cannot.
func moveURLCredentials(e *store.Endpoint, c *endpoint.Credentials) error {
	if err := endpoint.MoveURLCredentials(e, c); err != nil {
		return fmt.Errorf("%w: --url: its user information is Basic authentication, and the endpoint has another: give one (--auth none removes the other)", errUsage)
	}
	return nil
}

// webhookFlagNames maps the fields of webhook.Config that an endpoint's
// settings and credentials fill to the flags that give them, the longest
// first (strings.Replacer tries them in this order).
var webhookFlagNames = strings.NewReplacer(
	"Config.Auth.OAuth2.TokenURL", "--oauth2-token-url",
	"Config.Auth.OAuth2.ClientID", "--oauth2-client-id",
	"Config.Auth.OAuth2.ClientSecret", "--oauth2-client-secret",
	"Config.Auth.OAuth2.Scopes", "--oauth2-scope",
	"Config.Auth.OAuth2.Params", "--oauth2-param",
	"Config.Auth.OAuth2", "--oauth2-*",
	"Config.Auth.Basic.User", "--basic's user",
	"Config.Auth.Basic.Password", "--basic's password",
	"Config.Auth.Basic", "--basic",
	"Config.Auth.Bearer", "--bearer",
	"Config.Auth", "the authentication",
	"Config.Headers", "--header",
	"Config.Secrets", "--secret",
	"Config.Scheme", "--signature",
	"Config.HeaderNames", "--signature",
	"Config.ClientCertificate", "--tls-cert",
	"Config.RootCAs", "--tls-ca",
	"Config.URL", "--url",
)

// checkWebhookSink builds the sink the relay will deliver to the webhook
// endpoint e with (endpoint.OpenSink: its secrets opened with k, its
// headers, authentication, client certificate, signature profile and
// envelope), which connects nowhere, and closes it: what the relay would
// refuse is refused now, naming the flags.
func checkWebhookSink(ctx context.Context, k *keyring.Keyring, e store.Endpoint) error {
	cfg := endpoint.SinkConfig{Kinds: endpointKinds, Keyring: k, Logger: slog.New(slog.DiscardHandler)}
	s, err := endpoint.OpenSink(ctx, cfg, e, time.Now())
	if err != nil {
		var opt *sink.OptionError
		if errors.As(err, &opt) {
			switch opt.Option {
			case "TLS":
				return fmt.Errorf("%w: --tls-*: %s", errUsage, webhookFlagNames.Replace(opt.Err.Error()))
			case "Signature":
				return fmt.Errorf("%w: --signature: %v", errUsage, opt.Err)
			case "Envelope":
				return fmt.Errorf("%w: --envelope: %v", errUsage, opt.Err)
			}
			err = opt.Err
		}
		return fmt.Errorf("%w: %s", errUsage, webhookFlagNames.Replace(strings.TrimPrefix(err.Error(), "webhook: ")))
	}
	if c, ok := s.(io.Closer); ok {
		_ = c.Close()
	}
	return nil
}
