package admin_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/store"
)

// interposing is a store that runs another change of the endpoint (once)
// just before the first EndpointUpdate or EndpointSeal it is asked: an
// Update that read the endpoint before that change writes after it.
type interposing struct {
	store.Endpoints
	beforeUpdate, beforeSeal func()
}

func (s *interposing) EndpointUpdate(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	if h := s.beforeUpdate; h != nil {
		s.beforeUpdate = nil
		h()
	}
	return s.Endpoints.EndpointUpdate(ctx, e)
}

func (s *interposing) EndpointSeal(ctx context.Context, id uuid.UUID, sealed store.SealedSecrets, previousUntil time.Time, url string, was []byte) error {
	if h := s.beforeSeal; h != nil {
		s.beforeSeal = nil
		h()
	}
	return s.Endpoints.EndpointSeal(ctx, id, sealed, previousUntil, url, was)
}

// Two Updates at once keep both changes: one that changes the filter (and
// in the second case the headers, which it seals) while another moves the
// endpoint to a new URL with a new bearer token. The endpoint never ends
// at one URL with the other URL's token.
func TestConcurrentUpdatesKeepBothChanges(t *testing.T) {
	for _, c := range []struct {
		name  string
		slow  admin.Change
		hooks func(s *interposing, h func())
	}{
		{"settings", admin.Change{Filter: ptr("true")}, func(s *interposing, h func()) { s.beforeUpdate = h }},
		{"settings and credentials", admin.Change{Filter: ptr("true"), Credentials: admin.CredentialChange{SetHeaders: true, Headers: map[string]string{"X-Team": "shop"}}},
			func(s *interposing, h func()) { s.beforeSeal = h }},
	} {
		t.Run(c.name, func(t *testing.T) {
			bothStores(t, func(t *testing.T, raw store.Endpoints) {
				ctx := context.Background()
				k := newKeyring(t)
				is := &interposing{Endpoints: raw}
				slow := newAdmin(t, is, func(cfg *admin.Config) { cfg.Keyring = k })
				fast := newAdmin(t, raw, func(cfg *admin.Config) { cfg.Keyring = k })
				created, err := fast.Create(ctx, admin.Settings{Name: "a", URL: "https://93.184.215.14/old"}, endpoint.Credentials{Bearer: "OLD-PARTNER-TOKEN"})
				if err != nil {
					t.Fatal(err)
				}
				id := created.Endpoint.ID
				newURL := "https://93.184.215.15/new"
				ran := false
				c.hooks(is, func() {
					ran = true
					if _, err := fast.Update(ctx, id, admin.Change{URL: &newURL, Credentials: admin.CredentialChange{SetAuth: true, Bearer: "NEW-PARTNER-TOKEN"}}); err != nil {
						t.Fatal(err)
					}
				})
				if _, err := slow.Update(ctx, id, c.slow); err != nil {
					t.Fatal(err)
				}
				if !ran {
					t.Fatal("the other Update did not run in between")
				}
				e, err := raw.EndpointGet(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				creds := open(t, fast, raw, id)
				if e.URL != newURL || creds.Bearer != "NEW-PARTNER-TOKEN" {
					t.Errorf("after both updates: URL %s with bearer %s, want %s with the new partner's", e.URL, creds.Bearer, newURL)
				}
				if e.Filter != "true" {
					t.Errorf("filter %q: the slow Update's change is lost", e.Filter)
				}
				if c.slow.Credentials.SetHeaders && creds.Headers["X-Team"] != "shop" {
					t.Errorf("headers %v: the slow Update's change is lost", creds.Headers)
				}
			})
		})
	}
}

// An Update that loses every round to other changes gives up with an
// error that wraps store.ErrEndpointChanged, having lost none of them.
func TestUpdateGivesUpOnEndlessChanges(t *testing.T) {
	bothStores(t, func(t *testing.T, raw store.Endpoints) {
		ctx := context.Background()
		k := newKeyring(t)
		fast := newAdmin(t, raw, func(cfg *admin.Config) { cfg.Keyring = k })
		created, err := fast.Create(ctx, admin.Settings{Name: "a", URL: publicURL}, endpoint.Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		id := created.Endpoint.ID
		is := &interposing{Endpoints: raw}
		slow := newAdmin(t, is, func(cfg *admin.Config) { cfg.Keyring = k })
		rounds := 0
		var again func()
		again = func() {
			rounds++
			if _, err := fast.Update(ctx, id, admin.Change{RatePerSecond: ptr(float64(rounds))}); err != nil {
				t.Fatal(err)
			}
			is.beforeUpdate = again
		}
		is.beforeUpdate = again
		_, err = slow.Update(ctx, id, admin.Change{Filter: ptr("true")})
		if !errors.Is(err, store.ErrEndpointChanged) {
			t.Fatalf("Update against endless changes: %v, want store.ErrEndpointChanged", err)
		}
		e, _ := raw.EndpointGet(ctx, id)
		if e.Filter != "" || e.RatePerSecond != float64(rounds) {
			t.Errorf("filter %q, rate %v after %d other changes: want none of the lost Update's, every other's", e.Filter, e.RatePerSecond, rounds)
		}
	})
}

// Change.Secret rotates the signing secret in the same write as the
// other changes, checked against the signature profile as changed: an
// endpoint moves from an ed25519 key (standard) to an HMAC secret
// (x-signature) in one Update, which neither order of a profile change
// and a rotation could make.
func TestUpdateSecretWithSignature(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		key, _, err := signature.GenerateKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		created, err := a.Create(ctx, admin.Settings{Name: "a", URL: publicURL}, endpoint.Credentials{Secret: key})
		if err != nil {
			t.Fatal(err)
		}
		id := created.Endpoint.ID
		if _, err := a.Update(ctx, id, admin.Change{Signature: ptr("x-signature")}); fieldError(t, err) == nil {
			t.Fatal("profile x-signature with an ed25519 key accepted")
		}
		hmac := "whsec_" + strings.Repeat("QUJD", 8)
		if _, err := a.Update(ctx, id, admin.Change{Signature: ptr("x-signature"), Secret: &hmac, SecretGrace: time.Hour}); fieldError(t, err).Setting != admin.SettingGrace {
			t.Errorf("a grace for an ed25519 key under x-signature: %v, want grace refused", err)
		}
		if _, err := a.Update(ctx, id, admin.Change{Signature: ptr("x-signature"), Secret: &key}); fieldError(t, err).Setting != admin.SettingSecret {
			t.Errorf("an ed25519 key given with x-signature: %v, want secret refused", err)
		}
		u, err := a.Update(ctx, id, admin.Change{Signature: ptr("x-signature"), Secret: &hmac})
		if err != nil {
			t.Fatalf("profile and secret together: %v", err)
		}
		if u.Secret != "" || u.Endpoint.Signature != "x-signature" || u.Endpoint.SecretFingerprint != endpoint.Fingerprint(hmac) {
			t.Errorf("Updated %+v: want x-signature, the HMAC secret's fingerprint, no secret generated", u)
		}
		if c := open(t, a, s, id); c.Secret != hmac || c.PreviousSecret != key {
			t.Errorf("secret not the one given, or the previous one not the key")
		}
		u, err = a.Update(ctx, id, admin.Change{Secret: ptr(""), SecretGrace: time.Hour, Filter: ptr("true")})
		if err != nil {
			t.Fatal(err)
		}
		c := open(t, a, s, id)
		if u.Secret == "" || c.Secret != u.Secret || c.PreviousSecret != hmac {
			t.Errorf("a generated secret: Updated.Secret %v, stored %v, previous the HMAC secret %v", u.Secret != "", c.Secret == u.Secret, c.PreviousSecret == hmac)
		}
		if e := rows(t, s)[0]; !e.PreviousSecretUntil.After(time.Now().Add(50*time.Minute)) || e.Filter != "true" {
			t.Errorf("previous secret signs until %v, filter %q: want an hour, true", e.PreviousSecretUntil, e.Filter)
		}
	})
}
