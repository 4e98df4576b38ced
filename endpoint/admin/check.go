package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/filter"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/envelope"
	"github.com/postbox-go/postbox/sink/nats"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/sink/webhook/guard"
	"github.com/postbox-go/postbox/store"
)

// checkURL refuses what is neither an absolute http or https URL nor a
// URL of one of Config.Kinds that its kind takes (connecting nowhere:
// endpoint.CheckURL), naming the schemes endpoints may have.
func (a *Admin) checkURL(raw string) error {
	if err := endpoint.CheckURL(a.cfg.Kinds, raw); err != nil {
		var refused *sink.OptionError
		if errors.As(err, &refused) {
			err = refused.Err
		}
		return a.refuse(SettingURL, "%s: %v", a.name(SettingURL), err)
	}
	return nil
}

// IsWebhook reports whether rawURL is a webhook's (http:// or https://),
// as opposed to a broker's (one of Config.Kinds).
func (a *Admin) IsWebhook(rawURL string) bool {
	k, _, err := endpoint.LookupKind(a.cfg.Kinds, rawURL)
	return err == nil && k.Name == webhook.URL.Name
}

// resolveTimeout bounds the name resolution of an endpoint's host at
// registration.
const resolveTimeout = 5 * time.Second

// checkAddress is the SSRF guard at registration: it refuses a URL whose
// host is, or resolves to, an address the relay's guard refuses
// (loopback, private, link-local and the other special ranges of package
// guard) unless allowPrivate, with an error that names the allowance.
// Addresses no endpoint can have (unspecified, multicast, broadcast) are
// refused whatever allowPrivate. A host that does not resolve is
// accepted: the returned warning says so (the relay's guard checks the
// addresses at every connection, whatever they resolve to then). Errors
// name the host, never the URL's path or query.
func (a *Admin) checkAddress(ctx context.Context, rawURL string, allowPrivate bool) (warning string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", a.refuse(SettingURL, "%s: not a URL", a.name(SettingURL))
	}
	return a.checkHost(ctx, u.Hostname(), allowPrivate)
}

// checkBrokerAddresses is checkAddress for a broker's URL: every host of
// its host list (nats://a:4222,b:4222, kafka://a:9092,b:9092; as the
// kinds split it), each checked as a webhook's host. The warnings of the
// hosts that do not resolve are joined.
func (a *Admin) checkBrokerAddresses(ctx context.Context, rawURL string, allowPrivate bool) (warning string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", a.refuse(SettingURL, "%s: not a URL", a.name(SettingURL))
	}
	var warnings []string
	for hostport := range strings.SplitSeq(u.Host, ",") {
		hostport = strings.TrimSpace(hostport)
		if hostport == "" {
			continue
		}
		host := hostport
		if h, _, err := net.SplitHostPort(hostport); err == nil {
			host = h
		} else {
			host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		}
		if i := strings.IndexByte(host, '%'); i >= 0 && strings.Contains(host, ":") {
			host = host[:i] // an IPv6 zone, as url.URL.Hostname keeps it
		}
		w, err := a.checkHost(ctx, host, allowPrivate)
		if err != nil {
			return "", err
		}
		if w != "" {
			warnings = append(warnings, w)
		}
	}
	return strings.Join(warnings, "; "), nil
}

// checkHost is checkAddress of one host: an address, or a name resolved.
func (a *Admin) checkHost(ctx context.Context, host string, allowPrivate bool) (warning string, err error) {
	g, err := guard.New(guard.Config{AllowPrivate: allowPrivate, Allow: a.cfg.AllowCIDRs})
	if err != nil {
		return "", err
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return "", a.refusedAddress(g.Check(addr), "")
	}
	resolver := a.cfg.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		var dnsErr *net.DNSError
		reason := "the lookup failed"
		if errors.As(err, &dnsErr) {
			reason = dnsErr.Err
		}
		return fmt.Sprintf("%s: host %s does not resolve now (%s): accepted unchecked; the relay's SSRF guard checks its addresses at every connection",
			a.name(SettingURL), printable.String(host), reason), nil
	}
	for _, addr := range addrs {
		if err := a.refusedAddress(g.Check(addr), host); err != nil {
			return "", err
		}
	}
	return "", nil
}

// refusedAddress turns a refusal of the guard into the registration's
// error; host is the name that resolved to the address, "" for an address
// given as such.
func (a *Admin) refusedAddress(err error, host string) error {
	var blocked *guard.BlockedError
	if !errors.As(err, &blocked) {
		return err
	}
	what := blocked.Addr.String()
	if host != "" {
		what = "host " + printable.String(host) + " resolves to " + what + ", which"
	}
	if !blocked.Private {
		return a.refuse(SettingURL, "%s: %s is %s: no endpoint can be reached there", a.name(SettingURL), what, blocked.Rule)
	}
	return a.refuse(SettingURL, "%s: %s is %s, which the relay's SSRF guard refuses: give %s to let this endpoint reach private addresses",
		a.name(SettingURL), what, blocked.Rule, a.name(SettingAllowPrivate))
}

// checkFields checks the settings of e, as Create and Update store them;
// checkAddress says whether to run the SSRF check on e.URL when it is a
// webhook's (see checkAddress; a broker's address is the operator's, as
// postbox relay --sink's is), whose warning it returns. signatureGiven
// says whether the signature profile was given: it is refused for a
// broker's endpoint.
func (a *Admin) checkFields(ctx context.Context, e store.Endpoint, checkAddress, signatureGiven bool) (warning string, err error) {
	if err := a.checkURL(e.URL); err != nil {
		return "", err
	}
	if err := a.checkTypes(e.Types); err != nil {
		return "", err
	}
	if err := endpoint.ValidateTypes(e.Types); err != nil {
		return "", a.refuse(SettingTypes, "%s: %v", a.name(SettingTypes), err)
	}
	if r := e.RatePerSecond; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return "", a.refuse(SettingRate, "%s %v: want deliveries per second, 0 or more (0: no limit)", a.name(SettingRate), r)
	}
	if e.Concurrency < 1 {
		return "", a.refuse(SettingConcurrency, "%s %d: at least 1", a.name(SettingConcurrency), e.Concurrency)
	}
	if e.Concurrency > ConcurrencyMax {
		return "", a.refuse(SettingConcurrency, "%s %d: at most %d", a.name(SettingConcurrency), e.Concurrency, ConcurrencyMax)
	}
	if err := a.checkFilter(e.Filter); err != nil {
		return "", err
	}
	webhookURL := a.IsWebhook(e.URL)
	if env, err := endpoint.ParseEnvelope(e.Envelope); err != nil {
		return "", a.refuse(SettingEnvelope, "%s: %v", a.name(SettingEnvelope), err)
	} else if k, _, _ := endpoint.LookupKind(a.cfg.Kinds, e.URL); env.Kind == envelope.CloudEventsBinary && k.Name == nats.URL.Name {
		return "", a.refuse(SettingEnvelope, "%[1]s cloudevents-binary: NATS has no CloudEvents binary mode (its protocol binding defines structured mode only): give %[1]s cloudevents",
			a.name(SettingEnvelope))
	}
	if signatureGiven && e.Signature != "" && !webhookURL {
		return "", a.refuse(SettingSignature, "%s: a broker's endpoint signs nothing (only webhooks, http:// and https://, are signed)", a.name(SettingSignature))
	}
	switch {
	case !checkAddress:
		return "", nil
	case webhookURL:
		return a.checkAddress(ctx, e.URL, e.AllowPrivate)
	case a.cfg.CheckBrokerHosts:
		return a.checkBrokerAddresses(ctx, e.URL, e.AllowPrivate)
	}
	return "", nil
}

// checkTypes refuses a type glob that the store could not keep as it is
// (it keeps the globs joined by commas): one that is empty, holds a comma,
// or begins or ends with white space.
func (a *Admin) checkTypes(types []string) error {
	for _, t := range types {
		switch {
		case t == "":
			return a.refuse(SettingTypes, "%s: a glob is empty (no types: every event)", a.name(SettingTypes))
		case strings.Contains(t, ","):
			return a.refuse(SettingTypes, "%s %q: a glob holds no comma (give each glob on its own)", a.name(SettingTypes), t)
		case strings.TrimSpace(t) != t:
			return a.refuse(SettingTypes, "%s %q: a glob neither begins nor ends with white space", a.name(SettingTypes), t)
		}
	}
	return nil
}

// checkPrivate refuses allow_private when Config.PrivateEndpoints does not
// let endpoints have it.
func (a *Admin) checkPrivate() error {
	if a.cfg.PrivateEndpoints {
		return nil
	}
	return a.refuse(SettingAllowPrivate, "%s: this postbox does not let its endpoints reach private addresses from here (only the operator gives it, with postbox endpoints)",
		a.name(SettingAllowPrivate))
}

// checkFilter refuses a filter that does not compile, saying where
// (line:column) and why.
func (a *Admin) checkFilter(expr string) error {
	if expr == "" {
		return nil
	}
	if err := filter.Check(expr); err != nil {
		return a.refuse(SettingFilter, "%s: %s", a.name(SettingFilter), strings.TrimPrefix(err.Error(), "filter: "))
	}
	return nil
}

// envelopeSetting is the Envelope setting (store.Endpoint.Envelope, as
// endpoint.ParseEnvelope reads it) of kind and source over current, the
// endpoint's ("" on Create): each one given (not nil) replaces its part;
// a source is kept only for the CloudEvents envelopes (an empty source
// given to another is none, as View shows it). The raw envelope is "".
func (a *Admin) envelopeSetting(current string, kindName, source *string) (string, error) {
	cur, err := endpoint.ParseEnvelope(current)
	if err != nil {
		cur = envelope.Config{}
	}
	kind, src := cur.Kind, cur.Source
	if kindName != nil {
		if kind, err = envelope.ParseKind(*kindName); err != nil {
			return "", a.refuse(SettingEnvelope, "%s %q: want raw, standard, cloudevents or cloudevents-binary", a.name(SettingEnvelope), printable.String(*kindName))
		}
	}
	cloudEvents := kind == envelope.CloudEvents || kind == envelope.CloudEventsBinary
	switch {
	case source != nil && *source != "" && !cloudEvents: // "": none, what View shows for these
		return "", a.refuse(SettingCESource, "%s: only %s cloudevents and cloudevents-binary have a source", a.name(SettingCESource), a.name(SettingEnvelope))
	case source != nil:
		src = *source
	case !cloudEvents:
		src = ""
	}
	spec := kind.String()
	if src != "" && src != envelope.SourceDefault {
		spec += ";source=" + src
	}
	cfg, err := endpoint.ParseEnvelope(spec)
	if err != nil {
		return "", a.refuse(SettingCESource, "%s: %v", a.name(SettingCESource), err)
	}
	if cfg.Kind == envelope.Raw {
		return "", nil
	}
	return endpoint.FormatEnvelope(cfg), nil
}

// signatureSetting is the Signature setting of the profile spec: the
// profile's canonical text (signature.Profile.String), "" for the
// relay's.
func (a *Admin) signatureSetting(spec string) (string, error) {
	if spec == "" {
		return "", nil
	}
	p, err := signature.ParseProfile(spec)
	if err != nil {
		return "", a.refuse(SettingSignature, "%s: %v", a.name(SettingSignature), err)
	}
	return p.String(), nil
}

// CheckSecret makes the check Create and RotateSecret make of a signing
// secret given: that the signature profile profileSpec (a
// Settings.Signature, "" for the relay's) can sign with it. Its refusal
// is a *FieldError that never holds the secret.
func (a *Admin) CheckSecret(secret, profileSpec string) error {
	profile, err := signature.ParseProfile(profileSpec)
	if err != nil {
		return a.refuse(SettingSignature, "%s: %v", a.name(SettingSignature), err)
	}
	if _, err := signature.NewProfileSigner(profile, secret); err != nil {
		return a.refuse(SettingSecret, "%s: %v", a.name(SettingSecret), err)
	}
	return nil
}

// checkHeaders checks static headers and returns them under their
// canonical names: each name an HTTP token, given once (in any case);
// each value not empty, UTF-8 (the sealed credentials are JSON), without
// control characters but tab; none that endpoint.CheckHeaders refuses. An error names the header when its name
// is valid, and never holds a value.
func (a *Admin) checkHeaders(headers map[string]string) (map[string]string, error) {
	if len(headers) == 0 {
		return nil, nil
	}
	names := slices.Sorted(maps.Keys(headers))
	out := make(map[string]string, len(headers))
	for _, name := range names {
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, a.refuse(SettingHeaders, "%s: a name is not an HTTP header name (a token: letters, digits and !#$%%&'*+-.^_`|~; the text given is not shown)", a.name(SettingHeaders))
		}
		canonical := http.CanonicalHeaderKey(name)
		if _, dup := out[canonical]; dup {
			return nil, a.refuse(SettingHeaders, "%s %s is given twice", a.name(SettingHeaders), canonical)
		}
		value := headers[name]
		switch {
		case value == "":
			return nil, a.refuse(SettingHeaders, "%s %s: the value is empty", a.name(SettingHeaders), canonical)
		case !httpguts.ValidHeaderFieldValue(value) || strings.ContainsAny(value, "\r\n"):
			return nil, a.refuse(SettingHeaders, "%s %s: the value holds a control character (not shown)", a.name(SettingHeaders), canonical)
		case !utf8.ValidString(value):
			return nil, a.refuse(SettingHeaders, "%s %s: the value is not UTF-8 text (not shown)", a.name(SettingHeaders), canonical)
		}
		out[canonical] = value
	}
	for _, name := range names {
		canonical := http.CanonicalHeaderKey(name)
		if err := endpoint.CheckHeaders(map[string]string{canonical: out[canonical]}); err != nil {
			return nil, a.refuse(SettingHeaders, "%s cannot set %s (%v)", a.name(SettingHeaders), canonical, err)
		}
	}
	return out, nil
}

// checkCredentialsFor refuses credentials that the endpoint at rawURL
// (without user information) cannot use: a webhook's authentication and
// TLS on a broker's endpoint, TLS on a plain http:// webhook. update says
// whether to name what removes them.
func (a *Admin) checkCredentialsFor(rawURL string, c endpoint.Credentials, update bool) error {
	if err := c.Check(); err != nil { // several schemes: the headers are checked already
		return a.refuse(SettingAuth, "%v", err)
	}
	if err := a.checkUTF8(c); err != nil {
		return err
	}
	remove := func(setting string) string {
		if update {
			return " (" + a.name(setting) + " removes it)"
		}
		return ""
	}
	var auth, authSetting string
	switch {
	case c.Basic != nil:
		auth, authSetting = "Basic authentication ("+a.name(SettingBasic)+", or a webhook URL's user information)", SettingBasic
	case c.Bearer != "":
		auth, authSetting = "a bearer token ("+a.name(SettingBearer)+")", SettingBearer
	case c.OAuth2 != nil:
		auth, authSetting = "OAuth 2.0 client credentials ("+a.name(SettingOAuth2)+")", SettingOAuth2
	}
	hasTLS := c.TLS != nil && (c.TLS.CertPEM != "" || c.TLS.CAPEM != "")
	if !a.IsWebhook(rawURL) {
		switch {
		case auth != "":
			return a.refuse(authSetting, "%s authenticates a webhook's requests (http:// or https://), and this endpoint is a broker's: a broker's credentials are the user and password of its URL, sealed as well%s",
				auth, remove(SettingRemoveAuth))
		case hasTLS:
			return a.refuse(SettingTLS, "%s configure a webhook's https:// requests, and this endpoint is a broker's (its URL's parameters configure its TLS)%s",
				a.name(SettingTLS), remove(SettingRemoveTLS))
		}
		return nil
	}
	if u, err := url.Parse(rawURL); err == nil && !strings.EqualFold(u.Scheme, "https") && hasTLS {
		return a.refuse(SettingTLS, "%s need an https:// URL: this endpoint's is %s://%s", a.name(SettingTLS), printable.String(u.Scheme), remove(SettingRemoveTLS))
	}
	return nil
}

// checkUTF8 refuses secrets that are not UTF-8 text: the sealed
// credentials are JSON, which would change them.
func (a *Admin) checkUTF8(c endpoint.Credentials) error {
	type text struct{ setting, value string }
	texts := []text{{SettingSecret, c.Secret}, {SettingBearer, c.Bearer}, {SettingURL, c.URLUser + c.URLPassword}}
	if c.Basic != nil {
		texts = append(texts, text{SettingBasic, c.Basic.User + c.Basic.Password})
	}
	if o := c.OAuth2; o != nil {
		texts = append(texts, text{SettingOAuth2URL, o.TokenURL}, text{SettingOAuth2ID, o.ClientID}, text{SettingOAuth2Secret, o.ClientSecret})
	}
	for _, t := range texts {
		if !utf8.ValidString(t.value) {
			return a.refuse(t.setting, "%s: not UTF-8 text (not shown)", a.name(t.setting))
		}
	}
	return nil
}

// hasUserInfo reports whether rawURL holds user information (credentials,
// which endpoint.MoveURLCredentials moves into the sealed ones).
func hasUserInfo(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.User != nil
}

// checkBasicAndUserInfo refuses Basic authentication beside a webhook URL
// that holds user information: both are Basic authentication.
func (a *Admin) checkBasicAndUserInfo(rawURL string, basic *endpoint.BasicAuth) error {
	if basic != nil && a.IsWebhook(rawURL) && hasUserInfo(rawURL) {
		return a.refuse(SettingBasic, "%s and a %s with user information are both Basic authentication: give one", a.name(SettingBasic), a.name(SettingURL))
	}
	return nil
}

// moveURLCredentials moves the user information of e's URL into c
// (endpoint.MoveURLCredentials), as a refusal of the URL when it cannot.
func (a *Admin) moveURLCredentials(e *store.Endpoint, c *endpoint.Credentials) error {
	if err := endpoint.MoveURLCredentials(e, c); err != nil {
		return a.refuse(SettingURL, "%s: its user information is Basic authentication, and the endpoint has another: give one (%s removes the other)",
			a.name(SettingURL), a.name(SettingRemoveAuth))
	}
	return nil
}

// webhookFields are the fields of webhook.Config that an endpoint's
// settings and credentials fill, with the settings that give them, the
// longest first (a message naming a field is rewritten in this order).
var webhookFields = []struct{ field, setting, suffix string }{
	{"Config.Auth.OAuth2.TokenURL", SettingOAuth2URL, ""},
	{"Config.Auth.OAuth2.ClientID", SettingOAuth2ID, ""},
	{"Config.Auth.OAuth2.ClientSecret", SettingOAuth2Secret, ""},
	{"Config.Auth.OAuth2.Scopes", SettingOAuth2Scopes, ""},
	{"Config.Auth.OAuth2.Params", SettingOAuth2Params, ""},
	{"Config.Auth.OAuth2", SettingOAuth2, ""},
	{"Config.Auth.Basic.User", SettingBasic, "'s user"},
	{"Config.Auth.Basic.Password", SettingBasic, "'s password"},
	{"Config.Auth.Basic", SettingBasic, ""},
	{"Config.Auth.Bearer", SettingBearer, ""},
	{"Config.Auth", SettingAuth, ""},
	{"Config.Headers", SettingHeaders, ""},
	{"Config.Secrets", SettingSecret, ""},
	{"Config.Scheme", SettingSignature, ""},
	{"Config.HeaderNames", SettingSignature, ""},
	{"Config.ClientCertificate", SettingTLSCert, ""},
	{"Config.RootCAs", SettingTLSCA, ""},
	{"Config.URL", SettingURL, ""},
}

// webhookSettings rewrites the fields of webhook.Config that text names
// into the settings that give them (webhookFields, named by Config.Names),
// and returns the setting of the first one named (SettingURL when none).
func (a *Admin) webhookSettings(text string) (string, string) {
	pairs := make([]string, 0, 2*len(webhookFields))
	setting, at := SettingURL, len(text)
	for _, f := range webhookFields {
		pairs = append(pairs, f.field, a.name(f.setting)+f.suffix)
		if i := strings.Index(text, f.field); i >= 0 && i < at {
			setting, at = f.setting, i
		}
	}
	return strings.NewReplacer(pairs...).Replace(text), setting
}

// checkWebhookSink builds the sink the relay will deliver to the webhook
// endpoint e with (endpoint.OpenSink: its secrets opened with k, its
// headers, authentication, client certificate, signature profile and
// envelope), which connects nowhere, and closes it: what the relay would
// refuse is refused now, naming the settings.
func (a *Admin) checkWebhookSink(ctx context.Context, k *keyring.Keyring, e store.Endpoint) error {
	cfg := endpoint.SinkConfig{Kinds: a.cfg.Kinds, Keyring: k, Logger: slog.New(slog.DiscardHandler)}
	s, err := endpoint.OpenSink(ctx, cfg, e, a.now())
	if err != nil {
		var opt *sink.OptionError
		if errors.As(err, &opt) {
			switch opt.Option {
			case "TLS":
				text, _ := a.webhookSettings(opt.Err.Error())
				return a.refuse(SettingTLS, "%s: %s", a.name(SettingTLS), text)
			case "Signature":
				return a.refuse(SettingSignature, "%s: %v", a.name(SettingSignature), opt.Err)
			case "Envelope":
				return a.refuse(SettingEnvelope, "%s: %v", a.name(SettingEnvelope), opt.Err)
			}
			err = opt.Err
		}
		text, setting := a.webhookSettings(strings.TrimPrefix(err.Error(), "webhook: "))
		return a.refuse(setting, "%s", text)
	}
	if c, ok := s.(io.Closer); ok {
		_ = c.Close()
	}
	return nil
}
