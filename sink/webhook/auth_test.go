package webhook_test

import (
	"crypto/tls"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
)

// roundTripperFunc is an http.RoundTripper that is not an *http.Transport.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Every secret of these configurations holds "S3CRET": no error may show it.
func TestNewRefusesInvalidAuthHeadersAndTLS(t *testing.T) {
	const url = "https://partner.example/hooks"
	oauth := func(edit func(*webhook.OAuth2)) webhook.Auth {
		o := &webhook.OAuth2{TokenURL: "https://auth.example/token?k=S3CRET", ClientID: "relay", ClientSecret: "S3CRET-client"}
		edit(o)
		return webhook.Auth{OAuth2: o}
	}
	for _, tc := range []struct {
		name  string
		c     webhook.Config
		field string
	}{
		{"two kinds", webhook.Config{URL: url, Auth: webhook.Auth{Bearer: "S3CRET", Basic: &webhook.BasicAuth{User: "u", Password: "S3CRET"}}}, "Config.Auth"},
		{"bearer and oauth2", webhook.Config{URL: url, Auth: webhook.Auth{Bearer: "S3CRET", OAuth2: &webhook.OAuth2{}}}, "Config.Auth"},
		{"auth and URL user info", webhook.Config{URL: "https://u:S3CRET@partner.example/", Auth: webhook.Auth{Bearer: "S3CRET"}}, "Config.Auth"},
		{"empty basic", webhook.Config{URL: url, Auth: webhook.Auth{Basic: &webhook.BasicAuth{}}}, "Config.Auth.Basic"},
		{"colon in user", webhook.Config{URL: url, Auth: webhook.Auth{Basic: &webhook.BasicAuth{User: "a:S3CRET", Password: "S3CRET"}}}, "Config.Auth.Basic.User"},
		{"newline in password", webhook.Config{URL: url, Auth: webhook.Auth{Basic: &webhook.BasicAuth{User: "u", Password: "S3CRET\r\nX: y"}}}, "Config.Auth.Basic.Password"},
		{"space in bearer", webhook.Config{URL: url, Auth: webhook.Auth{Bearer: "S3CRET token"}}, "Config.Auth.Bearer"},
		{"newline in bearer", webhook.Config{URL: url, Auth: webhook.Auth{Bearer: "S3CRET\nX-Forged: 1"}}, "Config.Auth.Bearer"},
		{"only padding in bearer", webhook.Config{URL: url, Auth: webhook.Auth{Bearer: "=="}}, "Config.Auth.Bearer"},
		{"no token URL", webhook.Config{URL: url, Auth: oauth(func(o *webhook.OAuth2) { o.TokenURL = "" })}, "Config.Auth.OAuth2.TokenURL"},
		{"relative token URL", webhook.Config{URL: url, Auth: oauth(func(o *webhook.OAuth2) { o.TokenURL = "/token?S3CRET" })}, "Config.Auth.OAuth2.TokenURL"},
		{"no client id", webhook.Config{URL: url, Auth: oauth(func(o *webhook.OAuth2) { o.ClientID = "" })}, "Config.Auth.OAuth2.ClientID"},
		{"no client secret", webhook.Config{URL: url, Auth: oauth(func(o *webhook.OAuth2) { o.ClientSecret = "" })}, "Config.Auth.OAuth2.ClientSecret"},
		{"scope with a space", webhook.Config{URL: url, Auth: oauth(func(o *webhook.OAuth2) { o.Scopes = []string{"a", "b c"} })}, "Config.Auth.OAuth2.Scopes[1]"},
		{"empty scope", webhook.Config{URL: url, Auth: oauth(func(o *webhook.OAuth2) { o.Scopes = []string{""} })}, "Config.Auth.OAuth2.Scopes[0]"},
		{"grant_type param", webhook.Config{URL: url, Auth: oauth(func(o *webhook.OAuth2) { o.Params = map[string][]string{"grant_type": {"password"}} })}, "Config.Auth.OAuth2.Params"},
		{"client_secret param", webhook.Config{URL: url, Auth: oauth(func(o *webhook.OAuth2) { o.Params = map[string][]string{"Client_Secret": {"S3CRET"}} })}, "Config.Auth.OAuth2.Params"},
		{"scope param", webhook.Config{URL: url, Auth: oauth(func(o *webhook.OAuth2) { o.Params = map[string][]string{"scope": {"all"}} })}, "Config.Auth.OAuth2.Params"},
		{"unknown auth style", webhook.Config{URL: url, Auth: oauth(func(o *webhook.OAuth2) { o.AuthStyle = 9 })}, "Config.Auth.OAuth2.AuthStyle"},
		{"invalid header name", webhook.Config{URL: url, Headers: map[string]string{"X Key": "S3CRET"}}, "Config.Headers"},
		{"header value with a newline", webhook.Config{URL: url, Headers: map[string]string{"X-Key": "S3CRET\r\nX-Forged: 1"}}, "Config.Headers"},
		{"header given twice", webhook.Config{URL: url, Headers: map[string]string{"X-Key": "S3CRET", "x-key": "S3CRET"}}, "Config.Headers"},
		{"authorization header", webhook.Config{URL: url, Headers: map[string]string{"authorization": "Bearer S3CRET"}}, "Config.Auth"},
		{"content type header", webhook.Config{URL: url, Headers: map[string]string{"Content-Type": "text/plain"}}, "Config.Headers"},
		{"user agent header", webhook.Config{URL: url, Headers: map[string]string{"User-Agent": "me"}}, "Config.Headers"},
		{"postbox header", webhook.Config{URL: url, Headers: map[string]string{"Postbox-Tenant": "S3CRET"}}, "Config.Headers"},
		{"metadata signature header", webhook.Config{URL: url, Headers: map[string]string{"Postbox-Metadata-Signature": "S3CRET"}}, "Config.Headers"},
		{"signature header", webhook.Config{URL: url, Headers: map[string]string{"Webhook-Signature": "S3CRET"}}, "Config.Headers"},
		{"profile's signature header", webhook.Config{URL: url, HeaderNames: signature.SvixNames, Headers: map[string]string{"svix-id": "S3CRET"}}, "Config.Headers"},
		{"cookie header", webhook.Config{URL: url, Headers: map[string]string{"Cookie": "session=S3CRET"}}, "Config.Headers"},
		{"proxy header", webhook.Config{URL: url, Headers: map[string]string{"Proxy-Authorization": "Basic S3CRET"}}, "Config.Headers"},
		{"host header", webhook.Config{URL: url, Headers: map[string]string{"Host": "other.example"}}, "Config.Headers"},
		{"partial header names", webhook.Config{URL: url, HeaderNames: signature.HeaderNames{ID: "Acme-Id"}}, "Config.HeaderNames"},
		{"postbox header names", webhook.Config{URL: url, HeaderNames: signature.HeaderNames{ID: "Postbox-Id", Timestamp: "T", Signature: "S"}}, "Config.HeaderNames"},
		{"empty client certificate", webhook.Config{URL: url, ClientCertificate: &tls.Certificate{}}, "Config.ClientCertificate"},
		{"client certificate without key", webhook.Config{URL: url, ClientCertificate: &tls.Certificate{Certificate: [][]byte{{1}}}}, "Config.ClientCertificate"},
		{"certificate on another round tripper", webhook.Config{URL: url, ClientCertificate: testClientCertificate(t),
			Client: &http.Client{Transport: roundTripperFunc(http.DefaultTransport.RoundTrip)}}, "Config.ClientCertificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Secrets = []string{testSecret}
			_, err := webhook.New(tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("got %v, want an error naming %s", err, tc.field)
			}
			if strings.Contains(err.Error(), "S3CRET") {
				t.Fatalf("error %q reveals a secret", err)
			}
		})
	}
}

// Auth's String, and so a Config printed with %v, names the kind only.
func TestAuthStringHidesCredentials(t *testing.T) {
	for _, c := range []struct {
		auth webhook.Auth
		want string
	}{
		{webhook.Auth{}, "none"},
		{webhook.Auth{Basic: &webhook.BasicAuth{User: "S3CRET", Password: "S3CRET"}}, "basic"},
		{webhook.Auth{Bearer: "S3CRET"}, "bearer"},
		{webhook.Auth{OAuth2: &webhook.OAuth2{ClientSecret: "S3CRET"}}, "oauth2 client credentials"},
		{webhook.Auth{Bearer: "S3CRET", OAuth2: &webhook.OAuth2{}}, "invalid"},
	} {
		if got := c.auth.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}

func TestBasicAndBearerAreSent(t *testing.T) {
	e := newEndpoint(t, nil)
	for _, c := range []struct {
		auth webhook.Auth
		want string
	}{
		{webhook.Auth{Basic: &webhook.BasicAuth{User: "relay", Password: "pa ss:wörd"}}, "Basic cmVsYXk6cGEgc3M6d8O2cmQ="},
		{webhook.Auth{Basic: &webhook.BasicAuth{Password: "sk_live_only"}}, "Basic OnNrX2xpdmVfb25seQ=="},
		{webhook.Auth{Bearer: "eyJhbGciOi.J9-_~+/x=="}, "Bearer eyJhbGciOi.J9-_~+/x=="},
	} {
		s := newSink(t, webhook.Config{URL: e.URL, Auth: c.auth})
		if err := s.Publish(t.Context(), newMessage()); err != nil {
			t.Fatal(err)
		}
		got := e.received()
		if auth := got[len(got)-1].header.Values("Authorization"); len(auth) != 1 || auth[0] != c.want {
			t.Errorf("Authorization %q, want %q", auth, c.want)
		}
		if desc := s.String(); !strings.Contains(desc, c.auth.String()+" auth") || strings.Contains(desc, "only") || strings.Contains(desc, "J9") {
			t.Errorf("String() = %q, want the kind of auth and no credential", desc)
		}
	}
}

// Static headers reach the endpoint with every request and win over an
// event's headers of the same name, in any case; an event's other headers
// still go. An event cannot set the profile's signature headers either.
func TestStaticHeadersWinOverTheEvents(t *testing.T) {
	e := newEndpoint(t, nil)
	s := newSink(t, webhook.Config{
		URL:         e.URL,
		HeaderNames: signature.SvixNames,
		Headers:     map[string]string{"X-Api-Key": "k3y-value", "x-tenant": "acme"},
	})
	m := newMessage()
	m.Headers = map[string]string{
		"x-api-key": "forged", "X-TENANT": "other", "X-Trace": "kept",
		"svix-signature": "v1,forged", "Svix-Id": "forged",
	}
	if err := s.Publish(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	got := e.received()[0]
	assertHeaders(t, got.header, map[string]string{
		"X-Api-Key": "k3y-value", "X-Tenant": "acme", "X-Trace": "kept", "Svix-Id": m.ID.String(),
	})
	v, err := signature.NewProfileVerifier(signature.Svix, 0, testSecret)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Verify(got.header, got.body); err != nil {
		t.Errorf("the request does not verify: %v (svix-signature %q)", err, got.header.Values("Svix-Signature"))
	}
	if desc := s.String(); !strings.Contains(desc, "svix signatures") || !strings.Contains(desc, "2 static headers") || strings.Contains(desc, "k3y") {
		t.Errorf("String() = %q, want the profile and the number of static headers, never a value", desc)
	}
}

// A message's ContentType is the request's Content-Type; without one it is
// JSON. One that is not a valid header value fails its event alone,
// permanently, without a request.
func TestContentType(t *testing.T) {
	e := newEndpoint(t, nil)
	s := newSink(t, webhook.Config{URL: e.URL})
	for _, c := range []struct{ contentType, want string }{
		{"", postbox.ContentTypeJSON},
		{"application/cloudevents+json; charset=utf-8", "application/cloudevents+json; charset=utf-8"},
		{"text/plain", "text/plain"},
	} {
		m := newMessage()
		m.ContentType = c.contentType
		if err := s.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		got := e.received()
		if ct := got[len(got)-1].header.Values("Content-Type"); len(ct) != 1 || ct[0] != c.want {
			t.Errorf("ContentType %q: Content-Type %q, want %q", c.contentType, ct, c.want)
		}
	}
	for _, bad := range []string{"text/plain\r\nX-Forged: 1", "a\x00b", "  ", "\x7f"} {
		m := newMessage()
		m.ContentType = bad
		before := len(e.received())
		err := s.Publish(t.Context(), m)
		if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Permanent || !strings.Contains(err.Error(), "content type") {
			t.Errorf("ContentType %q: %v, want a permanent failure saying content type", bad, err)
		}
		if len(e.received()) != before {
			t.Errorf("ContentType %q: the request was sent", bad)
		}
	}
	if err := s.Publish(t.Context(), newMessage()); err != nil {
		t.Fatalf("the next event: %v", err)
	}
}

// Each profile signs under its names what its verifier and an independent
// HMAC computation accept.
func TestProfilesSignUnderTheirNames(t *testing.T) {
	e := newEndpoint(t, nil)
	for _, spec := range []string{"svix", "standard;prefix=acme", "standard;id=X-Acme-Id,timestamp=X-Acme-Ts,signature=X-Acme-Sig", "x-signature;prefix=acme"} {
		t.Run(spec, func(t *testing.T) {
			p, err := signature.ParseProfile(spec)
			if err != nil {
				t.Fatal(err)
			}
			secret := testSecret
			if p.Scheme == signature.XSignature {
				secret = rawSecret
			}
			s := newSink(t, webhook.Config{URL: e.URL, Secrets: []string{secret}, Scheme: p.Scheme, HeaderNames: p.Names})
			m := newMessage()
			m.Headers = map[string]string{p.HeaderNames().Signature: "forged"}
			if err := s.Publish(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			all := e.received()
			got := all[len(all)-1]
			n := p.HeaderNames()
			ts := got.header.Get(n.Timestamp)
			want := standardSignature(testKey, m.ID.String(), ts, m.Payload)
			if p.Scheme == signature.XSignature {
				want = xSignature(rawSecret, ts, m.Payload)
			}
			assertHeaders(t, got.header, map[string]string{n.ID: m.ID.String(), n.Signature: want})
			id, tsName, sigName := p.Scheme.HeaderNames()
			for _, own := range []string{id, tsName, sigName} {
				if v := got.header.Values(own); v != nil {
					t.Errorf("%s: %q sent beside the profile's names", own, v)
				}
			}
			v, err := signature.NewProfileVerifier(p, 0, secret)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := v.Verify(got.header, got.body); err != nil {
				t.Errorf("Verify: %v", err)
			}
			if _, err := v.VerifyMetadata(got.header); err != nil {
				t.Errorf("VerifyMetadata: %v", err)
			}
		})
	}
}

// The URL kind's Signature option is a profile.
func TestURLOpenTakesAProfile(t *testing.T) {
	e := newEndpoint(t, nil)
	s, err := webhook.URL.Open(t.Context(), parseURL(t, e.URL), sink.URLOptions{Secrets: []string{testSecret}, Signature: "svix"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(t.Context(), newMessage()); err != nil {
		t.Fatal(err)
	}
	if got := e.received()[0].header; got.Get("Svix-Signature") == "" || got.Get("Webhook-Signature") != "" {
		t.Errorf("headers %v, want svix-* signature headers", got)
	}
	_, err = webhook.URL.Open(t.Context(), parseURL(t, e.URL), sink.URLOptions{Secrets: []string{testSecret}, Signature: "standard;prefix=postbox"})
	var refused *sink.OptionError
	if !errors.As(err, &refused) || refused.Option != "Signature" || !errors.Is(err, signature.ErrInvalidProfile) {
		t.Errorf("a profile with postbox names: %v, want an OptionError for Signature", err)
	}
}
