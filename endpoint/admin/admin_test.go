package admin_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/net/http/httpguts"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/store"
)

func errorsIsInvalid(err error) bool { return errors.Is(err, admin.ErrInvalid) }

// mark is in every secret the refusals are given: no message may hold it.
const mark = "s3cr3t-MARK"

// publicURL is a webhook's URL at a public address (no request is made to
// it): the SSRF check at registration passes without a name to resolve.
const publicURL = "https://93.184.215.14/hooks/orders"

// A webhook added without a secret gets a new whsec_, returned once:
// stored sealed (the row holds no clear secret, its sealed data not the
// secret's text), shown as its fingerprint only; it opens with the
// keyring.
func TestCreateWebhookGeneratesASealedSecret(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		created, err := a.Create(ctx, admin.Settings{Name: "orders", URL: publicURL, Types: []string{"order.*"}, Filter: "payload.total > 100",
			Envelope: "cloudevents", CESource: "/shop/orders", Signature: "svix", RatePerSecond: 20},
			endpoint.Credentials{Bearer: "tok-" + mark, Headers: map[string]string{"x-api-key": "key-" + mark}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(created.Secret, "whsec_") || len(created.Warnings) != 0 {
			t.Fatalf("Create: secret %q, warnings %q: want a new whsec_ and no warning", created.Secret, created.Warnings)
		}
		v := created.Endpoint
		want := admin.Settings{Name: "orders", URL: publicURL, Types: []string{"order.*"}, Filter: "payload.total > 100",
			Envelope: "cloudevents", CESource: "/shop/orders", Signature: "svix", RatePerSecond: 20, Concurrency: admin.ConcurrencyDefault}
		if !sameSettings(v.Settings, want) || v.State != store.EndpointEnabled || !v.Sealed || v.SecretsKey == "" ||
			v.SecretFingerprint != endpoint.Fingerprint(created.Secret) || !slices.Equal(v.Auth, []string{"bearer", "headers"}) {
			t.Errorf("View after Create = %+v, want %+v, enabled, sealed, the secret's fingerprint", v, want)
		}
		e, err := s.EndpointGet(ctx, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if e.Secret != "" || bytes.Contains(e.Sealed.Data, []byte(created.Secret)) || bytes.Contains(e.Sealed.Data, []byte(mark)) {
			t.Errorf("the stored row holds a secret in clear")
		}
		c, err := a.Open(e)
		if err != nil {
			t.Fatal(err)
		}
		if c.Secret != created.Secret || c.Bearer != "tok-"+mark || c.Headers["X-Api-Key"] != "key-"+mark {
			t.Errorf("opened credentials are not those created (headers under their canonical names): %v", c.Headers)
		}
		got, err := a.Get(ctx, v.ID)
		if err != nil || got.Deliveries == nil || got.UpdatedAt.IsZero() {
			t.Errorf("Get = %+v, %v: want the view with its deliveries", got, err)
		}
	})
}

// A broker's endpoint: the user and password of its URL move into the
// sealed credentials, the stored URL has none; it has no signing secret.
func TestCreateBrokerEndpointSealsTheURLCredentials(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		created, err := a.Create(ctx, admin.Settings{Name: "stream", URL: "nats://natsuser:pw-" + mark + "@127.0.0.1:4222?subject=shop.{event_type}"}, endpoint.Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		v := created.Endpoint
		if created.Secret != "" || v.SecretFingerprint != "" || strings.Contains(v.URL, mark) || strings.Contains(v.URL, "natsuser") {
			t.Errorf("broker endpoint: secret %q, view %+v: want no secret and a URL without user information", created.Secret, v)
		}
		e, err := a.Find(ctx, "stream")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(e.URL, "@") {
			t.Errorf("stored URL %s holds user information", e.URL)
		}
		c, err := a.Open(e)
		if err != nil || c.URLUser != "natsuser" || c.URLPassword != "pw-"+mark {
			t.Errorf("sealed credentials: user %q, %v: want the URL's user and password", c.URLUser, err)
		}
	})
}

// Every class of refusal is a FieldError naming its setting, with no
// secret in its message, and writes nothing; Check refuses each alike.
func TestCreateRefusals(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		broker := "nats://127.0.0.1:4222?subject=shop.{event_type}"
		for _, c := range []struct {
			name    string
			s       admin.Settings
			c       endpoint.Credentials
			setting string
			want    string
		}{
			{"scheme", admin.Settings{URL: "ftp://x/" + mark}, endpoint.Credentials{}, admin.SettingURL, `url: unknown scheme "ftp"`},
			{"not absolute", admin.Settings{URL: "https:/hook"}, endpoint.Credentials{}, admin.SettingURL, "want an absolute http:// or https:// URL"},
			{"loopback", admin.Settings{URL: "http://127.0.0.1:9/hook?token=" + mark}, endpoint.Credentials{}, admin.SettingURL,
				"url: 127.0.0.1 is loopback, which the relay's SSRF guard refuses: give allow_private"},
			{"metadata", admin.Settings{URL: "http://169.254.169.254/latest/"}, endpoint.Credentials{}, admin.SettingURL, "169.254.169.254 is link-local (cloud metadata)"},
			{"unspecified", admin.Settings{URL: "http://0.0.0.0:9/", AllowPrivate: true}, endpoint.Credentials{}, admin.SettingURL, "no endpoint can be reached there"},
			{"types", admin.Settings{URL: publicURL, Types: []string{"[a"}}, endpoint.Credentials{}, admin.SettingTypes, "types: "},
			{"concurrency", admin.Settings{URL: publicURL, Concurrency: -1}, endpoint.Credentials{}, admin.SettingConcurrency, "concurrency -1: at least 1"},
			{"rate", admin.Settings{URL: publicURL, RatePerSecond: -1}, endpoint.Credentials{}, admin.SettingRate, "rate_per_second -1"},
			{"filter", admin.Settings{URL: publicURL, Filter: "payload.total >"}, endpoint.Credentials{}, admin.SettingFilter, "filter: 1:16: "},
			{"filter line", admin.Settings{URL: publicURL, Filter: "event_type == 'a' &&\n  nosuch.x"}, endpoint.Credentials{}, admin.SettingFilter, "filter: 2:3: "},
			{"envelope", admin.Settings{URL: publicURL, Envelope: "xml"}, endpoint.Credentials{}, admin.SettingEnvelope, `envelope "xml": want raw, standard`},
			{"binary on nats", admin.Settings{URL: broker, Envelope: "cloudevents-binary"}, endpoint.Credentials{}, admin.SettingEnvelope,
				"envelope cloudevents-binary: NATS has no CloudEvents binary mode"},
			{"source", admin.Settings{URL: publicURL, CESource: "/shop"}, endpoint.Credentials{}, admin.SettingCESource, "only envelope cloudevents and cloudevents-binary have a source"},
			{"signature", admin.Settings{URL: publicURL, Signature: "hmac-sha1"}, endpoint.Credentials{}, admin.SettingSignature, "signature: "},
			{"signature on broker", admin.Settings{URL: broker, Signature: "svix"}, endpoint.Credentials{}, admin.SettingSignature, "a broker's endpoint signs nothing"},
			{"secret on broker", admin.Settings{URL: broker}, endpoint.Credentials{Secret: "whsec_" + mark}, admin.SettingSecret, "secret: a broker's endpoint signs nothing"},
			{"secret", admin.Settings{URL: publicURL}, endpoint.Credentials{Secret: "whsec_" + mark}, admin.SettingSecret, "secret: "},
			{"tls on http", admin.Settings{URL: "http://93.184.215.14/hook"}, endpoint.Credentials{TLS: &endpoint.ClientTLS{CAPEM: "ca " + mark}}, admin.SettingTLS,
				"tls need an https:// URL"},
			{"tls on broker", admin.Settings{URL: broker}, endpoint.Credentials{TLS: &endpoint.ClientTLS{CAPEM: "ca " + mark}}, admin.SettingTLS, "this endpoint is a broker's"},
			{"bad CA", admin.Settings{URL: publicURL}, endpoint.Credentials{TLS: &endpoint.ClientTLS{CAPEM: "ca " + mark}}, admin.SettingTLS, "tls: "},
			{"auth on broker", admin.Settings{URL: broker}, endpoint.Credentials{Bearer: mark}, admin.SettingBearer,
				"a bearer token (bearer) authenticates a webhook's requests (http:// or https://), and this endpoint is a broker's"},
			{"two schemes", admin.Settings{URL: publicURL}, endpoint.Credentials{Bearer: mark, Basic: &endpoint.BasicAuth{User: "u", Password: mark}},
				admin.SettingAuth, "at most one of basic, bearer and oauth2"},
			{"basic and user information", admin.Settings{URL: "https://u:" + mark + "@93.184.215.14/"}, endpoint.Credentials{Basic: &endpoint.BasicAuth{User: "a", Password: mark}},
				admin.SettingBasic, "basic and a url with user information are both Basic authentication"},
			{"user information and bearer", admin.Settings{URL: "https://u:" + mark + "@93.184.215.14/"}, endpoint.Credentials{Bearer: mark}, admin.SettingURL,
				"url: its user information is Basic authentication, and the endpoint has another: give one (auth.none removes the other)"},
			{"bearer token", admin.Settings{URL: publicURL}, endpoint.Credentials{Bearer: mark + " x"}, admin.SettingBearer, "bearer is not an RFC 6750 token"},
			{"oauth2 params", admin.Settings{URL: publicURL}, endpoint.Credentials{OAuth2: &endpoint.OAuth2{TokenURL: "https://93.184.215.14/token", ClientID: "id",
				ClientSecret: mark, Params: map[string][]string{"grant_type": {"password"}}}}, admin.SettingOAuth2Params, "oauth2.params cannot set"},
			{"reserved header", admin.Settings{URL: publicURL}, endpoint.Credentials{Headers: map[string]string{"postbox-event-id": mark}}, admin.SettingHeaders,
				"headers cannot set Postbox-Event-Id"},
			{"content type", admin.Settings{URL: publicURL}, endpoint.Credentials{Headers: map[string]string{"Content-Type": mark}}, admin.SettingHeaders, "headers cannot set Content-Type"},
			{"webhook's header", admin.Settings{URL: publicURL}, endpoint.Credentials{Headers: map[string]string{"Authorization": "Bearer " + mark}}, admin.SettingHeaders,
				"headers cannot set Authorization"},
			{"header name", admin.Settings{URL: publicURL}, endpoint.Credentials{Headers: map[string]string{"X-Key=" + mark: "v"}}, admin.SettingHeaders,
				"a name is not an HTTP header name"},
			{"header twice", admin.Settings{URL: publicURL}, endpoint.Credentials{Headers: map[string]string{"X-A": mark, "x-a": mark}}, admin.SettingHeaders, "headers X-A is given twice"},
			{"header value", admin.Settings{URL: publicURL}, endpoint.Credentials{Headers: map[string]string{"X-A": mark + "\r\nX-B: 1"}}, admin.SettingHeaders,
				"headers X-A: the value holds a control character"},
			{"not UTF-8", admin.Settings{URL: publicURL}, endpoint.Credentials{Basic: &endpoint.BasicAuth{User: "u", Password: "\xff" + mark}}, admin.SettingBasic,
				"basic: not UTF-8 text (not shown)"},
			{"empty header", admin.Settings{URL: publicURL}, endpoint.Credentials{Headers: map[string]string{"X-A": ""}}, admin.SettingHeaders, "headers X-A: the value is empty"},
		} {
			// Check refuses alike, writing nothing.
			for op, do := range map[string]func() error{
				"Check":  func() error { _, err := a.Check(ctx, c.s, c.c); return err },
				"Create": func() error { _, err := a.Create(ctx, c.s, c.c); return err },
			} {
				err := do()
				if err == nil {
					t.Errorf("%s: %s succeeded", c.name, op)
					continue
				}
				fe := fieldError(t, err)
				if fe.Setting != c.setting || !strings.Contains(fe.Message, c.want) || strings.Contains(fe.Message, mark) {
					t.Errorf("%s: %s: FieldError{%q, %q}, want setting %q and %q, without the secret", c.name, op, fe.Setting, fe.Message, c.setting, c.want)
				}
			}
		}
		if all, err := a.List(ctx); err != nil || len(all) != 0 {
			t.Errorf("refused Checks and Creates wrote %d endpoints, %v", len(all), err)
		}
	})
}

// Config.Names names the settings in messages: the command line's flags.
func TestMessagesNameSettingsByConfigNames(t *testing.T) {
	flags := map[string]string{admin.SettingURL: "--url", admin.SettingAllowPrivate: "--allow-private", admin.SettingTLS: "--tls-*",
		admin.SettingRemoveTLS: "--no-tls", admin.SettingHeaders: "--header"}
	a := newAdmin(t, sqliteStore(t), func(c *admin.Config) {
		c.Names = func(s string) string { return flags[s] }
	})
	ctx := context.Background()
	_, err := a.Create(ctx, admin.Settings{URL: "http://10.1.2.3/hook"}, endpoint.Credentials{})
	if fe := fieldError(t, err); fe.Message != "--url: 10.1.2.3 is private (RFC 1918), which the relay's SSRF guard refuses: give --allow-private to let this endpoint reach private addresses" {
		t.Errorf("message %q", fe.Message)
	}
	_, err = a.Create(ctx, admin.Settings{URL: publicURL}, endpoint.Credentials{Headers: map[string]string{"Content-Type": "x"}})
	if fe := fieldError(t, err); !strings.HasPrefix(fe.Message, "--header cannot set Content-Type") {
		t.Errorf("message %q", fe.Message)
	}
	created, err := a.Create(ctx, admin.Settings{URL: publicURL}, endpoint.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Update(ctx, created.Endpoint.ID, admin.Change{URL: ptr("http://93.184.215.14/"), Credentials: admin.CredentialChange{SetTLS: true, TLS: &endpoint.ClientTLS{CAPEM: "x"}}})
	if fe := fieldError(t, err); fe.Message != "--tls-* need an https:// URL: this endpoint's is http:// (--no-tls removes it)" {
		t.Errorf("message %q", fe.Message)
	}
}

// A host that does not resolve now is accepted, with a warning: the
// relay's guard checks its addresses at every connection.
func TestCreateWarnsOfAHostThatDoesNotResolve(t *testing.T) {
	noDNS := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no name server in this test")
	}}
	a := newAdmin(t, sqliteStore(t), func(c *admin.Config) { c.Resolver = noDNS })
	created, err := a.Create(context.Background(), admin.Settings{URL: "https://hooks.partner.example/x"}, endpoint.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Warnings) != 1 || !strings.Contains(created.Warnings[0], "url: host hooks.partner.example does not resolve now") {
		t.Errorf("warnings %q", created.Warnings)
	}
}

// Update changes the settings given, checks them as Create does, and
// re-seals the credentials it is given (the others kept).
func TestUpdateSettingsAndCredentials(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		created, err := a.Create(ctx, admin.Settings{Name: "partner", URL: publicURL, Types: []string{"order.*"}},
			endpoint.Credentials{Bearer: "tok-" + mark, Headers: map[string]string{"X-First": "one"}})
		if err != nil {
			t.Fatal(err)
		}
		id := created.Endpoint.ID
		u, err := a.Update(ctx, id, admin.Change{RatePerSecond: ptr(5.0), Filter: ptr(`event_type == "order.created"`), Concurrency: ptr(3),
			Envelope: ptr("cloudevents-binary"), CESource: ptr("/shop"), Name: ptr("partner")})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(u.Changed, []string{admin.SettingFilter, admin.SettingEnvelope, admin.SettingRate, admin.SettingConcurrency}) {
			t.Errorf("Changed = %q", u.Changed)
		}
		v := u.Endpoint
		if v.RatePerSecond != 5 || v.Concurrency != 3 || v.Filter != `event_type == "order.created"` || v.Envelope != "cloudevents-binary" || v.CESource != "/shop" {
			t.Errorf("after Update: %+v", v)
		}
		if _, err := a.Update(ctx, id, admin.Change{Filter: ptr("payload.total >")}); fieldError(t, err).Setting != admin.SettingFilter {
			t.Errorf("a bad filter: %v", err)
		}
		if _, err := a.Update(ctx, id, admin.Change{URL: ptr("http://127.0.0.1:9/")}); fieldError(t, err).Setting != admin.SettingURL {
			t.Errorf("a loopback URL: %v", err)
		}
		if v, _ := a.Get(ctx, id); v.URL != publicURL {
			t.Errorf("a refused update changed the URL to %s", v.URL)
		}

		u, err = a.Update(ctx, id, admin.Change{Credentials: admin.CredentialChange{SetHeaders: true, Headers: map[string]string{"x-second": "two-" + mark}}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(u.Changed, []string{admin.SettingHeaders}) {
			t.Errorf("Changed = %q", u.Changed)
		}
		c := open(t, a, s, id)
		if c.Bearer != "tok-"+mark || len(c.Headers) != 1 || c.Headers["X-Second"] != "two-"+mark || c.Secret != created.Secret {
			t.Errorf("after SetHeaders: headers %v (want X-Second alone), bearer and secret kept", slices.Sorted(maps.Keys(c.Headers)))
		}
		if _, err := a.Update(ctx, id, admin.Change{Credentials: admin.CredentialChange{SetAuth: true, Basic: &endpoint.BasicAuth{User: "bob", Password: mark}}}); err != nil {
			t.Fatal(err)
		}
		if c := open(t, a, s, id); c.Bearer != "" || c.Basic == nil || c.Basic.User != "bob" {
			t.Errorf("after SetAuth Basic: %v", c)
		}
		// To a broker's URL: the webhook's authentication must go with it.
		broker := "nats://user:pw-" + mark + "@127.0.0.1:4222?subject=a.b"
		_, err = a.Update(ctx, id, admin.Change{URL: &broker, Envelope: ptr("cloudevents")})
		if fe := fieldError(t, err); fe.Setting != admin.SettingBasic || !strings.Contains(fe.Message, "(auth.none removes it)") || strings.Contains(fe.Message, mark) {
			t.Errorf("to a broker with Basic authentication: %q", fe.Message)
		}
		if _, err := a.Update(ctx, id, admin.Change{URL: &broker, Envelope: ptr("cloudevents"), Credentials: admin.CredentialChange{SetAuth: true}}); err != nil {
			t.Fatal(err)
		}
		e, err := s.EndpointGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if c := open(t, a, s, id); c.Basic != nil || c.URLUser != "user" || c.URLPassword != "pw-"+mark || strings.Contains(e.URL, "pw-") || c.Secret == "" {
			t.Errorf("after the broker URL with auth removed: url %s, credentials %v", e.URL, c)
		}
	})
}

// Two updates of different credentials at once both land: each re-seals
// with a compare-and-swap, reading again the credentials another wrote.
func TestUpdatesOfCredentialsAtOnceLoseNothing(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		created, err := a.Create(ctx, admin.Settings{URL: publicURL}, endpoint.Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		id := created.Endpoint.ID
		changes := []admin.CredentialChange{
			{SetHeaders: true, Headers: map[string]string{"X-Tenant": "acme"}},
			{SetAuth: true, Bearer: "token"},
		}
		var wg sync.WaitGroup
		errs := make([]error, len(changes))
		for i, ch := range changes {
			wg.Go(func() { _, errs[i] = a.Update(ctx, id, admin.Change{Credentials: ch}) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if c := open(t, a, s, id); c.Headers["X-Tenant"] != "acme" || c.Bearer != "token" || c.Secret != created.Secret {
			t.Errorf("after two updates at once: headers %v, bearer set %v, secret kept %v", c.Headers, c.Bearer != "", c.Secret == created.Secret)
		}
	})
}

// RotateSecret: a new secret (generated or given, checked against the
// profile); the previous one signs until the grace period ends.
func TestRotateSecretWithGrace(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		a := newAdmin(t, s, func(c *admin.Config) { c.Now = func() time.Time { return now } })
		created, err := a.Create(ctx, admin.Settings{URL: publicURL}, endpoint.Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		id := created.Endpoint.ID
		r, err := a.RotateSecret(ctx, id, "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r.Secret, "whsec_") || r.Fingerprint != endpoint.Fingerprint(r.Secret) || !r.PreviousUntil.Equal(now.Add(time.Hour)) || r.Key == "" {
			t.Errorf("Rotated = fingerprint %s, until %v, key %s", r.Fingerprint, r.PreviousUntil, r.Key)
		}
		v, err := a.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if v.SecretFingerprint != r.Fingerprint || v.PreviousSecretFingerprint != endpoint.Fingerprint(created.Secret) || v.PreviousSecretUntil == nil {
			t.Errorf("View after rotation: %s, previous %s until %v", v.SecretFingerprint, v.PreviousSecretFingerprint, v.PreviousSecretUntil)
		}
		e, _ := s.EndpointGet(ctx, id)
		c := open(t, a, s, id)
		if signing := c.Signing(e, now); !slices.Equal(signing, []string{r.Secret, created.Secret}) {
			t.Errorf("during the grace period %d secrets sign, want the new and the previous", len(signing))
		}
		if signing := c.Signing(e, now.Add(2*time.Hour)); !slices.Equal(signing, []string{r.Secret}) {
			t.Errorf("after the grace period %d secrets sign, want the new alone", len(signing))
		}

		given, err := signature.GenerateSecret()
		if err != nil {
			t.Fatal(err)
		}
		r, err = a.RotateSecret(ctx, id, given, 0)
		if err != nil || r.Secret != "" || r.Fingerprint != endpoint.Fingerprint(given) {
			t.Errorf("RotateSecret of a given secret: %+v, %v", r.Fingerprint, err)
		}
		if v, _ := a.Get(ctx, id); v.PreviousSecretFingerprint != "" {
			t.Errorf("grace 0: the previous secret still shown")
		}
		if _, err := a.RotateSecret(ctx, id, "whsec_"+mark, 0); fieldError(t, err).Setting != admin.SettingSecret || strings.Contains(err.Error(), mark) {
			t.Errorf("a bad secret: %v", err)
		}
		if _, err := a.RotateSecret(ctx, id, "", -time.Second); fieldError(t, err).Setting != admin.SettingGrace {
			t.Errorf("a negative grace: %v", err)
		}
	})
}

// SetState, Delete, Find by id or name; unknown ids are ErrNotFound and
// store.ErrEndpointNotFound both.
func TestStateDeleteAndFind(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		one, err := a.Create(ctx, admin.Settings{Name: "twice", URL: publicURL}, endpoint.Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Create(ctx, admin.Settings{Name: "twice", URL: publicURL}, endpoint.Credentials{}); err != nil {
			t.Fatal(err)
		}
		solo, err := a.Create(ctx, admin.Settings{Name: "solo", URL: publicURL}, endpoint.Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		if e, err := a.Find(ctx, "solo"); err != nil || e.ID != solo.Endpoint.ID {
			t.Errorf("Find by name: %v, %v", e.ID, err)
		}
		if e, err := a.Find(ctx, one.Endpoint.ID.String()); err != nil || e.ID != one.Endpoint.ID {
			t.Errorf("Find by id: %v, %v", e.ID, err)
		}
		if _, err := a.Find(ctx, "twice"); !errors.Is(err, admin.ErrAmbiguous) || !strings.Contains(err.Error(), `2 endpoints are named "twice"`) {
			t.Errorf("Find of an ambiguous name: %v", err)
		}
		if _, err := a.Find(ctx, "nobody"); !errors.Is(err, admin.ErrNotFound) || !errors.Is(err, store.ErrEndpointNotFound) || err.Error() != `no endpoint named "nobody"` {
			t.Errorf("Find of an unknown name: %v", err)
		}

		id := solo.Endpoint.ID
		if err := a.SetState(ctx, id, store.EndpointDisabled); err != nil {
			t.Fatal(err)
		}
		if v, _ := a.Get(ctx, id); v.State != store.EndpointDisabled {
			t.Errorf("after SetState disabled: %s", v.State)
		}
		if err := a.SetState(ctx, id, store.EndpointAutoDisabled); fieldError(t, err).Setting != admin.SettingState {
			t.Errorf("SetState auto-disabled: %v", err)
		}
		if err := a.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		unknown := uuid.New()
		for name, err := range map[string]error{
			"Get of a removed endpoint": func() error { _, err := a.Get(ctx, id); return err }(),
			"Find of an unknown id":     func() error { _, err := a.Find(ctx, unknown.String()); return err }(),
			"Delete":                    a.Delete(ctx, unknown),
			"SetState":                  a.SetState(ctx, unknown, store.EndpointEnabled),
			"Update":                    func() error { _, err := a.Update(ctx, unknown, admin.Change{RatePerSecond: ptr(1.0)}); return err }(),
			"RotateSecret":              func() error { _, err := a.RotateSecret(ctx, unknown, "", 0); return err }(),
			"Test":                      func() error { _, err := a.Test(ctx, unknown, time.Second); return err }(),
			"Attempts":                  func() error { _, err := a.Attempts(ctx, unknown, 10); return err }(),
		} {
			if !errors.Is(err, admin.ErrNotFound) || !errors.Is(err, store.ErrEndpointNotFound) {
				t.Errorf("%s: %v, want admin.ErrNotFound and store.ErrEndpointNotFound", name, err)
			}
		}
		if attempts, err := a.Attempts(ctx, one.Endpoint.ID, 10); err != nil || attempts == nil || len(attempts) != 0 {
			t.Errorf("Attempts of an endpoint never tried: %v, %v; want none, not nil", attempts, err)
		}
		if all, _ := a.List(ctx); len(all) != 2 {
			t.Errorf("List after Delete: %d endpoints, want 2", len(all))
		}
	})
}

// Without a keyring: what needs no secret works, the rest is
// endpoint.ErrNoKeyring.
func TestWithoutKeyring(t *testing.T) {
	s := sqliteStore(t)
	ctx := context.Background()
	created, err := newAdmin(t, s, nil).Create(ctx, admin.Settings{URL: publicURL}, endpoint.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Endpoint.ID
	a := newAdmin(t, s, func(c *admin.Config) { c.Keyring = nil })
	if _, err := a.Update(ctx, id, admin.Change{RatePerSecond: ptr(2.0), Types: &[]string{"order.*"}}); err != nil {
		t.Errorf("Update of settings without a keyring: %v", err)
	}
	if err := a.SetState(ctx, id, store.EndpointDisabled); err != nil {
		t.Errorf("SetState without a keyring: %v", err)
	}
	for name, err := range map[string]error{
		"Create": func() error {
			_, err := a.Create(ctx, admin.Settings{URL: publicURL}, endpoint.Credentials{})
			return err
		}(),
		"RotateSecret": func() error { _, err := a.RotateSecret(ctx, id, "", 0); return err }(),
		"Test":         func() error { _, err := a.Test(ctx, id, time.Second); return err }(),
		"Update auth": func() error {
			_, err := a.Update(ctx, id, admin.Change{Credentials: admin.CredentialChange{SetAuth: true, Bearer: "x"}})
			return err
		}(),
		"Update signature": func() error { _, err := a.Update(ctx, id, admin.Change{Signature: ptr("svix")}); return err }(),
	} {
		if !errors.Is(err, endpoint.ErrNoKeyring) {
			t.Errorf("%s without a keyring: %v, want endpoint.ErrNoKeyring", name, err)
		}
	}
}

// Test sends postbox.test through the endpoint's own sink: signed with
// its secret (the receiver verifies it), and through the SSRF guard,
// which lets it reach 127.0.0.1 only when the endpoint allows private
// addresses. An answer 500 is a *TestError.
func TestTestSendsASignedEvent(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		secret, err := signature.GenerateSecret()
		if err != nil {
			t.Fatal(err)
		}
		ok := receiver.New(t, secret, nil)
		created, err := a.Create(ctx, admin.Settings{URL: ok.URL + "/hook", AllowPrivate: true}, endpoint.Credentials{Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		id := created.Endpoint.ID
		tested, err := a.Test(ctx, id, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got := ok.Accepted()
		if len(got) != 1 || got[0].EventType != admin.TestEventType || got[0].ID != tested.EventID.String() || got[0].AggregateID != id.String() || ok.BadSignatures() != 0 {
			t.Errorf("the receiver accepted %+v, %d bad signatures: want the test event %s, signed", got, ok.BadSignatures(), tested.EventID)
		}

		// The guard: the same endpoint without the allowance is refused
		// at connect time.
		if _, err := s.EndpointUpdate(ctx, endpointWith(t, s, id, func(e *store.Endpoint) { e.AllowPrivate = false })); err != nil {
			t.Fatal(err)
		}
		var te *admin.TestError
		if _, err := a.Test(ctx, id, 5*time.Second); !errors.As(err, &te) || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("Test to 127.0.0.1 without the allowance: %v, want the guard's refusal", err)
		}
		if len(ok.Accepted()) != 1 {
			t.Errorf("the guard let a request through")
		}

		failing := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
			return http.StatusInternalServerError
		})
		created, err = a.Create(ctx, admin.Settings{URL: failing.URL + "/hook", AllowPrivate: true}, endpoint.Credentials{Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Test(ctx, created.Endpoint.ID, 5*time.Second)
		if !errors.As(err, &te) || !te.Opened || !strings.Contains(err.Error(), "500") || failing.Attempts(te.EventID.String()) != 1 {
			t.Errorf("Test of an endpoint answering 500: %v, want a *TestError after one verified request", err)
		}
	})
}

// endpointWith is endpoint id as stored, tweaked.
func endpointWith(t *testing.T, s store.Endpoints, id uuid.UUID, tweak func(*store.Endpoint)) store.Endpoint {
	t.Helper()
	e, err := s.EndpointGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	tweak(&e)
	return e
}

// open opens endpoint id's credentials as stored.
func open(t *testing.T, a *admin.Admin, s store.Endpoints, id uuid.UUID) endpoint.Credentials {
	t.Helper()
	e, err := s.EndpointGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Open(e)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

func sameSettings(a, b admin.Settings) bool {
	return a.Name == b.Name && a.URL == b.URL && slices.Equal(a.Types, b.Types) && a.Filter == b.Filter && a.Envelope == b.Envelope &&
		a.CESource == b.CESource && a.Signature == b.Signature && a.RatePerSecond == b.RatePerSecond && a.Concurrency == b.Concurrency &&
		a.Shadow == b.Shadow && a.AllowPrivate == b.AllowPrivate
}

// Create's static headers, over any name and value: a refusal never holds
// the value (a secret), and what is sealed is a set of canonical HTTP
// header names, each once in any case, whose values are those given,
// not empty, without control characters but tab.
func FuzzCreateHeaders(f *testing.F) {
	for _, seed := range [][2]string{
		{"X-Api-Key", " abc"}, {"x-api-key", "abc\r\nInjected: 1"}, {"Bad Name", "v"}, {"X-A", ""}, {"", "v"},
		{"X-A=b", "v"}, {"X-Ä", "v"}, {"X-A", "\x00"}, {"X-A", "\tv\t"}, {"Authorization", "Bearer x"}, {"ce-id", "1"},
	} {
		f.Add(seed[0], seed[1], false)
		f.Add(seed[0], seed[1], true)
	}
	s := sqliteStore(f)
	a := newAdmin(f, s, nil)
	f.Fuzz(func(t *testing.T, name, value string, twice bool) {
		if strings.Contains(name, "S3cr") {
			t.Skip()
		}
		secret := "S3cr" + value + "X9q"
		headers := map[string]string{name: secret}
		if twice {
			headers[strings.ToLower(name)] = secret
		}
		created, err := a.Create(context.Background(), admin.Settings{URL: publicURL}, endpoint.Credentials{Headers: headers})
		if err != nil {
			if strings.Contains(err.Error(), "S3cr") {
				t.Fatalf("headers %q: the error shows the value: %v", slices.Collect(maps.Keys(headers)), err)
			}
			return
		}
		c := open(t, a, s, created.Endpoint.ID)
		if len(c.Headers) != 1 {
			t.Fatalf("headers %q sealed as %d headers: want one name once", slices.Collect(maps.Keys(headers)), len(c.Headers))
		}
		for n, v := range c.Headers {
			if n != http.CanonicalHeaderKey(name) || !httpguts.ValidHeaderFieldName(n) {
				t.Fatalf("header %q sealed under the name %q", name, n)
			}
			if v != secret || strings.ContainsAny(v, "\r\n\x00") || !httpguts.ValidHeaderFieldValue(v) {
				t.Fatalf("header %q: the value %q sealed", name, v)
			}
		}
	})
}
