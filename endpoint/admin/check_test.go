package admin_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/store"
)

// rows are the endpoints as stored, every column.
func rows(t *testing.T, s store.Endpoints) []store.Endpoint {
	t.Helper()
	all, err := s.EndpointList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// Check of settings Create takes returns Create's warnings and writes
// nothing; without a keyring it is Create's endpoint.ErrNoKeyring.
func TestCheckWritesNothing(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		settings := admin.Settings{Name: "orders", URL: publicURL, Types: []string{"order.*"}, Filter: "payload.total > 1", Envelope: "cloudevents", Signature: "svix"}
		creds := endpoint.Credentials{Bearer: "tok-" + mark, Headers: map[string]string{"x-api-key": "key"}}
		warnings, err := a.Check(ctx, settings, creds)
		if err != nil || warnings != nil {
			t.Fatalf("Check = %q, %v: want no warning, no error", warnings, err)
		}
		if all := rows(t, s); len(all) != 0 {
			t.Errorf("Check wrote %d endpoints", len(all))
		}
		if _, err := a.Create(ctx, settings, creds); err != nil {
			t.Fatalf("Create of what Check accepted: %v", err)
		}
		blind := newAdmin(t, s, func(c *admin.Config) { c.Keyring = nil })
		if _, err := blind.Check(ctx, settings, creds); !errors.Is(err, endpoint.ErrNoKeyring) {
			t.Errorf("Check without a keyring: %v, want endpoint.ErrNoKeyring as Create's", err)
		}
		if _, err := blind.Check(ctx, admin.Settings{URL: publicURL, Filter: "payload.total >"}, endpoint.Credentials{}); fieldError(t, err).Setting != admin.SettingFilter {
			t.Errorf("Check without a keyring of a bad filter: %v, want the filter refused first", err)
		}
		if all := rows(t, s); len(all) != 1 {
			t.Errorf("%d endpoints after one Create and Checks, want 1", len(all))
		}
	})
}

// CheckChange refuses what Update refuses, alike, and writes nothing,
// whether it refuses or accepts.
func TestCheckChangeRefusesAsUpdateAndWritesNothing(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		created, err := a.Create(ctx, admin.Settings{Name: "partner", URL: publicURL}, endpoint.Credentials{Bearer: "tok-" + mark})
		if err != nil {
			t.Fatal(err)
		}
		id := created.Endpoint.ID
		broker := "nats://127.0.0.1:4222?subject=a.b"
		for _, c := range []struct {
			name    string
			ch      admin.Change
			setting string
			want    string
		}{
			{"filter", admin.Change{Filter: ptr("payload.total >")}, admin.SettingFilter, "filter: 1:16: "},
			{"loopback", admin.Change{URL: ptr("http://127.0.0.1:9/?k=" + mark)}, admin.SettingURL, "127.0.0.1 is loopback"},
			{"envelope", admin.Change{Envelope: ptr("xml")}, admin.SettingEnvelope, `envelope "xml"`},
			{"concurrency", admin.Change{Concurrency: ptr(0)}, admin.SettingConcurrency, "concurrency 0: at least 1"},
			{"header", admin.Change{Credentials: admin.CredentialChange{SetHeaders: true, Headers: map[string]string{"Content-Type": mark}}}, admin.SettingHeaders,
				"headers cannot set Content-Type"},
			{"tls on http", admin.Change{URL: ptr("http://93.184.215.14/"), Credentials: admin.CredentialChange{SetTLS: true, TLS: &endpoint.ClientTLS{CAPEM: mark}}},
				admin.SettingTLS, "tls need an https:// URL"},
			{"to a broker with a bearer token", admin.Change{URL: &broker}, admin.SettingBearer, "(auth.none removes it)"},
		} {
			before := rows(t, s)
			for op, do := range map[string]func() error{
				"CheckChange": func() error { _, err := a.CheckChange(ctx, id, c.ch); return err },
				"Update":      func() error { _, err := a.Update(ctx, id, c.ch); return err },
			} {
				fe := fieldError(t, do())
				if fe.Setting != c.setting || !strings.Contains(fe.Message, c.want) || strings.Contains(fe.Message, mark) {
					t.Errorf("%s: %s: FieldError{%q, %q}, want setting %q and %q, without the secret", c.name, op, fe.Setting, fe.Message, c.setting, c.want)
				}
			}
			if after := rows(t, s); !reflect.DeepEqual(before, after) {
				t.Errorf("%s: refused CheckChange and Update changed the endpoint", c.name)
			}
		}
		before := rows(t, s)
		good := admin.Change{Filter: ptr("payload.total > 1"), URL: ptr("https://93.184.215.15/x"), Envelope: ptr("standard"),
			Credentials: admin.CredentialChange{SetHeaders: true, Headers: map[string]string{"X-Tenant": "acme"}, SetAuth: true}}
		if warnings, err := a.CheckChange(ctx, id, good); err != nil || warnings != nil {
			t.Fatalf("CheckChange = %q, %v", warnings, err)
		}
		if after := rows(t, s); !reflect.DeepEqual(before, after) {
			t.Errorf("CheckChange of a change Update makes wrote it")
		}
		if u, err := a.Update(ctx, id, good); err != nil || !slices.Equal(u.Changed, []string{admin.SettingURL, admin.SettingFilter, admin.SettingEnvelope, admin.SettingHeaders, admin.SettingAuth}) {
			t.Errorf("Update of what CheckChange accepted: %v, %v", u.Changed, err)
		}
		if _, err := a.CheckChange(ctx, uuid.New(), good); !errors.Is(err, admin.ErrNotFound) {
			t.Errorf("CheckChange of an unknown endpoint: %v", err)
		}
		blind := newAdmin(t, s, func(c *admin.Config) { c.Keyring = nil })
		if _, err := blind.CheckChange(ctx, id, admin.Change{RatePerSecond: ptr(3.0)}); err != nil {
			t.Errorf("CheckChange of a setting without a keyring: %v", err)
		}
		if _, err := blind.CheckChange(ctx, id, admin.Change{Credentials: admin.CredentialChange{SetAuth: true, Bearer: "x"}}); !errors.Is(err, endpoint.ErrNoKeyring) {
			t.Errorf("CheckChange of credentials without a keyring: %v, want endpoint.ErrNoKeyring", err)
		}
	})
}

// Canonical is the form View shows what Create stored: given back, View's
// settings are Canonical already, and Update with them changes nothing.
func TestCanonicalRoundTrips(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		for _, given := range []admin.Settings{
			{Name: "plain", URL: publicURL},
			{Name: "raw", URL: publicURL, Envelope: "raw", Types: []string{"a.*", "b"}, Concurrency: 3, RatePerSecond: 2.5, Shadow: true},
			{Name: "ce default source", URL: publicURL, Envelope: "cloudevents", CESource: "/postbox"},
			{Name: "ce source", URL: publicURL, Envelope: "cloudevents-binary", CESource: "https://shop.example/orders"},
			{Name: "profile", URL: publicURL, Signature: " SVIX ", Envelope: "standard"},
			{Name: "prefix", URL: publicURL, Signature: "x-signature;prefix=acme"},
			{Name: "broker", URL: "nats://127.0.0.1:4222?subject=a", Envelope: "cloudevents"},
		} {
			created, err := a.Create(ctx, given, endpoint.Credentials{})
			if err != nil {
				t.Fatalf("%s: %v", given.Name, err)
			}
			shown := created.Endpoint.Settings
			canon, err := admin.Canonical(given)
			if err != nil {
				t.Fatalf("%s: Canonical: %v", given.Name, err)
			}
			if !reflect.DeepEqual(canon, shown) {
				t.Errorf("%s: Canonical(given) = %+v, View shows %+v", given.Name, canon, shown)
			}
			if again, err := admin.Canonical(shown); err != nil || !reflect.DeepEqual(again, shown) {
				t.Errorf("%s: Canonical(View's) = %+v, %v: want View's %+v", given.Name, again, err, shown)
			}
			if e, _ := s.EndpointGet(ctx, created.Endpoint.ID); !reflect.DeepEqual(admin.ViewOf(e, time.Now()).Settings, shown) {
				t.Errorf("%s: ViewOf differs from View", given.Name)
			}
			u, err := a.Update(ctx, created.Endpoint.ID, admin.Change{Envelope: &shown.Envelope, CESource: &shown.CESource, Signature: &shown.Signature,
				Types: &shown.Types, Concurrency: &shown.Concurrency})
			if err != nil || len(u.Changed) != 0 {
				t.Errorf("%s: Update with View's settings changed %q, %v", given.Name, u.Changed, err)
			}
		}
		for _, bad := range []struct {
			s       admin.Settings
			setting string
		}{
			{admin.Settings{Envelope: "xml"}, admin.SettingEnvelope},
			{admin.Settings{CESource: "/x"}, admin.SettingCESource},
			{admin.Settings{Signature: "hmac-sha1"}, admin.SettingSignature},
		} {
			if _, err := admin.Canonical(bad.s); fieldError(t, err).Setting != bad.setting {
				t.Errorf("Canonical(%+v): %v, want %s refused", bad.s, err, bad.setting)
			}
		}
	})
}

// ViewOf needs no Admin: the previous secret is shown while it signs at
// the time given. HasKeyring says whether the Admin has a keyring.
func TestViewOfAndHasKeyring(t *testing.T) {
	s := sqliteStore(t)
	ctx := context.Background()
	a := newAdmin(t, s, nil)
	created, err := a.Create(ctx, admin.Settings{URL: publicURL}, endpoint.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.RotateSecret(ctx, created.Endpoint.ID, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.EndpointGet(ctx, created.Endpoint.ID)
	if err != nil {
		t.Fatal(err)
	}
	during, after := admin.ViewOf(e, time.Now()), admin.ViewOf(e, r.PreviousUntil.Add(time.Second))
	if during.PreviousSecretFingerprint != created.Endpoint.SecretFingerprint || during.SecretFingerprint != r.Fingerprint || after.PreviousSecretFingerprint != "" {
		t.Errorf("ViewOf: previous %q during the grace period, %q after: want the old secret's, then none", during.PreviousSecretFingerprint, after.PreviousSecretFingerprint)
	}
	var none *admin.Admin
	if !a.HasKeyring() || newAdmin(t, s, func(c *admin.Config) { c.Keyring = nil }).HasKeyring() || none.HasKeyring() {
		t.Errorf("HasKeyring: with a keyring %v, without one true, or a nil Admin's true", a.HasKeyring())
	}
}
