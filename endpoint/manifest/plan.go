package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/sink"
)

// Options are how Plan compares the file with the store.
type Options struct {
	// Prune removes the stored endpoints the file does not name; without
	// it they are kept (and listed in Plan.Kept).
	Prune bool
	// Grace is how long an endpoint's current signing secret keeps
	// signing beside the one its secret reference names when they differ
	// (admin.Change.SecretGrace); 0: not at all. Not negative. postbox
	// endpoints apply gives admin.GraceDefault unless told otherwise.
	Grace time.Duration
}

// Action is what a Step does to an endpoint.
type Action string

// The actions of a plan.
const (
	Create    Action = "create"
	Update    Action = "update"
	Remove    Action = "remove"
	Unchanged Action = "unchanged"
)

// Plan is what Apply would do to make the store match a file: a Step for
// each endpoint of the file (in its order), then one for each stored
// endpoint it removes; the conflicts and refusals that keep it from being
// applied; and the stored endpoints it leaves alone. Write shows it: it
// holds the secrets the file references, and shows none.
type Plan struct {
	Steps []Step
	// Conflicts are what Plan would have to guess, and does not: Apply
	// refuses a plan that has any.
	Conflicts []Conflict
	// Refusals are the endpoints of the file admin refuses to create or
	// to change as the file says (its Check, CheckChange and CheckSecret):
	// Apply refuses a plan that has any.
	Refusals []Refusal
	// Kept are the stored endpoints the file does not name, left as they
	// are (without Options.Prune).
	Kept []Kept
}

// Step is one endpoint's change.
type Step struct {
	Action Action
	// Name is the endpoint's, ID the stored endpoint's (zero for Create).
	Name string
	ID   uuid.UUID
	// Diffs are the settings Create sets, or those Update changes, and
	// the credentials either writes (their values never shown).
	Diffs []Diff
	// Line is where the file writes the endpoint (0 for Remove).
	Line int

	want *Endpoint
	// change is the Update, the signing secret's rotation in it (a new
	// one, or one for an endpoint that has none and becomes a webhook).
	change admin.Change
	state  string
}

// Diff is one setting's change, as shown: Old (for Update) and New. A
// credential's Old and New never hold a secret: New is its references
// (Create), or "" (Update: the values differ).
type Diff struct {
	Setting    string
	Old, New   string
	Credential bool
}

// Conflict is a name Plan cannot match with one stored endpoint, or a
// stored endpoint it cannot name.
type Conflict struct {
	Name    string
	IDs     []uuid.UUID
	Message string
}

// Refusal is an endpoint of the file that admin refuses: the setting
// refused (an admin.Setting* name, as the file writes it) and why, which
// never holds a secret.
type Refusal struct {
	Name    string
	Line    int
	Setting string
	Message string
}

// Kept is a stored endpoint the file does not name, kept as it is.
type Kept struct {
	Name string
	ID   uuid.UUID
}

// Counts are how many steps create, update, remove and leave unchanged.
func (p *Plan) Counts() (create, update, remove, unchanged int) {
	for _, s := range p.Steps {
		switch s.Action {
		case Create:
			create++
		case Update:
			update++
		case Remove:
			remove++
		case Unchanged:
			unchanged++
		}
	}
	return
}

// Empty reports whether the plan changes nothing and has no conflict and
// no refusal.
func (p *Plan) Empty() bool {
	c, u, r, _ := p.Counts()
	return c+u+r == 0 && len(p.Conflicts) == 0 && len(p.Refusals) == 0
}

// Plan compares m with the endpoints a manages, by name, and returns what
// Apply would do. It reads m's secret references (Resolve with
// os.LookupEnv, unless Resolve was called) and opens the stored endpoints'
// credentials to compare them (a needs the keyring). It asks a to check
// every endpoint it creates or changes, as Apply will make it (Check,
// CheckChange, CheckSecret), and lists in Plan.Refusals each one refused:
// a bad file is refused before anything is applied. It changes nothing.
func (m *Manifest) Plan(ctx context.Context, a *admin.Admin, o Options) (*Plan, error) {
	if o.Grace < 0 {
		return nil, fmt.Errorf("manifest: Options.Grace %v is negative", o.Grace)
	}
	if !m.resolved {
		if err := m.Resolve(nil); err != nil {
			return nil, err
		}
	}
	views, err := a.List(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string][]admin.View{}
	for _, v := range views {
		byName[v.Name] = append(byName[v.Name], v)
	}
	p := &Plan{}
	for i := range m.Endpoints {
		e := &m.Endpoints[i]
		switch stored := byName[e.Name]; len(stored) {
		case 0:
			s := createStep(a, e)
			if err := p.check(ctx, a, s); err != nil {
				return nil, err
			}
			p.Steps = append(p.Steps, s)
		case 1:
			s, err := updateStep(ctx, a, e, stored[0].ID, o.Grace)
			if err != nil {
				return nil, err
			}
			if err := p.check(ctx, a, s); err != nil {
				return nil, err
			}
			p.Steps = append(p.Steps, s)
		default:
			p.Conflicts = append(p.Conflicts, Conflict{Name: e.Name, IDs: ids(stored),
				Message: fmt.Sprintf("%d stored endpoints have this name: give them distinct names (or remove all but one), then plan again", len(stored))})
		}
	}
	named := map[string]bool{}
	for _, e := range m.Endpoints {
		named[e.Name] = true
	}
	for _, v := range views {
		switch {
		case named[v.Name]:
		case !o.Prune:
			p.Kept = append(p.Kept, Kept{Name: v.Name, ID: v.ID})
		case v.Name == "":
			p.Conflicts = append(p.Conflicts, Conflict{IDs: []uuid.UUID{v.ID},
				Message: "a stored endpoint without a name: prune removes only the endpoints it can name: name it or remove it, then plan again"})
		default:
			p.Steps = append(p.Steps, Step{Action: Remove, Name: v.Name, ID: v.ID})
		}
	}
	return p, nil
}

// check asks a whether it would make step s as Apply makes it, noting
// its refusal (a *admin.FieldError) in p.Refusals; other errors (no
// keyring, the store's) are returned.
func (p *Plan) check(ctx context.Context, a *admin.Admin, s Step) error {
	var err error
	switch {
	case s.Action == Create:
		_, err = a.Check(ctx, s.want.Settings, credentials(a, s.want))
	case s.Action == Update && changes(s.change):
		_, err = a.CheckChange(ctx, s.ID, s.change)
	}
	var refused *admin.FieldError
	switch {
	case errors.As(err, &refused):
		p.Refusals = append(p.Refusals, Refusal{Name: s.Name, Line: s.Line, Setting: refused.Setting, Message: s.want.hideURL(refused.Message)})
	case err != nil:
		return fmt.Errorf("endpoint %s: %w", printable.String(s.Name), err)
	}
	return nil
}

// hideURL is text with e's URL, when the file gives it as a reference,
// written as that reference: a referenced URL is a secret.
func (e *Endpoint) hideURL(text string) string {
	if e == nil || e.URLRef == nil || e.URL == "" {
		return text
	}
	return strings.NewReplacer(e.URL, e.URLRef.String(), sink.Redact(e.URL), e.URLRef.String()).Replace(text)
}

// ids are the ids of views.
func ids(views []admin.View) []uuid.UUID {
	out := make([]uuid.UUID, len(views))
	for i, v := range views {
		out[i] = v.ID
	}
	return out
}

// createStep is the step that creates e: every setting it gives, and its
// credentials' references.
func createStep(a *admin.Admin, e *Endpoint) Step {
	s := Step{Action: Create, Name: e.Name, Line: e.Line, want: e, state: e.State}
	zero := canonical(admin.Settings{})
	want := canonical(e.Settings)
	for _, f := range settingFields {
		switch n := f.show(want); {
		case f.name == admin.SettingURL:
			s.Diffs = append(s.Diffs, Diff{Setting: f.name, New: a.DescribeURL(want.URL)})
		case n != f.show(zero) || f.name == admin.SettingConcurrency:
			s.Diffs = append(s.Diffs, Diff{Setting: f.name, New: n})
		}
	}
	if e.State != "" {
		s.Diffs = append(s.Diffs, Diff{Setting: admin.SettingState, New: e.State})
	}
	switch {
	case e.Secret != nil:
		s.Diffs = append(s.Diffs, Diff{Setting: admin.SettingSecret, New: e.Secret.String(), Credential: true})
	case a.IsWebhook(e.URL):
		s.Diffs = append(s.Diffs, Diff{Setting: admin.SettingSecret, New: "generated, printed once", Credential: true})
	}
	if len(e.Headers) > 0 {
		var hs []string
		for _, name := range slices.Sorted(maps.Keys(e.Headers)) {
			hs = append(hs, printable.String(name)+" ("+printable.String(e.Headers[name].String())+")")
		}
		s.Diffs = append(s.Diffs, Diff{Setting: admin.SettingHeaders, New: strings.Join(hs, ", "), Credential: true})
	}
	if e.Auth != nil {
		s.Diffs = append(s.Diffs, Diff{Setting: admin.SettingAuth, New: e.Auth.String(), Credential: true})
	}
	if e.TLS != nil {
		s.Diffs = append(s.Diffs, Diff{Setting: admin.SettingTLS, New: e.TLS.String(), Credential: true})
	}
	return s
}

// credentials are e's credentials as the store keeps them for its URL: a
// broker's auth.basic is the user and password of its URL (URLUser,
// URLPassword), as postbox endpoints add takes them from the URL.
func credentials(a *admin.Admin, e *Endpoint) endpoint.Credentials {
	c := e.creds
	if c.Basic != nil && !a.IsWebhook(e.URL) {
		c.URLUser, c.URLPassword, c.Basic = c.Basic.User, c.Basic.Password, nil
	}
	return c
}

// withUserInfo is rawURL with user and password as its user information,
// which admin moves into the sealed credentials.
func withUserInfo(rawURL, user, password string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("url: %w", err)
	}
	u.User = url.UserPassword(user, password)
	return u.String(), nil
}

// String names the authentication and its references.
func (a *Auth) String() string {
	switch {
	case a.Basic != nil:
		return "basic (user " + strconv.Quote(a.Basic.User) + ", password " + printable.String(a.Basic.Password.String()) + ")"
	case a.Bearer != nil:
		return "bearer (" + printable.String(a.Bearer.String()) + ")"
	case a.OAuth2 != nil:
		return "oauth2 (" + strconv.Quote(sink.Redact(a.OAuth2.TokenURL)) + ", client " + strconv.Quote(a.OAuth2.ClientID) +
			", secret " + printable.String(a.OAuth2.ClientSecret.String()) + ")"
	}
	return "none"
}

// String names the TLS parts and their references.
func (t *TLS) String() string {
	var parts []string
	for _, p := range []struct {
		name string
		ref  *Ref
	}{{"cert", t.Cert}, {"key", t.Key}, {"ca", t.CA}} {
		if p.ref != nil {
			parts = append(parts, p.name+" "+printable.String(p.ref.String()))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// updateStep compares e with the stored endpoint id: its settings, state
// and credentials (opened with a's keyring).
func updateStep(ctx context.Context, a *admin.Admin, e *Endpoint, id uuid.UUID, grace time.Duration) (Step, error) {
	s := Step{Action: Unchanged, Name: e.Name, ID: id, Line: e.Line, want: e}
	stored, err := a.Find(ctx, id.String())
	if err != nil {
		return s, err
	}
	have, want := admin.ViewOf(stored, time.Time{}).Settings, canonical(e.Settings)
	have.URL = stored.URL // whole, unlike View's
	for _, f := range settingFields {
		switch {
		case f.equal(have, want):
		case f.name == admin.SettingURL: // its path and query are not shown: they may hold a token
			f.set(&s.change, want)
			s.Diffs = append(s.Diffs, Diff{Setting: f.name, Old: a.DescribeURL(have.URL), New: a.DescribeURL(want.URL)})
		default:
			f.set(&s.change, want)
			s.Diffs = append(s.Diffs, Diff{Setting: f.name, Old: f.show(have), New: f.show(want)})
		}
	}
	if e.State != "" && e.State != stored.State {
		s.state = e.State
		s.Diffs = append(s.Diffs, Diff{Setting: admin.SettingState, Old: stored.State, New: e.State})
	}
	c, err := a.Open(stored)
	if err != nil {
		return s, fmt.Errorf("endpoint %s: %w", printable.String(e.Name), err)
	}
	wantC := credentials(a, e)
	switch {
	case c.Secret == "" && a.IsWebhook(want.URL):
		// A broker's endpoint becoming a webhook: it needs a secret
		// first, the file's or a new one.
		secret := "generated, printed once"
		if e.Secret != nil {
			secret = e.Secret.String()
		}
		s.change.Secret = &wantC.Secret // "": generated
		s.Diffs = append(s.Diffs, Diff{Setting: admin.SettingSecret, Credential: true, New: "none yet: " + secret})
	case e.Secret != nil && c.Secret != wantC.Secret:
		s.change.Secret, s.change.SecretGrace = &wantC.Secret, grace
		s.Diffs = append(s.Diffs, Diff{Setting: admin.SettingSecret, Credential: true,
			New: fmt.Sprintf("rotated: the old one signs too for %v", grace)})
	}
	cc := &s.change.Credentials
	if !maps.Equal(c.Headers, wantC.Headers) {
		cc.SetHeaders, cc.Headers = true, wantC.Headers
		s.Diffs = append(s.Diffs, Diff{Setting: admin.SettingHeaders, Credential: true})
	}
	if !sameAuth(c, wantC) {
		s.Diffs = append(s.Diffs, Diff{Setting: admin.SettingAuth, Credential: true})
		if wantC.URLUser != "" {
			// A broker's user and password change with its URL.
			u, err := withUserInfo(want.URL, wantC.URLUser, wantC.URLPassword)
			if err != nil {
				return s, fmt.Errorf("endpoint %s: %w", printable.String(e.Name), err)
			}
			s.change.URL = &u
		} else {
			cc.SetAuth, cc.Basic, cc.Bearer, cc.OAuth2 = true, wantC.Basic, wantC.Bearer, wantC.OAuth2
		}
	}
	if !sameTLS(c.TLS, wantC.TLS) {
		cc.SetTLS, cc.TLS = true, wantC.TLS
		s.Diffs = append(s.Diffs, Diff{Setting: admin.SettingTLS, Credential: true})
	}
	if len(s.Diffs) > 0 {
		s.Action = Update
	}
	return s, nil
}

// sameAuth reports whether a and b authenticate alike (a broker's user
// and password included).
func sameAuth(a, b endpoint.Credentials) bool {
	if a.URLUser != b.URLUser || a.URLPassword != b.URLPassword || a.Bearer != b.Bearer || (a.Basic == nil) != (b.Basic == nil) || (a.OAuth2 == nil) != (b.OAuth2 == nil) {
		return false
	}
	if a.Basic != nil && *a.Basic != *b.Basic {
		return false
	}
	if a.OAuth2 == nil {
		return true
	}
	x, y := a.OAuth2, b.OAuth2
	return x.TokenURL == y.TokenURL && x.ClientID == y.ClientID && x.ClientSecret == y.ClientSecret &&
		slices.Equal(x.Scopes, y.Scopes) && maps.EqualFunc(x.Params, y.Params, slices.Equal)
}

// sameTLS reports whether a and b are the same client certificate and
// CA, nil being none.
func sameTLS(a, b *endpoint.ClientTLS) bool {
	var none endpoint.ClientTLS
	if a == nil {
		a = &none
	}
	if b == nil {
		b = &none
	}
	return *a == *b
}

// canonical is admin.Canonical(s), so that two ways of writing one
// setting compare equal; s as it is when admin refuses it (Plan's check
// says why).
func canonical(s admin.Settings) admin.Settings {
	if c, err := admin.Canonical(s); err == nil {
		return c
	}
	return s
}

// settingField is one setting of admin.Settings: how to show it, compare
// it and change it.
type settingField struct {
	name  string
	show  func(admin.Settings) string
	equal func(a, b admin.Settings) bool
	set   func(c *admin.Change, s admin.Settings)
}

// settingFields are the settings Plan compares (Name is the identity).
var settingFields = []settingField{
	textField(admin.SettingURL, func(s *admin.Settings) *string { return &s.URL }, func(c *admin.Change, v *string) { c.URL = v }),
	{name: admin.SettingTypes,
		show: func(s admin.Settings) string {
			q := make([]string, len(s.Types))
			for i, t := range s.Types {
				q[i] = strconv.Quote(t)
			}
			return "[" + strings.Join(q, ", ") + "]"
		},
		equal: func(a, b admin.Settings) bool { return slices.Equal(a.Types, b.Types) },
		set: func(c *admin.Change, s admin.Settings) {
			t := slices.Clone(s.Types)
			if t == nil {
				t = []string{}
			}
			c.Types = &t
		}},
	textField(admin.SettingFilter, func(s *admin.Settings) *string { return &s.Filter }, func(c *admin.Change, v *string) { c.Filter = v }),
	textField(admin.SettingEnvelope, func(s *admin.Settings) *string { return &s.Envelope }, func(c *admin.Change, v *string) { c.Envelope = v }),
	textField(admin.SettingCESource, func(s *admin.Settings) *string { return &s.CESource }, func(c *admin.Change, v *string) {
		// Only the CloudEvents envelopes have a source: another envelope
		// given drops it.
		if c.Envelope == nil || strings.HasPrefix(*c.Envelope, "cloudevents") {
			c.CESource = v
		}
	}),
	textField(admin.SettingSignature, func(s *admin.Settings) *string { return &s.Signature }, func(c *admin.Change, v *string) { c.Signature = v }),
	{name: admin.SettingRate,
		show:  func(s admin.Settings) string { return strconv.FormatFloat(s.RatePerSecond, 'g', -1, 64) },
		equal: func(a, b admin.Settings) bool { return a.RatePerSecond == b.RatePerSecond },
		set:   func(c *admin.Change, s admin.Settings) { c.RatePerSecond = &s.RatePerSecond }},
	{name: admin.SettingConcurrency,
		show:  func(s admin.Settings) string { return strconv.Itoa(s.Concurrency) },
		equal: func(a, b admin.Settings) bool { return a.Concurrency == b.Concurrency },
		set:   func(c *admin.Change, s admin.Settings) { c.Concurrency = &s.Concurrency }},
	boolField(admin.SettingShadow, func(s *admin.Settings) *bool { return &s.Shadow }, func(c *admin.Change, v *bool) { c.Shadow = v }),
	boolField(admin.SettingAllowPrivate, func(s *admin.Settings) *bool { return &s.AllowPrivate }, func(c *admin.Change, v *bool) { c.AllowPrivate = v }),
}

// textField is a text setting, shown quoted (but the URL: Plan shows it
// described, admin.Admin.DescribeURL).
func textField(name string, get func(*admin.Settings) *string, set func(*admin.Change, *string)) settingField {
	return settingField{name: name,
		show:  func(s admin.Settings) string { return strconv.Quote(*get(&s)) },
		equal: func(a, b admin.Settings) bool { return *get(&a) == *get(&b) },
		set:   func(c *admin.Change, s admin.Settings) { set(c, get(&s)) }}
}

func boolField(name string, get func(*admin.Settings) *bool, set func(*admin.Change, *bool)) settingField {
	return settingField{name: name,
		show:  func(s admin.Settings) string { return strconv.FormatBool(*get(&s)) },
		equal: func(a, b admin.Settings) bool { return *get(&a) == *get(&b) },
		set:   func(c *admin.Change, s admin.Settings) { set(c, get(&s)) }}
}

// String is the plan as Write writes it.
func (p *Plan) String() string {
	var b bytes.Buffer
	_ = p.Write(&b)
	return b.String()
}

// Write writes the plan for people, as a diff: "+ create NAME" with the
// settings it sets, "~ update NAME (ID)" with "setting: old -> new" for
// each change and "credential: changed" for each credential, "- remove
// NAME (ID)", the conflicts ("! conflict"), the refusals ("! refused NAME
// (line N) [setting]: why") and the endpoints kept, then the
// counts: "N to create, M to update, K to remove, L unchanged", or "no
// changes" when the plan is Empty. No secret is written.
func (p *Plan) Write(w io.Writer) error {
	var b strings.Builder
	for _, s := range p.Steps {
		name := printable.String(s.Name)
		switch s.Action {
		case Create:
			fmt.Fprintf(&b, "+ create %s\n", name)
			for _, d := range s.Diffs {
				fmt.Fprintf(&b, "    %s: %s\n", d.Setting, d.New)
			}
		case Update:
			fmt.Fprintf(&b, "~ update %s (%s)\n", name, s.ID)
			for _, d := range s.Diffs {
				switch {
				case d.Setting == admin.SettingURL:
					fmt.Fprintf(&b, "    %s: changed (%s)\n", d.Setting, d.New)
				case d.Credential && d.New != "":
					fmt.Fprintf(&b, "    %s: changed (%s)\n", d.Setting, d.New)
				case d.Credential:
					fmt.Fprintf(&b, "    %s: changed\n", d.Setting)
				default:
					fmt.Fprintf(&b, "    %s: %s -> %s\n", d.Setting, d.Old, d.New)
				}
			}
		case Remove:
			fmt.Fprintf(&b, "- remove %s (%s), with its deliveries and attempts\n", name, s.ID)
		}
	}
	for _, c := range p.Conflicts {
		ids := make([]string, len(c.IDs))
		for i, id := range c.IDs {
			ids[i] = id.String()
		}
		what := "(no name)"
		if c.Name != "" {
			what = printable.String(c.Name)
		}
		fmt.Fprintf(&b, "! conflict %s (%s): %s\n", what, strings.Join(ids, ", "), c.Message)
	}
	for _, r := range p.Refusals {
		fmt.Fprintf(&b, "! refused %s (line %d) [%s]: %s\n", printable.String(r.Name), r.Line, r.Setting, printable.String(r.Message))
	}
	for _, k := range p.Kept {
		name := "(no name)"
		if k.Name != "" {
			name = printable.String(k.Name)
		}
		fmt.Fprintf(&b, "  kept %s (%s): not in the file (prune removes it)\n", name, k.ID)
	}
	create, update, remove, unchanged := p.Counts()
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	switch {
	case p.Empty() && unchanged == 1:
		b.WriteString("no changes: 1 endpoint matches the file\n")
	case p.Empty():
		fmt.Fprintf(&b, "no changes: %d endpoints match the file\n", unchanged)
	default:
		fmt.Fprintf(&b, "%d to create, %d to update, %d to remove, %d unchanged\n", create, update, remove, unchanged)
	}
	if n := len(p.Conflicts); n > 0 {
		fmt.Fprintf(&b, "%s: nothing can be applied until resolved\n", plural(n, "conflict"))
	}
	if n := len(p.Refusals); n > 0 {
		fmt.Fprintf(&b, "%s: nothing can be applied until the file is mended\n", plural(n, "refusal"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// plural is n and noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
