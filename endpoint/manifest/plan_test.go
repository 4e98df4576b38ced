package manifest_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/endpoint/manifest"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/store"
)

// baseFile is a file with every kind of endpoint and credential: a
// webhook with its secret, a header and a bearer token referenced; one
// disabled with CloudEvents, a signature profile, OAuth2 and mTLS; a
// NATS endpoint with a user and password; one whose secret is generated.
const baseFile = `version: 1
endpoints:
  - name: warehouse
    url: https://93.184.215.14/warehouse
    types: [order.*, payment.succeeded]
    filter: 'payload.total > 100'
    envelope: standard
    rate_per_second: 50
    concurrency: 4
    secret: env:WH_SECRET
    headers: {x-api-key: file:wh-key}
    auth: {bearer: env:WH_TOKEN}
  - name: audit
    url: https://93.184.215.14/audit
    envelope: cloudevents
    ce_source: https://shop.example/orders
    signature: svix
    state: disabled
    auth:
      oauth2:
        token_url: https://93.184.215.14/token
        client_id: postbox
        client_secret: env:OAUTH_SECRET
        scopes: [hooks.write]
        params: {audience: https://api.example}
    tls: {cert: file:client.pem, key: file:client-key.pem, ca: file:client.pem}
  - name: stream
    url: nats://127.0.0.1:4222?subject=shop.{event_type}
    types: [order.*]
    auth: {basic: {user: natsuser, password: env:NATS_PASSWORD}}
  - name: generated
    url: https://93.184.215.14/generated
    shadow: true
`

// fixture is baseFile's environment and files.
type fixture struct {
	env env
	dir string
	// whKey is the contents of the file wh-key.
	whKey string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	secret, err := signature.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: t.TempDir(), whKey: "key-" + uniq(),
		env: env{"WH_SECRET": secret, "WH_TOKEN": "tok-" + uniq(), "OAUTH_SECRET": "oauth-" + uniq(), "NATS_PASSWORD": "nats-" + uniq()}}
	writeFile(t, f.dir, "wh-key", f.whKey+"\n")
	cert, key := clientPEM(t)
	writeFile(t, f.dir, "client.pem", cert)
	writeFile(t, f.dir, "client-key.pem", key)
	return f
}

// secrets are every secret the fixture's file references.
func (f *fixture) secrets() []string {
	out := []string{f.whKey}
	for _, v := range f.env {
		out = append(out, v)
	}
	return out
}

// uniq is a random marker.
func uniq() string { return strings.ReplaceAll(rand16(), "-", "") }

func rand16() string {
	s, _ := signature.GenerateSecret()
	return strings.NewReplacer("+", "", "/", "", "=", "").Replace(strings.TrimPrefix(s, "whsec_"))[:16]
}

// The "done when": apply twice in a row, and the second plan
// changes nothing; what the first made is what the file says, secrets
// included.
func TestApplyTwiceChangesNothing(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		a := newAdmin(t, s)
		f := newFixture(t)
		p := planOf(t, a, baseFile, f.env, f.dir, manifest.Options{})
		if counts(p) != [4]int{4, 0, 0, 0} || p.Empty() {
			t.Fatalf("first plan counts %v, want 4 to create:\n%s", counts(p), p)
		}
		out := p.String()
		for _, want := range []string{"+ create warehouse\n", "    url: webhook https://93.184.215.14/…\n", `    types: ["order.*", "payment.succeeded"]`,
			`    filter: "payload.total > 100"`, "    secret: env:WH_SECRET\n", "    headers: X-Api-Key (file:wh-key)\n", "    auth: bearer (env:WH_TOKEN)\n",
			"+ create audit\n", "    state: disabled\n", "    tls: cert file:client.pem, key file:client-key.pem, ca file:client.pem\n",
			"+ create generated\n", "    secret: generated, printed once\n", "    shadow: true\n",
			"\n4 to create, 0 to update, 0 to remove, 0 unchanged\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("plan lacks %q:\n%s", want, out)
			}
		}
		noSecrets(t, "the plan", out, f.secrets()...)
		r := applyOK(t, a, p)
		if len(r.Done) != 4 || len(r.Secrets) != 2 || r.Secrets[0].Name != "audit" || r.Secrets[1].Name != "generated" ||
			!strings.HasPrefix(r.Secrets[1].Secret, "whsec_") || r.Secrets[1].ID != r.Done[3].ID {
			t.Fatalf("Apply did %+v, generated %d secrets: want 4 creations and the secrets of audit and generated (no secret reference)", r.Done, len(r.Secrets))
		}
		var b strings.Builder
		if err := r.Write(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "created warehouse (") || !strings.Contains(b.String(), "secret of generated: "+r.Secrets[1].Secret+"\n(shown once") {
			t.Errorf("result:\n%s", b.String())
		}
		noSecrets(t, "the result", b.String(), f.secrets()...)

		again := planOf(t, a, baseFile, f.env, f.dir, manifest.Options{Prune: true})
		if !again.Empty() || counts(again) != [4]int{0, 0, 0, 4} {
			t.Fatalf("the second plan is not empty (%v):\n%s", counts(again), again)
		}
		if again.String() != "no changes: 4 endpoints match the file\n" {
			t.Errorf("the second plan says %q", again.String())
		}

		wh, c := stored(t, a, "warehouse")
		if wh.URL != "https://93.184.215.14/warehouse" || !slices.Equal(wh.Types, []string{"order.*", "payment.succeeded"}) || wh.Filter != "payload.total > 100" ||
			wh.Envelope != "standard" || wh.RatePerSecond != 50 || wh.Concurrency != 4 || wh.State != store.EndpointEnabled {
			t.Errorf("warehouse stored as %+v", wh)
		}
		if c.Secret != f.env["WH_SECRET"] || c.Bearer != f.env["WH_TOKEN"] || !reflect.DeepEqual(c.Headers, map[string]string{"X-Api-Key": f.whKey}) {
			t.Errorf("warehouse's credentials are not the file's references' values")
		}
		audit, c := stored(t, a, "audit")
		if audit.State != store.EndpointDisabled || audit.Envelope != "cloudevents;source=https://shop.example/orders" || audit.Signature != "svix" {
			t.Errorf("audit stored as %+v", audit)
		}
		if o := c.OAuth2; o == nil || o.ClientSecret != f.env["OAUTH_SECRET"] || !reflect.DeepEqual(o.Params, map[string][]string{"audience": {"https://api.example"}}) ||
			c.TLS == nil || c.TLS.CertPEM == "" || c.TLS.KeyPEM == "" || c.TLS.CAPEM != c.TLS.CertPEM || !strings.HasSuffix(c.TLS.CertPEM, "\n") {
			t.Errorf("audit's OAuth2 and TLS are not the file's (PEM read whole)")
		}
		stream, c := stored(t, a, "stream")
		if stream.URL != "nats://127.0.0.1:4222?subject=shop.{event_type}" || c.URLUser != "natsuser" || c.URLPassword != f.env["NATS_PASSWORD"] || c.Basic != nil {
			t.Errorf("stream stored with URL %s, user %q: want the URL as written and its user and password sealed", stream.URL, c.URLUser)
		}
		gen, c := stored(t, a, "generated")
		if !gen.Shadow || gen.Concurrency != admin.ConcurrencyDefault || c.Secret != r.Secrets[1].Secret {
			t.Errorf("generated stored as %+v, its secret not the one printed", gen)
		}
		// Apply of an empty plan does nothing.
		if r := applyOK(t, a, again); len(r.Done) != 0 {
			t.Errorf("Apply of an empty plan did %+v", r.Done)
		}
	})
}

// A filter changed in the file is one update, shown old -> new; the
// second plan is empty again.
func TestChangedFilterIsOneUpdate(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		a := newAdmin(t, s)
		f := newFixture(t)
		applyOK(t, a, planOf(t, a, baseFile, f.env, f.dir, manifest.Options{}))
		changed := strings.Replace(baseFile, "'payload.total > 100'", "'payload.total > 200'", 1)
		p := planOf(t, a, changed, f.env, f.dir, manifest.Options{})
		if counts(p) != [4]int{0, 1, 0, 3} {
			t.Fatalf("plan counts %v, want one update:\n%s", counts(p), p)
		}
		wh, _ := stored(t, a, "warehouse")
		step := p.Steps[0]
		if step.Action != manifest.Update || step.ID != wh.ID || len(step.Diffs) != 1 ||
			step.Diffs[0] != (manifest.Diff{Setting: "filter", Old: `"payload.total > 100"`, New: `"payload.total > 200"`}) {
			t.Fatalf("step %+v", step)
		}
		want := "~ update warehouse (" + wh.ID.String() + ")\n    filter: \"payload.total > 100\" -> \"payload.total > 200\"\n\n0 to create, 1 to update, 0 to remove, 3 unchanged\n"
		if p.String() != want {
			t.Errorf("plan:\n%s\nwant:\n%s", p, want)
		}
		r := applyOK(t, a, p)
		if len(r.Done) != 1 || r.Done[0] != (manifest.Done{Action: manifest.Update, Name: "warehouse", ID: wh.ID}) {
			t.Errorf("Apply did %+v", r.Done)
		}
		if wh, _ := stored(t, a, "warehouse"); wh.Filter != "payload.total > 200" {
			t.Errorf("filter stored %q", wh.Filter)
		}
		if again := planOf(t, a, changed, f.env, f.dir, manifest.Options{}); !again.Empty() {
			t.Errorf("plan after the update:\n%s", again)
		}
	})
}

// An endpoint left out of the file is kept and listed without prune,
// removed with it.
func TestPrune(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s)
		f := newFixture(t)
		applyOK(t, a, planOf(t, a, baseFile, f.env, f.dir, manifest.Options{}))
		gen, _ := stored(t, a, "generated")
		without := baseFile[:strings.Index(baseFile, "  - name: generated")]

		kept := planOf(t, a, without, f.env, f.dir, manifest.Options{})
		if !kept.Empty() || len(kept.Kept) != 1 || kept.Kept[0] != (manifest.Kept{Name: "generated", ID: gen.ID}) {
			t.Fatalf("plan without prune: kept %+v:\n%s", kept.Kept, kept)
		}
		if want := "  kept generated (" + gen.ID.String() + "): not in the file (prune removes it)\n\nno changes: 3 endpoints match the file\n"; kept.String() != want {
			t.Errorf("plan without prune:\n%s\nwant:\n%s", kept, want)
		}
		applyOK(t, a, kept)
		if _, err := a.Find(ctx, "generated"); err != nil {
			t.Fatalf("without prune the endpoint must stay: %v", err)
		}

		pruned := planOf(t, a, without, f.env, f.dir, manifest.Options{Prune: true})
		if counts(pruned) != [4]int{0, 0, 1, 3} || len(pruned.Kept) != 0 {
			t.Fatalf("plan with prune %v:\n%s", counts(pruned), pruned)
		}
		if !strings.Contains(pruned.String(), "- remove generated ("+gen.ID.String()+"), with its deliveries and attempts\n") {
			t.Errorf("plan with prune:\n%s", pruned)
		}
		r := applyOK(t, a, pruned)
		if len(r.Done) != 1 || r.Done[0].Action != manifest.Remove {
			t.Errorf("Apply did %+v", r.Done)
		}
		if _, err := a.Find(ctx, "generated"); !errors.Is(err, admin.ErrNotFound) {
			t.Fatalf("after prune: %v, want not found", err)
		}
		if again := planOf(t, a, without, f.env, f.dir, manifest.Options{Prune: true}); !again.Empty() {
			t.Errorf("plan after prune:\n%s", again)
		}
	})
}

// Plan changes nothing, whatever it plans (the dry run).
func TestPlanChangesNothing(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s)
		f := newFixture(t)
		applyOK(t, a, planOf(t, a, baseFile, f.env, f.dir, manifest.Options{}))
		before, err := s.EndpointList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f.env["WH_SECRET"], _ = signature.GenerateSecret()
		changed := strings.NewReplacer("concurrency: 4", "concurrency: 2", "state: disabled", "state: enabled").Replace(baseFile)
		changed = changed[:strings.Index(changed, "  - name: generated")] + "  - name: new\n    url: https://93.184.215.14/new\n"
		p := planOf(t, a, changed, f.env, f.dir, manifest.Options{Prune: true})
		if counts(p) != [4]int{1, 2, 1, 1} {
			t.Fatalf("plan counts %v:\n%s", counts(p), p)
		}
		after, err := s.EndpointList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, after) {
			t.Errorf("Plan changed the store")
		}
	})
}

// A secret reference that now names another value rotates the secret,
// the old one signing for the grace; a header's value changed is
// "headers: changed"; neither value is shown.
func TestChangedSecretsRotateAndReseal(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		a := newAdmin(t, s)
		f := newFixture(t)
		applyOK(t, a, planOf(t, a, baseFile, f.env, f.dir, manifest.Options{}))
		old := f.secrets()
		oldSecret := f.env["WH_SECRET"]
		f.env["WH_SECRET"], _ = signature.GenerateSecret()
		f.whKey = "key-" + uniq()
		writeFile(t, f.dir, "wh-key", f.whKey+"\n")
		f.env["NATS_PASSWORD"] = "nats-" + uniq()
		p := planOf(t, a, baseFile, f.env, f.dir, manifest.Options{Grace: time.Hour})
		if counts(p) != [4]int{0, 2, 0, 2} {
			t.Fatalf("plan counts %v:\n%s", counts(p), p)
		}
		out := p.String()
		for _, want := range []string{"    secret: changed (rotated: the old one signs too for 1h0m0s)\n", "    headers: changed\n", "~ update stream (", "    auth: changed\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("plan lacks %q:\n%s", want, out)
			}
		}
		noSecrets(t, "the plan", out, append(old, f.secrets()...)...)
		before := time.Now()
		applyOK(t, a, p)
		after := time.Now()
		wh, c := stored(t, a, "warehouse")
		if c.Secret != f.env["WH_SECRET"] || c.PreviousSecret != oldSecret || c.Headers["X-Api-Key"] != f.whKey {
			t.Errorf("after the rotation: the new secret must sign, the old one beside it, the header be the file's")
		}
		if until := wh.PreviousSecretUntil; until.Before(before.Add(time.Hour-time.Millisecond)) || until.After(after.Add(time.Hour)) {
			t.Errorf("the old secret signs until %v, want the grace (1h) after the apply (%v)", until, before)
		}
		stream, c := stored(t, a, "stream")
		if c.URLPassword != f.env["NATS_PASSWORD"] || c.URLUser != "natsuser" || strings.Contains(stream.URL, "@") {
			t.Errorf("stream's password is not the new one, or its URL holds it: %s", stream.URL)
		}
		if again := planOf(t, a, baseFile, f.env, f.dir, manifest.Options{}); !again.Empty() {
			t.Errorf("plan after the rotation:\n%s", again)
		}
	})
}

// Settings and credentials left out of the file go back to their
// defaults (none); the state is left as it is.
func TestLeftOutIsTheDefault(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		a := newAdmin(t, s)
		f := newFixture(t)
		applyOK(t, a, planOf(t, a, baseFile, f.env, f.dir, manifest.Options{}))
		bare := `version: 1
endpoints:
  - name: warehouse
    url: https://93.184.215.14/warehouse
    secret: env:WH_SECRET
  - name: audit
    url: https://93.184.215.14/audit
  - name: stream
    url: nats://127.0.0.1:4222?subject=shop.{event_type}
  - name: generated
    url: https://93.184.215.14/generated
`
		p := planOf(t, a, bare, f.env, f.dir, manifest.Options{})
		if counts(p) != [4]int{0, 4, 0, 0} {
			t.Fatalf("plan counts %v:\n%s", counts(p), p)
		}
		for _, want := range []string{`    types: ["order.*", "payment.succeeded"] -> []`, `    envelope: "standard" -> "raw"`, `    rate_per_second: 50 -> 0`,
			`    concurrency: 4 -> 8`, `    ce_source: "https://shop.example/orders" -> ""`, `    signature: "svix" -> ""`, "    tls: changed\n", "    shadow: true -> false\n"} {
			if !strings.Contains(p.String(), want) {
				t.Errorf("plan lacks %q:\n%s", want, p)
			}
		}
		if strings.Contains(p.String(), "state:") {
			t.Errorf("a state left out must be left as it is:\n%s", p)
		}
		applyOK(t, a, p)
		audit, c := stored(t, a, "audit")
		if audit.State != store.EndpointDisabled || audit.Envelope != "" || audit.Signature != "" || c.OAuth2 != nil || c.TLS != nil {
			t.Errorf("audit after: %+v (auth and TLS removed: %v)", audit, c.OAuth2 == nil && c.TLS == nil)
		}
		if _, c := stored(t, a, "stream"); c.URLUser != "" || c.URLPassword != "" {
			t.Errorf("stream keeps its user and password")
		}
		if _, c := stored(t, a, "warehouse"); c.Bearer != "" || c.Headers != nil || c.Secret != f.env["WH_SECRET"] {
			t.Errorf("warehouse keeps its bearer or headers, or lost its secret")
		}
		if again := planOf(t, a, bare, f.env, f.dir, manifest.Options{}); !again.Empty() {
			t.Errorf("plan after:\n%s", again)
		}
		// The state given is applied.
		enabled := strings.Replace(bare, "  - name: audit\n", "  - name: audit\n    state: enabled\n", 1)
		p = planOf(t, a, enabled, f.env, f.dir, manifest.Options{})
		if counts(p) != [4]int{0, 1, 0, 3} || !strings.Contains(p.String(), "    state: disabled -> enabled\n") {
			t.Fatalf("plan:\n%s", p)
		}
		applyOK(t, a, p)
		if audit, _ := stored(t, a, "audit"); audit.State != store.EndpointEnabled {
			t.Errorf("audit %s after state: enabled", audit.State)
		}
	})
}

// A name several stored endpoints have, and a stored endpoint without a
// name under prune, are conflicts: Apply refuses the plan and does
// nothing.
func TestConflictsAreNeverGuessed(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s)
		var ids []string
		for _, name := range []string{"dup", "dup", ""} {
			c, err := a.Create(ctx, admin.Settings{Name: name, URL: "https://93.184.215.14/" + name}, endpoint.Credentials{})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, c.Endpoint.ID.String())
		}
		file := "version: 1\nendpoints:\n  - name: dup\n    url: https://93.184.215.14/dup\n  - name: fresh\n    url: https://93.184.215.14/fresh\n"
		p := planOf(t, a, file, env{}, "", manifest.Options{})
		if len(p.Conflicts) != 1 || p.Empty() || len(p.Kept) != 1 || p.Kept[0].Name != "" {
			t.Fatalf("plan: conflicts %+v, kept %+v:\n%s", p.Conflicts, p.Kept, p)
		}
		for _, want := range []string{"! conflict dup (" + ids[0] + ", " + ids[1] + "): 2 stored endpoints have this name", "  kept (no name) (" + ids[2] + ")",
			"\n1 conflict: nothing can be applied until resolved\n"} {
			if !strings.Contains(p.String(), want) {
				t.Errorf("plan lacks %q:\n%s", want, p)
			}
		}
		if r, err := manifest.Apply(ctx, a, p); !errors.Is(err, manifest.ErrConflicts) || len(r.Done) != 0 {
			t.Fatalf("Apply = %+v, %v: want ErrConflicts and nothing done", r, err)
		}
		if _, err := a.Find(ctx, "fresh"); !errors.Is(err, admin.ErrNotFound) {
			t.Errorf("Apply of a plan with conflicts created fresh: %v", err)
		}
		pruned := planOf(t, a, "version: 1\nendpoints: []\n", env{}, "", manifest.Options{Prune: true})
		if counts(pruned) != [4]int{0, 0, 2, 0} || len(pruned.Conflicts) != 1 || pruned.Conflicts[0].Name != "" ||
			!strings.Contains(pruned.String(), "! conflict (no name) ("+ids[2]+"): a stored endpoint without a name") {
			t.Errorf("plan with prune (the two named dup are removed, the nameless one is a conflict):\n%s", pruned)
		}
	})
}

// Plan asks admin to check every endpoint it creates or changes: a file
// with one good and bad ones lists every refusal (the endpoint, its line
// and the setting, no secret), and Apply applies nothing of it; once the
// file is mended it applies, and the next plan is empty.
func TestPlanRefusesABadFileBeforeApplying(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s)
		token := "tok-" + uniq()
		secret, _ := signature.GenerateSecret()
		applyOK(t, a, planOf(t, a, "version: 1\nendpoints:\n  - name: old\n    url: https://93.184.215.14/old\n    secret: env:SECRET\n"+
			"  - name: rotated\n    url: https://93.184.215.14/rotated\n    secret: env:SECRET\n", env{"SECRET": secret}, "", manifest.Options{}))
		before, _ := stored(t, a, "old")
		bad := "whsec_" + uniq() + "!"
		file := "version: 1\nendpoints:\n  - name: good\n    url: https://93.184.215.14/good\n" +
			"  - name: bad\n    url: https://93.184.215.14/bad\n    filter: 'payload.total >'\n    auth: {bearer: env:TOKEN}\n" +
			"  - name: old\n    url: http://127.0.0.1:9/old\n    secret: env:SECRET\n" +
			"  - name: rotated\n    url: https://93.184.215.14/rotated\n    secret: env:BAD\n"
		e := env{"TOKEN": token, "SECRET": secret, "BAD": bad}
		p := planOf(t, a, file, e, "", manifest.Options{})
		want := []struct{ name, setting, message string }{
			{"bad", admin.SettingFilter, "filter: 1:16: "},
			{"old", admin.SettingURL, "127.0.0.1 is loopback"},
			{"rotated", admin.SettingSecret, "secret: "},
		}
		if len(p.Refusals) != len(want) || p.Empty() {
			t.Fatalf("refusals %+v, want %d:\n%s", p.Refusals, len(want), p)
		}
		for i, w := range want {
			r := p.Refusals[i]
			if r.Name != w.name || r.Setting != w.setting || !strings.Contains(r.Message, w.message) {
				t.Errorf("refusal %d = %+v, want %s's %s refused (%q)", i, r, w.name, w.setting, w.message)
			}
		}
		for _, line := range []string{"! refused bad (line 5) [filter]: filter: 1:16: ", "! refused old (line 9) [url]: url: 127.0.0.1 is loopback",
			"! refused rotated (line 12) [secret]: secret: ", "\n3 refusals: nothing can be applied until the file is mended\n"} {
			if !strings.Contains(p.String(), line) {
				t.Errorf("plan lacks %q:\n%s", line, p)
			}
		}
		noSecrets(t, "the plan", p.String(), token, secret, bad)
		r, err := manifest.Apply(ctx, a, p)
		if !errors.Is(err, manifest.ErrRefused) || !errors.Is(err, admin.ErrInvalid) || len(r.Done) != 0 {
			t.Fatalf("Apply = %+v, %v: want ErrRefused, nothing done", r.Done, err)
		}
		if _, err := a.Find(ctx, "good"); !errors.Is(err, admin.ErrNotFound) {
			t.Errorf("Apply of a refused plan created good: %v", err)
		}
		if after, _ := stored(t, a, "old"); !reflect.DeepEqual(before, after) {
			t.Errorf("Apply of a refused plan changed old")
		}

		fixed := strings.NewReplacer("'payload.total >'", "'payload.total > 1'", "http://127.0.0.1:9/old", "https://93.184.215.14/old2").Replace(file)
		e["BAD"], _ = signature.GenerateSecret()
		p = planOf(t, a, fixed, e, "", manifest.Options{})
		if counts(p) != [4]int{2, 2, 0, 0} || len(p.Refusals) != 0 {
			t.Fatalf("plan after the fix %v:\n%s", counts(p), p)
		}
		applyOK(t, a, p)
		if again := planOf(t, a, fixed, e, "", manifest.Options{}); !again.Empty() {
			t.Errorf("plan after:\n%s", again)
		}
	})
}

// Changing the envelope from CloudEvents to another drops its source,
// and the next plan is empty; an endpoint without its keyring cannot be
// compared.
func TestEnvelopeChangeAndNoKeyring(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s)
		file := "version: 1\nendpoints:\n  - name: ce\n    url: https://93.184.215.14/ce\n    envelope: cloudevents-binary\n    ce_source: /shop\n"
		applyOK(t, a, planOf(t, a, file, env{}, "", manifest.Options{}))
		if again := planOf(t, a, file, env{}, "", manifest.Options{}); !again.Empty() {
			t.Fatalf("plan after:\n%s", again)
		}
		std := strings.Replace(file, "    envelope: cloudevents-binary\n    ce_source: /shop\n", "    envelope: standard\n", 1)
		p := planOf(t, a, std, env{}, "", manifest.Options{})
		if !strings.Contains(p.String(), `    envelope: "cloudevents-binary" -> "standard"`) || !strings.Contains(p.String(), `    ce_source: "/shop" -> ""`) {
			t.Errorf("plan:\n%s", p)
		}
		applyOK(t, a, p)
		if e, _ := stored(t, a, "ce"); e.Envelope != "standard" {
			t.Errorf("envelope stored %q", e.Envelope)
		}
		if again := planOf(t, a, std, env{}, "", manifest.Options{}); !again.Empty() {
			t.Errorf("plan after:\n%s", again)
		}
		blind, err := admin.New(admin.Config{Store: s})
		if err != nil {
			t.Fatal(err)
		}
		m := parse(t, std)
		if _, err := m.Plan(ctx, blind, manifest.Options{}); !errors.Is(err, endpoint.ErrNoKeyring) || !strings.Contains(err.Error(), "endpoint ce: ") {
			t.Errorf("Plan without a keyring: %v", err)
		}
		if _, err := m.Plan(ctx, a, manifest.Options{Grace: -time.Second}); err == nil {
			t.Errorf("Plan with a negative grace: no error")
		}
	})
}

// A broker's endpoint the file turns into a webhook gets a signing
// secret first: the file's, or a new one printed once.
func TestBrokerBecomesWebhook(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		a := newAdmin(t, s)
		secret, _ := signature.GenerateSecret()
		e := env{"SECRET": secret}
		broker := "version: 1\nendpoints:\n  - name: a\n    url: nats://127.0.0.1:4222?subject=a\n  - name: b\n    url: nats://127.0.0.1:4222?subject=b\n"
		applyOK(t, a, planOf(t, a, broker, e, "", manifest.Options{}))
		hooks := "version: 1\nendpoints:\n  - name: a\n    url: https://93.184.215.14/a\n  - name: b\n    url: https://93.184.215.14/b\n    secret: env:SECRET\n"
		p := planOf(t, a, hooks, e, "", manifest.Options{})
		for _, want := range []string{"    secret: changed (none yet: generated, printed once)\n", "    secret: changed (none yet: env:SECRET)\n"} {
			if !strings.Contains(p.String(), want) {
				t.Errorf("plan lacks %q:\n%s", want, p)
			}
		}
		r := applyOK(t, a, p)
		if len(r.Secrets) != 1 || r.Secrets[0].Name != "a" || !strings.HasPrefix(r.Secrets[0].Secret, "whsec_") {
			t.Fatalf("generated %+v, want a's secret", r.Secrets)
		}
		if ea, c := stored(t, a, "a"); ea.URL != "https://93.184.215.14/a" || c.Secret != r.Secrets[0].Secret || c.PreviousSecret != "" {
			t.Errorf("a: %s, its secret not the one printed (or a previous one kept)", ea.URL)
		}
		if _, c := stored(t, a, "b"); c.Secret != secret {
			t.Errorf("b's secret is not the file's")
		}
		if again := planOf(t, a, hooks, e, "", manifest.Options{}); !again.Empty() {
			t.Errorf("plan after:\n%s", again)
		}
	})
}
