package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/sink/webhook"
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

// credentialChange is what the credential flags given ask for
// (admin.CredentialChange), and which flags were given, for the command's
// report.
type credentialChange struct {
	admin.CredentialChange
	given []string
}

// credentials are the credentials of the change, for endpoints add.
func (ch credentialChange) credentials() endpoint.Credentials {
	return endpoint.Credentials{Headers: ch.Headers, Basic: ch.Basic, Bearer: ch.Bearer, OAuth2: ch.OAuth2, TLS: ch.TLS}
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
		ch.SetHeaders = true
		if ch.Headers, err = readHeaders(c.headers, r); err != nil {
			return ch, err
		}
	}
	if given("auth") || anyGiven(authFlags) != "" {
		ch.SetAuth = true
		if err := c.readAuth(&ch, given, r); err != nil {
			return ch, err
		}
	}
	if given("no-tls") || anyGiven(tlsFlags) != "" {
		ch.SetTLS = true
		if ch.TLS, err = c.readTLS(given); err != nil {
			return ch, err
		}
	}
	return ch, nil
}

// readHeaders reads --header values, 'Name: value' each, the value read as
// a secret (readSecret). Names must be HTTP tokens, each given once (in
// any case); admin checks the values. An error names the header when its
// name is valid, and never holds a value.
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
		headers[canonical] = value
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
		ch.Basic = &endpoint.BasicAuth{User: user, Password: password}
	case given("bearer"):
		v, err := r.read("bearer", c.bearer.spec, "")
		if err != nil {
			return err
		}
		if v == "" {
			return fmt.Errorf("%w: --bearer: the token is empty", errUsage)
		}
		ch.Bearer = v
	case oauth2:
		o, err := c.readOAuth2(r)
		if err != nil {
			return err
		}
		ch.OAuth2 = o
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
