package webhook

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/postbox-go/postbox/sink"
)

// Auth is how the sink authenticates to the endpoint, in the Authorization
// header of every request: at most one of its fields. The zero Auth sends
// none (but the Basic credentials of the URL's user information, if any,
// which Auth cannot be combined with). An event's own headers can never
// set Authorization. Its String names the kind, never a credential.
type Auth struct {
	// Basic sends HTTP Basic credentials (RFC 7617).
	Basic *BasicAuth
	// Bearer sends "Authorization: Bearer <token>" (RFC 6750): a static
	// token, such as an API key.
	Bearer string
	// OAuth2 fetches a token with the OAuth 2.0 client credentials grant
	// (RFC 6749 section 4.4) and sends it as "Authorization: <type>
	// <token>". See OAuth2.
	OAuth2 *OAuth2
}

// BasicAuth are HTTP Basic credentials.
type BasicAuth struct {
	// User is the user id: no colon, no control character.
	User string
	// Password may be empty, but not with User; no control character.
	Password string
}

// OAuth2 configures the client credentials grant, through package
// golang.org/x/oauth2/clientcredentials.
//
// The token requests go through the sink's own client (Config.Client, with
// its SSRF guard, client certificate and RootCAs, if any), each bounded by
// Config.Timeout, and never follow a redirect. The token is cached and
// fetched again shortly before it expires (by its expires_in; a token
// without one is kept until the endpoint refuses it): one token request
// serves any number of deliveries, concurrent ones included. An endpoint
// answering 401 Unauthorized makes the next attempt fetch a fresh token.
// A token that cannot be fetched fails the attempt with a sink.Retryable
// error saying "oauth2 token", with the token endpoint's status and error
// code, but never the client secret, a token or the token URL.
type OAuth2 struct {
	// TokenURL is the token endpoint: an absolute http or https URL.
	// Required.
	TokenURL string
	// ClientID and ClientSecret identify the sink to the token
	// endpoint. Required.
	ClientID     string
	ClientSecret string
	// Scopes are the scopes requested, if any: each an RFC 6749
	// scope-token (printable ASCII but space, '"' and '\').
	Scopes []string
	// Params are further parameters of the token request, such as an
	// "audience" or a "resource". They cannot set grant_type, scope,
	// client_id nor client_secret.
	Params map[string][]string
	// AuthStyle says how the client id and secret reach the token
	// endpoint. Default AuthStyleAuto.
	AuthStyle AuthStyle
}

// AuthStyle says how OAuth2 client credentials are sent to the token
// endpoint.
type AuthStyle int

const (
	// AuthStyleAuto tries AuthStyleHeader, then AuthStyleParams if the
	// token endpoint refuses it, and keeps to the one that worked.
	AuthStyleAuto AuthStyle = iota
	// AuthStyleHeader sends them as HTTP Basic credentials, each
	// URL-encoded first (RFC 6749 section 2.3.1).
	AuthStyleHeader
	// AuthStyleParams sends them as client_id and client_secret in the
	// request's form body.
	AuthStyleParams
)

// String names the kind of authentication, never a credential: "none",
// "basic", "bearer", "oauth2 client credentials" or, for an Auth with
// several kinds set (which New refuses), "invalid".
func (a Auth) String() string {
	switch {
	case a.count() > 1:
		return "invalid"
	case a.Basic != nil:
		return "basic"
	case a.Bearer != "":
		return "bearer"
	case a.OAuth2 != nil:
		return "oauth2 client credentials"
	}
	return "none"
}

// count is how many kinds of authentication a sets.
func (a Auth) count() int {
	n := 0
	for _, set := range []bool{a.Basic != nil, a.Bearer != "", a.OAuth2 != nil} {
		if set {
			n++
		}
	}
	return n
}

// validate checks a; errors name the field, never a value.
func (a Auth) validate(urlHasUser bool) error {
	switch {
	case a.count() == 0:
		return nil
	case a.count() > 1:
		return errors.New("webhook: Config.Auth: set at most one of Basic, Bearer and OAuth2")
	case urlHasUser:
		return errors.New("webhook: Config.Auth cannot be set when Config.URL holds user information (credentials): give them to Config.Auth.Basic instead")
	case a.Basic != nil:
		return a.Basic.validate()
	case a.Bearer != "":
		if !b64token(a.Bearer) {
			return errors.New("webhook: Config.Auth.Bearer is not an RFC 6750 token (letters, digits, -._~+/ then optional trailing =)")
		}
		return nil
	}
	return a.OAuth2.validate()
}

func (b *BasicAuth) validate() error {
	switch {
	case b.User == "" && b.Password == "":
		return errors.New("webhook: Config.Auth.Basic has neither User nor Password")
	case strings.Contains(b.User, ":"):
		return errors.New("webhook: Config.Auth.Basic.User holds a colon, which Basic credentials cannot carry")
	case hasControl(b.User):
		return errors.New("webhook: Config.Auth.Basic.User holds a control character")
	case hasControl(b.Password):
		return errors.New("webhook: Config.Auth.Basic.Password holds a control character")
	}
	return nil
}

// reservedParams are the token request's parameters that OAuth2.Params
// cannot set.
var reservedParams = []string{"grant_type", "scope", "client_id", "client_secret"}

func (o *OAuth2) validate() error {
	u, err := url.Parse(o.TokenURL)
	switch {
	case o.TokenURL == "":
		return errors.New("webhook: Config.Auth.OAuth2.TokenURL is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("webhook: Config.Auth.OAuth2.TokenURL must be an absolute http or https URL")
	case o.ClientID == "":
		return errors.New("webhook: Config.Auth.OAuth2.ClientID is required")
	case o.ClientSecret == "":
		return errors.New("webhook: Config.Auth.OAuth2.ClientSecret is required")
	case hasControl(o.ClientID):
		return errors.New("webhook: Config.Auth.OAuth2.ClientID holds a control character")
	case o.AuthStyle < AuthStyleAuto || o.AuthStyle > AuthStyleParams:
		return fmt.Errorf("webhook: Config.Auth.OAuth2.AuthStyle %d is not an AuthStyle", int(o.AuthStyle))
	}
	for i, scope := range o.Scopes {
		if !scopeToken(scope) {
			return fmt.Errorf("webhook: Config.Auth.OAuth2.Scopes[%d] is not an RFC 6749 scope token", i)
		}
	}
	for name := range o.Params {
		switch {
		case name == "":
			return errors.New("webhook: Config.Auth.OAuth2.Params has an empty name")
		case containsFold(reservedParams, name):
			return fmt.Errorf("webhook: Config.Auth.OAuth2.Params cannot set %q, which the client credentials grant sets itself", name)
		}
	}
	return nil
}

// basicAuthorization is the Authorization value of Basic credentials.
func basicAuthorization(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// staticAuthorization is the Authorization value of a when it does not
// change from request to request, or "".
func (a Auth) staticAuthorization() string {
	switch {
	case a.Basic != nil:
		return basicAuthorization(a.Basic.User, a.Basic.Password)
	case a.Bearer != "":
		return "Bearer " + a.Bearer
	}
	return ""
}

// oauthTokens is the cached token of an OAuth2 Auth.
type oauthTokens struct {
	conf *clientcredentials.Config
	// ctx carries the HTTP client of the token requests
	// (oauth2.HTTPClient).
	ctx context.Context
	// current caches the token and fetches it when it is missing or
	// about to expire; a 401 replaces it with an empty one (invalidate).
	current atomic.Pointer[tokenSource]
}

// tokenSource is one cache of tokens: a pointer of its own, so that
// invalidate replaces only the cache whose token the endpoint refused.
type tokenSource struct{ oauth2.TokenSource }

// newOAuthTokens returns the token cache of o, whose requests client sends.
func newOAuthTokens(o *OAuth2, client *http.Client) *oauthTokens {
	style := oauth2.AuthStyleAutoDetect
	switch o.AuthStyle {
	case AuthStyleHeader:
		style = oauth2.AuthStyleInHeader
	case AuthStyleParams:
		style = oauth2.AuthStyleInParams
	}
	t := &oauthTokens{
		conf: &clientcredentials.Config{
			ClientID:       o.ClientID,
			ClientSecret:   o.ClientSecret,
			TokenURL:       o.TokenURL,
			Scopes:         append([]string(nil), o.Scopes...),
			EndpointParams: maps.Clone(url.Values(o.Params)),
			AuthStyle:      style,
		},
		ctx: context.WithValue(context.Background(), oauth2.HTTPClient, client),
	}
	t.current.Store(t.newSource())
	return t
}

func (t *oauthTokens) newSource() *tokenSource {
	return &tokenSource{t.conf.TokenSource(t.ctx)}
}

// authorization returns the Authorization value of the cached token,
// fetching one if needed, and the cache it came from (for invalidate). A
// token that cannot be fetched, or not sent, is a sink.Retryable error
// that names neither the secret nor a token.
func (t *oauthTokens) authorization() (string, *tokenSource, error) {
	src := t.current.Load()
	tok, err := src.Token()
	if err != nil {
		return "", nil, &sink.Error{Kind: sink.Retryable, Err: fmt.Errorf("webhook: oauth2 token: %w", tokenError(err))}
	}
	if !validHeaderName(tok.Type()) || tok.AccessToken == "" || !validHeaderValue(tok.AccessToken) {
		t.invalidate(src)
		return "", nil, &sink.Error{Kind: sink.Retryable, Err: errors.New("webhook: oauth2 token: the token endpoint's access token or token type cannot be sent in a header")}
	}
	return tok.Type() + " " + tok.AccessToken, src, nil
}

// invalidate drops the token of used, so that the next request fetches a
// fresh one, unless another request did already.
func (t *oauthTokens) invalidate(used *tokenSource) {
	t.current.CompareAndSwap(used, t.newSource())
}

// tokenError is a token request's failure, told without the token URL
// (whose query may hold a secret) nor the token endpoint's body (which
// oauth2.RetrieveError quotes): its status and RFC 6749 error code.
func tokenError(err error) error {
	var retrieve *oauth2.RetrieveError
	if errors.As(err, &retrieve) {
		msg := "the token endpoint answered"
		if retrieve.Response != nil {
			msg += " " + retrieve.Response.Status
		}
		if code := retrieve.ErrorCode; code != "" {
			msg += fmt.Sprintf(", error %q", code[:min(len(code), 64)])
		}
		return errors.New(msg)
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return fmt.Errorf("requesting the token endpoint: %w", urlErr.Err)
	}
	return err
}

// b64token reports whether s is an RFC 6750 b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func b64token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for _, c := range []byte(body) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~+/", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// scopeToken reports whether s is an RFC 6749 scope-token: 1*( %x21 /
// %x23-5B / %x5D-7E ).
func scopeToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// hasControl reports whether s holds a control character, tab included.
func hasControl(s string) bool {
	for _, c := range []byte(s) {
		if c < ' ' || c == 0x7f {
			return true
		}
	}
	return false
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
