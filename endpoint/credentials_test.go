package endpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/store"
)

// bothEndpointStores runs test on a fresh PostgreSQL store and a fresh
// SQLite one.
func bothEndpointStores(t *testing.T, test func(t *testing.T, s store.Endpoints)) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		test(t, pgStore(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		test(t, sqliteDriver(t))
	})
}

func mustKeyring(t *testing.T, keys ...string) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(strings.Join(keys, ","))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// allCredentials has a secret in every field that can hold one.
func allCredentials() endpoint.Credentials {
	return endpoint.Credentials{
		Secret: "whsec_c2VjcmV0LWN1cnJlbnQtc2lnbmluZy1rZXktMQ", PreviousSecret: "whsec_c2VjcmV0LXByZXZpb3VzLXNpZ25pbmcta2V5LTI",
		Headers: map[string]string{"X-Api-Key": "header-secret-value-3"},
		OAuth2: &endpoint.OAuth2{TokenURL: "https://auth.example/token", ClientID: "client-4", ClientSecret: "oauth-client-secret-5",
			Scopes: []string{"events:write"}},
		TLS:     &endpoint.ClientTLS{CertPEM: "-----BEGIN CERTIFICATE-----\ncert\n", KeyPEM: "-----BEGIN PRIVATE KEY-----\nprivate-key-6\n"},
		URLUser: "user-7", URLPassword: "url-password-8",
	}
}

// secretValues are the secret values of allCredentials.
var secretValues = []string{"c2VjcmV0LWN1cnJlbnQtc2lnbmluZy1rZXktMQ", "c2VjcmV0LXByZXZpb3VzLXNpZ25pbmcta2V5LTI",
	"header-secret-value-3", "oauth-client-secret-5", "private-key-6", "url-password-8"}

func TestSealedCredentialsRoundTripAndStoreNoSecretInClear(t *testing.T) {
	t.Parallel()
	bothEndpointStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		k := mustKeyring(t, keyring.GenerateKey())
		e := store.Endpoint{Name: "sealed", URL: "https://partner.example/hook", Concurrency: 2}
		want := allCredentials()
		if err := endpoint.Seal(k, &e, want); err != nil {
			t.Fatal(err)
		}
		for _, v := range secretValues {
			if bytes.Contains(e.Sealed.Data, []byte(v)) || strings.Contains(e.Sealed.Fingerprint+e.Sealed.Auth, v) {
				t.Fatalf("the sealed row shows the secret %q", v)
			}
		}
		if e.Sealed.Auth != "oauth2+mtls+headers" {
			t.Errorf("Auth = %q, want oauth2+mtls+headers", e.Sealed.Auth)
		}
		if got := strings.Fields(e.Sealed.Fingerprint); len(got) != 2 || got[0] != endpoint.Fingerprint(want.Secret) {
			t.Errorf("Fingerprint = %q, want the current secret's then the previous one's", e.Sealed.Fingerprint)
		}
		created, err := s.EndpointCreate(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := endpoint.Open(k, created)
		if err != nil {
			t.Fatal(err)
		}
		if !equalJSON(t, got, want) {
			t.Errorf("opened %+v, want %+v", got, want)
		}
		// Bound to the row: the same blob on another endpoint does not open.
		other := created
		other.ID[15] ^= 1
		if _, err := endpoint.Open(k, other); !errors.Is(err, keyring.ErrCorrupt) {
			t.Errorf("the blob opened on another endpoint's id: %v", err)
		}
		// Without the key: a clear error naming the key's id, no secret.
		stranger := mustKeyring(t, keyring.GenerateKey())
		_, err = endpoint.Open(stranger, created)
		if !errors.Is(err, keyring.ErrUnknownKey) || !strings.Contains(err.Error(), k.PrimaryID()) {
			t.Errorf("opening with another key: %v, want ErrUnknownKey naming %s", err, k.PrimaryID())
		}
		if _, err := endpoint.Open(nil, created); !errors.Is(err, endpoint.ErrNoKeyring) {
			t.Errorf("opening without a keyring: %v, want ErrNoKeyring", err)
		}
	})
}

func TestRotateKeepsThePreviousSecretForItsGraceAndCompetingRotationsLoseNothing(t *testing.T) {
	t.Parallel()
	bothEndpointStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		k := mustKeyring(t, keyring.GenerateKey())
		e := store.Endpoint{Name: "rotating", URL: "https://partner.example/hook", Concurrency: 2}
		if err := endpoint.Seal(k, &e, endpoint.Credentials{Secret: secret, Bearer: "bearer-token"}); err != nil {
			t.Fatal(err)
		}
		e, err := s.EndpointCreate(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		grace := time.Now().Add(time.Hour)
		next := "whsec_bmV4dC1zZWNyZXQtYWZ0ZXItcm90YXRpb24"
		if err := endpoint.Rotate(ctx, s, k, e.ID, next, grace); err != nil {
			t.Fatal(err)
		}
		e, _ = s.EndpointGet(ctx, e.ID)
		c, err := endpoint.Open(k, e)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Signing(e, time.Now()); len(got) != 2 || got[0] != next || got[1] != secret {
			t.Errorf("signing during the grace: %d secrets, want the new one then the old one", len(got))
		}
		if got := c.Signing(e, grace.Add(time.Second)); len(got) != 1 || got[0] != next {
			t.Errorf("signing after the grace: %d secrets, want the new one alone", len(got))
		}
		if c.Bearer != "bearer-token" {
			t.Error("the rotation lost the bearer token")
		}
		// Concurrent changes of one endpoint's credentials: none is lost.
		var wg sync.WaitGroup
		var landed atomic.Int32
		for i := range 6 {
			wg.Go(func() {
				err := endpoint.Reseal(ctx, s, k, e.ID, "", func(c *endpoint.Credentials, _ *time.Time) error {
					if c.Headers == nil {
						c.Headers = map[string]string{}
					}
					c.Headers["X-H"+string(rune('a'+i))] = "v"
					return nil
				})
				switch {
				case err == nil:
					landed.Add(1)
				case !errors.Is(err, store.ErrEndpointChanged):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		e, _ = s.EndpointGet(ctx, e.ID)
		c, err = endpoint.Open(k, e)
		if err != nil {
			t.Fatal(err)
		}
		// Each change either landed or reported ErrEndpointChanged after
		// its tries; those that landed are all there, none overwritten.
		if len(c.Headers) != int(landed.Load()) || landed.Load() == 0 || c.Secret != next {
			t.Errorf("after concurrent changes: %d headers for %d changes that landed, secret kept %v", len(c.Headers), landed.Load(), c.Secret == next)
		}
	})
}

func TestRekeySealsClearRowsAndRewrapsOldKeysRowsOnly(t *testing.T) {
	t.Parallel()
	bothEndpointStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		oldKey, newKey, lostKey := keyring.GenerateKey(), keyring.GenerateKey(), keyring.GenerateKey()
		old, lost := mustKeyring(t, oldKey), mustKeyring(t, lostKey)
		// A row written before secrets were sealed, one sealed by the old
		// key, one by a key nobody holds any more.
		clearRow, err := s.EndpointCreate(ctx, store.Endpoint{Name: "clear", URL: "https://a.example/", Secret: secret, Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		// The postbox of that time took a URL's user information as Basic
		// credentials: rekey moves them into the sealed credentials.
		withUser, err := s.EndpointCreate(ctx, store.Endpoint{Name: "user", URL: "https://u:p%40ss@d.example/h", Secret: secret, Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		byOld := store.Endpoint{Name: "old", URL: "https://b.example/", Concurrency: 1}
		if err := endpoint.Seal(old, &byOld, endpoint.Credentials{Secret: secret, Bearer: "t0ken-old"}); err != nil {
			t.Fatal(err)
		}
		if byOld, err = s.EndpointCreate(ctx, byOld); err != nil {
			t.Fatal(err)
		}
		byLost := store.Endpoint{Name: "lost", URL: "https://c.example/", Concurrency: 1}
		if err := endpoint.Seal(lost, &byLost, endpoint.Credentials{Secret: secret}); err != nil {
			t.Fatal(err)
		}
		if byLost, err = s.EndpointCreate(ctx, byLost); err != nil {
			t.Fatal(err)
		}
		both := mustKeyring(t, newKey, oldKey)
		dry, err := endpoint.Rekey(ctx, s, both, true)
		if err != nil {
			t.Fatal(err)
		}
		if dry.Sealed != 2 || dry.Rewrapped != 1 || len(dry.Failed) != 1 {
			t.Errorf("dry run: %+v, want 2 sealed, 1 rewrapped, 1 failed", dry)
		}
		if e, _ := s.EndpointGet(ctx, clearRow.ID); e.Sealed.Data != nil {
			t.Error("the dry run sealed a row")
		}
		r, err := endpoint.Rekey(ctx, s, both, false)
		if err != nil {
			t.Fatal(err)
		}
		if r.Sealed != 2 || r.Rewrapped != 1 || r.Current != 0 || len(r.Failed) != 1 || r.Failed[0].ID != byLost.ID ||
			!errors.Is(r.Failed[0].Err, keyring.ErrUnknownKey) {
			t.Errorf("rekey: %+v, want 2 sealed, 1 rewrapped, the lost key's row failed with ErrUnknownKey", r)
		}
		// Every row but the lost one now opens with the new key alone.
		onlyNew := mustKeyring(t, newKey)
		for _, id := range []store.Endpoint{clearRow, byOld} {
			e, err := s.EndpointGet(ctx, id.ID)
			if err != nil {
				t.Fatal(err)
			}
			c, err := endpoint.Open(onlyNew, e)
			if err != nil || c.Secret != secret || e.Secret != "" || e.Sealed.Key != onlyNew.PrimaryID() {
				t.Errorf("%s after rekey: %v (secret kept %v, clear column empty %v)", e.Name, err, c.Secret == secret, e.Secret == "")
			}
		}
		u, err := s.EndpointGet(ctx, withUser.ID)
		if err != nil {
			t.Fatal(err)
		}
		c, err := endpoint.Open(onlyNew, u)
		if err != nil || u.URL != "https://d.example/h" || c.Basic == nil || c.Basic.User != "u" || c.Basic.Password != "p@ss" {
			t.Errorf("the URL's user information after rekey: URL %q, Basic kept %v (%v)", u.URL, c.Basic != nil && c.Basic.Password == "p@ss", err)
		}
		again, err := endpoint.Rekey(ctx, s, both, false)
		if err != nil || again.Current != 3 || again.Sealed+again.Rewrapped != 0 {
			t.Errorf("rekey again: %+v, %v; want 3 current and nothing to do", again, err)
		}
	})
}

func TestMoveURLCredentialsLeavesNoCredentialInTheURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, want string
		basic     bool
	}{
		{"https://u:p%40ss@partner.example/hook", "https://partner.example/hook", true},
		{"nats://u:p%40ss@127.0.0.1:4222/orders", "nats://127.0.0.1:4222/orders", false},
		{"amqp://guest:guest@127.0.0.1:5672/?exchange=x", "amqp://127.0.0.1:5672/?exchange=x", false},
		{"kafka://127.0.0.1:9092/orders", "kafka://127.0.0.1:9092/orders", false},
	} {
		e := store.Endpoint{URL: tc.url}
		var c endpoint.Credentials
		if err := endpoint.MoveURLCredentials(&e, &c); err != nil {
			t.Fatal(err)
		}
		if e.URL != tc.want {
			t.Errorf("%s: URL %q, want %q", tc.want, e.URL, tc.want)
		}
		switch {
		case !strings.Contains(tc.url, "@"):
			if c.Basic != nil || c.URLUser != "" {
				t.Errorf("%s: credentials from a URL without any", tc.want)
			}
		case tc.basic:
			if c.Basic == nil || c.Basic.User != "u" || c.Basic.Password != "p@ss" {
				t.Errorf("%s: the URL's credentials are not Basic authentication", tc.want)
			}
		case c.URLUser == "" || c.URLPassword == "" || c.Basic != nil:
			t.Errorf("%s: the broker URL's credentials were not kept as URLUser/URLPassword", tc.want)
		}
	}
	e := store.Endpoint{URL: "https://u:p@partner.example/"}
	c := endpoint.Credentials{Bearer: "x"}
	if err := endpoint.MoveURLCredentials(&e, &c); err == nil || strings.Contains(err.Error(), "p@") {
		t.Errorf("a URL's Basic credentials beside a bearer token: %v, want a refusal without the password", err)
	}
}

// equalJSON reports whether a and b encode to the same JSON.
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}

func TestStaticHeadersCannotTakeWhatSinksAndEnvelopesSet(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"Content-Type", "content-type", "Ce-Type", "ce_id", "cloudEvents:source", "CLOUDEVENTS_TYPE", "Postbox-Event-Id", "postbox-anything"} {
		err := endpoint.CheckHeaders(map[string]string{name: "header-secret-value"})
		if err == nil || !strings.Contains(err.Error(), name) || strings.Contains(err.Error(), "header-secret-value") {
			t.Errorf("static header %s: %v, want a refusal naming it, not its value", name, err)
		}
		e := store.Endpoint{URL: "https://partner.example/"}
		if err := endpoint.Seal(testKeyring, &e, endpoint.Credentials{Secret: secret, Headers: map[string]string{name: "v"}}); err == nil {
			t.Errorf("Seal took the static header %s", name)
		}
	}
	if err := endpoint.CheckHeaders(map[string]string{"X-Api-Key": "k", "Cer-Id": "x", "Tenant": "acme"}); err != nil {
		t.Errorf("ordinary static headers refused: %v", err)
	}
}

func TestCredentialsPrintNoSecret(t *testing.T) {
	t.Parallel()
	c := allCredentials()
	c.Basic = &endpoint.BasicAuth{User: "u", Password: "basic-password-9"}
	var logs strings.Builder
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "c", c, "b", c.Basic, "o", c.OAuth2)
	out := fmt.Sprintf("%v %+v %#v %s %d %q", c, c, c, c, c, c) + fmt.Sprint(c.Basic, *c.OAuth2, c.TLS) + logs.String()
	for _, v := range append(secretValues, "basic-password-9") {
		if strings.Contains(out, v) {
			t.Errorf("printing credentials shows %q:\n%s", v, out)
		}
	}
	if !strings.Contains(out, "basic+mtls+headers") && !strings.Contains(out, "basic") {
		t.Errorf("printing credentials does not say what they authenticate with:\n%s", out)
	}
}
