package manifest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/endpoint/manifest"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/nats"
	"github.com/postbox-go/postbox/store"
)

// counting is a store that counts the writes Apply makes.
type counting struct {
	store.Endpoints
	updates, seals, states int
}

func (c *counting) EndpointUpdate(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	c.updates++
	return c.Endpoints.EndpointUpdate(ctx, e)
}

func (c *counting) EndpointSeal(ctx context.Context, id uuid.UUID, sealed store.SealedSecrets, until time.Time, url string, was []byte) error {
	c.seals++
	return c.Endpoints.EndpointSeal(ctx, id, sealed, until, url, was)
}

func (c *counting) EndpointSetState(ctx context.Context, id uuid.UUID, state string) error {
	c.states++
	return c.Endpoints.EndpointSetState(ctx, id, state)
}

// countingAdmin is an Admin of s, its writes counted.
func countingAdmin(t *testing.T, s store.Endpoints) (*admin.Admin, *counting) {
	t.Helper()
	k, err := keyring.Parse(keyring.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{Endpoints: s}
	a, err := admin.New(admin.Config{Store: c, Keyring: k, Kinds: []sink.URLKind{nats.URL}, PrivateEndpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	return a, c
}

// An endpoint the file says disabled is created disabled, in the
// create's write: never enabled, not for a moment.
func TestDisabledIsCreatedDisabled(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		a, c := countingAdmin(t, s)
		file := "version: 1\nendpoints:\n  - name: off\n    url: https://93.184.215.14/off\n    state: disabled\n"
		applyOK(t, a, planOf(t, a, file, env{}, "", manifest.Options{}))
		if e, _ := stored(t, a, "off"); e.State != store.EndpointDisabled || c.states != 0 {
			t.Errorf("state %q after %d state changes: want created disabled, none", e.State, c.states)
		}
		if again := planOf(t, a, file, env{}, "", manifest.Options{}); !again.Empty() {
			t.Errorf("second plan:\n%s", again)
		}
	})
}

// Type globs the store cannot keep as written are refused by the plan,
// which would otherwise never converge.
func TestTypesTheStoreCannotKeepAreRefused(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		a := newAdmin(t, s)
		for _, types := range []string{"['a,b']", "[' c']", "['']"} {
			file := "version: 1\nendpoints:\n  - name: t\n    url: https://93.184.215.14/t\n    types: " + types + "\n"
			p := planOf(t, a, file, env{}, "", manifest.Options{})
			if len(p.Refusals) != 1 || p.Refusals[0].Setting != admin.SettingTypes {
				t.Errorf("types %s: refusals %+v, want types refused:\n%s", types, p.Refusals, p)
			}
		}
		file := "version: 1\nendpoints:\n  - name: t\n    url: https://93.184.215.14/t\n    types: [a, b]\n"
		applyOK(t, a, planOf(t, a, file, env{}, "", manifest.Options{}))
		if again := planOf(t, a, file, env{}, "", manifest.Options{}); !again.Empty() {
			t.Errorf("second plan:\n%s", again)
		}
	})
}

// A file that changes the signature profile and the secret together is
// applied in one Update (one seal): the secret is checked against the new
// profile. An ed25519 key under standard becomes an HMAC secret under
// x-signature, which neither order of two steps could make; a grace for
// the key, which cannot sign under x-signature, is refused.
func TestSignatureAndSecretChangeTogether(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		a, c := countingAdmin(t, s)
		key, _, err := signature.GenerateKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		hmac, err := signature.GenerateSecret()
		if err != nil {
			t.Fatal(err)
		}
		file := "version: 1\nendpoints:\n  - name: s\n    url: https://93.184.215.14/s\n    secret: env:SECRET\n"
		applyOK(t, a, planOf(t, a, file, env{"SECRET": key}, "", manifest.Options{}))
		changed := file + "    signature: x-signature\n"
		if p := planOf(t, a, changed, env{"SECRET": hmac}, "", manifest.Options{Grace: time.Hour}); len(p.Refusals) != 1 || p.Refusals[0].Setting != admin.SettingGrace {
			t.Errorf("with a grace: refusals %+v, want grace refused", p.Refusals)
		}
		c.updates, c.seals = 0, 0
		p := planOf(t, a, changed, env{"SECRET": hmac}, "", manifest.Options{})
		if len(p.Refusals) != 0 || counts(p) != [4]int{0, 1, 0, 0} {
			t.Fatalf("plan:\n%s", p)
		}
		applyOK(t, a, p)
		e, creds := stored(t, a, "s")
		if e.Signature != "x-signature" || creds.Secret != hmac || c.seals != 1 || c.updates != 1 {
			t.Errorf("signature %q, secret the file's %v, after %d seals and %d updates: want x-signature, the HMAC secret, in one of each",
				e.Signature, creds.Secret == hmac, c.seals, c.updates)
		}
		if again := planOf(t, a, changed, env{"SECRET": hmac}, "", manifest.Options{}); !again.Empty() {
			t.Errorf("second plan:\n%s", again)
		}
	})
}

// A URL given as a reference is read as a secret is; the plan never
// shows a URL's path nor query, nor a referenced URL anywhere.
func TestURLReference(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		a := newAdmin(t, s)
		dir := t.TempDir()
		hook := "https://93.184.215.14/services/T0/B0/TOKENPATH?token=TOKENQUERY"
		writeFile(t, dir, "hook-url", hook+"\n")
		file := "version: 1\nendpoints:\n  - name: chat\n    url: file:hook-url\n  - name: plain\n    url: https://93.184.215.14/plain/PLAINPATH?q=PLAINQUERY\n"
		p := planOf(t, a, file, env{}, dir, manifest.Options{})
		out := p.String()
		if !strings.Contains(out, "    url: webhook https://93.184.215.14/…\n") {
			t.Errorf("plan does not describe the URLs:\n%s", out)
		}
		noSecrets(t, "the plan", out, "TOKENPATH", "TOKENQUERY", "PLAINPATH", "PLAINQUERY")
		applyOK(t, a, p)
		if e, _ := stored(t, a, "chat"); e.URL != hook {
			t.Errorf("stored URL is not the file's reference's")
		}
		if again := planOf(t, a, file, env{}, dir, manifest.Options{}); !again.Empty() {
			t.Errorf("second plan:\n%s", again)
		}
		writeFile(t, dir, "hook-url", strings.Replace(hook, "TOKENPATH", "NEWTOKEN", 1))
		p = planOf(t, a, file, env{}, dir, manifest.Options{})
		out = p.String()
		if !strings.Contains(out, "    url: changed (webhook https://93.184.215.14/…)\n") {
			t.Errorf("plan of a changed URL:\n%s", out)
		}
		noSecrets(t, "the plan", out, "TOKENPATH", "NEWTOKEN", "TOKENQUERY")

		bad := "version: 1\nendpoints:\n  - name: bad\n    url: env:BAD_URL\n"
		p = planOf(t, a, bad, env{"BAD_URL": "https://93.184.215.14/%zzBADTOKEN"}, dir, manifest.Options{})
		if len(p.Refusals) != 1 || p.Refusals[0].Setting != admin.SettingURL {
			t.Fatalf("refusals %+v, want the url refused", p.Refusals)
		}
		noSecrets(t, "the refusal", p.String(), "BADTOKEN")

		m, err := manifest.Parse([]byte("version: 1\nendpoints:\n  - name: u\n    url: env:WITH_USER\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Resolve(env{"WITH_USER": "https://u:PASSWORDX@93.184.215.14/"}.lookup); err == nil || strings.Contains(err.Error(), "PASSWORDX") {
			t.Errorf("Resolve of a URL with user information: %v, want refused without the value", err)
		}
	})
}
