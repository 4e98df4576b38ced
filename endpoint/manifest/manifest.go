package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/net/http/httpguts"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/store"
)

// Version is the version of the file format this package reads: the
// file's version key must say it.
const Version = 1

// MaxSize bounds the file Load reads, in bytes.
const MaxSize = 4 << 20

// maxValues bounds the values Parse visits, aliases and merge keys
// expanded: what keeps an alias bomb from expanding without end.
const maxValues = 1 << 18

// Manifest is a parsed file: the endpoints an operator wants.
type Manifest struct {
	// Version is the file format's version (Version).
	Version int
	// Endpoints are the file's endpoints, in its order, their names
	// unique.
	Endpoints []Endpoint
	// Dir is the folder a relative file:PATH reference is read from ("":
	// the working directory); postbox endpoints apply sets it to the
	// file's folder.
	Dir string

	resolved bool
}

// Endpoint is one endpoint of the file: its settings and references to
// its secrets.
type Endpoint struct {
	// Settings are the endpoint's settings, Name its identity.
	admin.Settings
	// URLRef, when not nil, is the reference the file gives for the URL
	// (url: env:NAME or file:PATH: a chat service's incoming-webhook URL
	// is a secret); Resolve reads it into Settings.URL.
	URLRef *Ref
	// State is store.EndpointEnabled or store.EndpointDisabled; "" leaves
	// a stored endpoint's state as it is (a new one is enabled).
	State string
	// Secret is the signing secret's reference; nil: generated on create,
	// left as it is after.
	Secret *Ref
	// Headers are static headers, their names canonical
	// (http.CanonicalHeaderKey), their values references.
	Headers map[string]Ref
	// Auth authenticates a webhook's requests; nil: none.
	Auth *Auth
	// TLS is a webhook's client certificate and CA; nil: none.
	TLS *TLS
	// Line and Column are where the endpoint starts in the file (0 for an
	// Endpoint made otherwise).
	Line, Column int

	creds endpoint.Credentials
}

// Auth is a webhook's authentication: one of Basic, Bearer and OAuth2.
type Auth struct {
	Basic  *Basic
	Bearer *Ref
	OAuth2 *OAuth2
}

// Basic is HTTP Basic authentication: the user in the file, the password
// referenced.
type Basic struct {
	User     string
	Password Ref
}

// OAuth2 is the OAuth 2.0 client credentials grant: the client secret
// referenced, the rest in the file.
type OAuth2 struct {
	TokenURL     string
	ClientID     string
	ClientSecret Ref
	Scopes       []string
	Params       map[string][]string
}

// TLS is a webhook's client certificate and key and the CA its server's
// certificate must chain to, each a reference to PEM text (read whole: no
// new line is trimmed); nil: not given.
type TLS struct {
	Cert, Key, CA *Ref
}

// Ref is a reference to a secret: Scheme "env" (Name an environment
// variable) or "file" (Name a file's path).
type Ref struct {
	Scheme, Name string
	// Line and Column are where the reference is written in the file.
	Line, Column int
}

// String is the reference as the file writes it: env:NAME or file:PATH.
// It is no secret.
func (r Ref) String() string { return r.Scheme + ":" + r.Name }

// Error is a refusal of the file: where (Line and Column from 1, 0 when
// unknown), which key (a path such as endpoints[2].auth.bearer) and why. It
// never quotes a secret nor a value of the file.
type Error struct {
	Line, Column int
	Key          string
	Message      string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", e.Line, e.Column)
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Load reads a file of at most MaxSize bytes from r and parses it (Parse).
func Load(r io.Reader) (*Manifest, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, &Error{Message: fmt.Sprintf("the file is larger than %d bytes", MaxSize)}
	}
	return Parse(data)
}

// Parse parses a file: one YAML document with version and endpoints (and
// any top-level key starting with x-, ignored: a place for anchors).
// Unknown keys, a key given twice, a name given twice, a value of the
// wrong kind and a secret written in the file are refused with an *Error.
// Anchors, aliases and merge keys (<<) are followed, within a bound.
func Parse(data []byte) (*Manifest, error) {
	// The document is decoded into nodes, not into structs with the
	// decoder's KnownFields: the walk below refuses unknown keys itself,
	// naming their line and column, which KnownFields' errors do not.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, &Error{Message: "the file is empty: want version: 1 and endpoints"}
	case err != nil:
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return nil, yamlError(err)
		}
		return nil, &Error{Line: line, Column: 1, Message: "a second YAML document (after ---): the file holds one"}
	}
	p := &parser{}
	return p.manifest(&doc)
}

// yamlError is a syntax error of package yaml, whose text gives the line
// and names no value.
func yamlError(err error) error {
	return &Error{Message: strings.TrimPrefix(err.Error(), "yaml: ")}
}

// maxMerges bounds how deeply merge keys (<<) merge mappings that merge
// others.
const maxMerges = 32

// parser walks the document's nodes, counting the values it visits and
// the merges it is in.
type parser struct{ values, merges int }

// node returns n, an alias followed, counting it against maxValues.
func (p *parser) node(n *yaml.Node, key string) (*yaml.Node, error) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	p.values++
	if p.values > maxValues {
		return nil, p.errorAt(n, key, fmt.Sprintf("the file expands to more than %d values (through aliases): write it out", maxValues))
	}
	return n, nil
}

func (p *parser) errorAt(n *yaml.Node, key, message string) *Error {
	return &Error{Line: n.Line, Column: n.Column, Key: key, Message: message}
}

// pair is one key and its value in a mapping.
type pair struct{ key, value *yaml.Node }

// pairs returns mapping n's pairs, keys written in n first, then those of
// its merge keys (<<) that n does not write, in their order. A key given
// twice is refused.
func (p *parser) pairs(n *yaml.Node, key string) ([]pair, error) {
	n, err := p.node(n, key)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errorAt(n, key, "want a mapping (key: value lines)")
	}
	var own, merged []pair
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			m, err := p.merge(v, key)
			if err != nil {
				return nil, err
			}
			merged = append(merged, m...)
			continue
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			return nil, p.errorAt(k, key, "a key must be a plain text")
		}
		if seen[k.Value] {
			return nil, p.errorAt(k, joinKey(key, k.Value), "the key is given twice")
		}
		seen[k.Value] = true
		own = append(own, pair{k, v})
	}
	for _, m := range merged {
		if !seen[m.key.Value] {
			seen[m.key.Value] = true
			own = append(own, m)
		}
	}
	return own, nil
}

// merge returns the pairs a merge key's value brings: a mapping's, or
// those of a sequence of mappings, the earlier winning.
func (p *parser) merge(v *yaml.Node, key string) ([]pair, error) {
	v, err := p.node(v, key)
	if err != nil {
		return nil, err
	}
	p.merges++
	defer func() { p.merges-- }()
	if p.merges > maxMerges {
		return nil, p.errorAt(v, key, fmt.Sprintf("merge keys (<<) nested deeper than %d", maxMerges))
	}
	sources := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		sources = v.Content
	}
	var out []pair
	for _, s := range sources {
		m, err := p.pairs(s, mergeKey(key))
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}

// mergeKey is the path of what a merge key under key brings.
func mergeKey(key string) string {
	if strings.HasSuffix(key, "<<") {
		return key
	}
	return joinKey(key, "<<")
}

// field reads one key's value; a null value (key: with nothing, ~) is no
// value and never reaches it.
type field func(v *yaml.Node, key string) error

// mapping reads mapping n with fields, refusing a key it does not have.
func (p *parser) mapping(n *yaml.Node, key string, fields map[string]field, known string) error {
	pairs, err := p.pairs(n, key)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		k := joinKey(key, kv.key.Value)
		f, ok := fields[kv.key.Value]
		if !ok && key == "" && strings.HasPrefix(kv.key.Value, "x-") {
			continue // the top's x- keys are the file's own: a place for anchors
		}
		if !ok {
			return p.errorAt(kv.key, key, fmt.Sprintf("unknown key %q (known: %s)", shortText(kv.key.Value), known))
		}
		v, err := p.node(kv.value, k)
		if err != nil {
			return err
		}
		if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
			continue
		}
		if err := f(v, k); err != nil {
			return err
		}
	}
	return nil
}

// joinKey is the path of key under parent.
func joinKey(parent, key string) string {
	key = shortText(key)
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// shortText is a key of the file as an error shows it: escaped, and cut
// after 64 bytes.
func shortText(s string) string {
	if len(s) > 64 {
		cut := 64
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return printable.String(s)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func (p *parser) manifest(doc *yaml.Node) (*Manifest, error) {
	root := doc
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, &Error{Message: "the file is empty: want version: 1 and endpoints"}
		}
		root = doc.Content[0]
	}
	m := &Manifest{}
	endpoints := false
	var list *yaml.Node
	err := p.mapping(root, "", map[string]field{
		"version": func(v *yaml.Node, key string) error {
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || v.Decode(&m.Version) != nil || m.Version != Version {
				return p.errorAt(v, key, fmt.Sprintf("this postbox reads version %d files", Version))
			}
			return nil
		},
		"endpoints": func(v *yaml.Node, key string) error {
			endpoints, list = true, v
			return nil
		},
	}, "version, endpoints")
	if err != nil {
		return nil, err
	}
	if m.Version == 0 {
		return nil, &Error{Line: root.Line, Column: root.Column, Key: "version", Message: fmt.Sprintf("required: version: %d", Version)}
	}
	if !endpoints {
		return nil, &Error{Line: root.Line, Column: root.Column, Key: "endpoints", Message: "required: the list of endpoints ([] for none)"}
	}
	if err := p.endpoints(m, list); err != nil {
		return nil, err
	}
	return m, nil
}

func (p *parser) endpoints(m *Manifest, list *yaml.Node) error {
	if list.Kind != yaml.SequenceNode {
		return p.errorAt(list, "endpoints", "want a list of endpoints (- name: ...)")
	}
	names := map[string]int{}
	for i, item := range list.Content {
		key := fmt.Sprintf("endpoints[%d]", i)
		item, err := p.node(item, key)
		if err != nil {
			return err
		}
		e, err := p.endpoint(item, key)
		if err != nil {
			return err
		}
		if e.Name == "" {
			return p.errorAt(item, key+".name", "required: the endpoint's name, its identity")
		}
		if line, dup := names[e.Name]; dup {
			return p.errorAt(item, key+".name", fmt.Sprintf("%q is the name of the endpoint at line %d too: names are unique", shortText(e.Name), line))
		}
		names[e.Name] = item.Line
		m.Endpoints = append(m.Endpoints, e)
	}
	return nil
}

// endpointKeys are the keys of an endpoint, for the message of an unknown
// one.
const endpointKeys = "name, url, types, filter, envelope, ce_source, signature, rate_per_second, concurrency, shadow, allow_private, state, secret, headers, auth, tls"

func (p *parser) endpoint(n *yaml.Node, key string) (Endpoint, error) {
	e := Endpoint{Line: n.Line, Column: n.Column}
	s := &e.Settings
	err := p.mapping(n, key, map[string]field{
		admin.SettingName: p.text(&s.Name),
		admin.SettingURL: func(v *yaml.Node, key string) error {
			if err := p.text(&s.URL)(v, key); err != nil {
				return err
			}
			if isRef(s.URL) {
				r, err := p.ref(v, key)
				e.URLRef, s.URL = &r, ""
				return err
			}
			if hasUserInfo(s.URL) {
				return p.errorAt(v, key, "user information (user:password@) in the URL is a credential, never written in the file: "+
					"give a webhook's as auth.basic, its password a reference (the value is not shown)")
			}
			return nil
		},
		admin.SettingTypes:     p.texts(&s.Types),
		admin.SettingFilter:    p.text(&s.Filter),
		admin.SettingEnvelope:  p.text(&s.Envelope),
		admin.SettingCESource:  p.text(&s.CESource),
		admin.SettingSignature: p.text(&s.Signature),
		admin.SettingRate: func(v *yaml.Node, key string) error {
			tag := v.ShortTag()
			if v.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || v.Decode(&s.RatePerSecond) != nil ||
				math.IsNaN(s.RatePerSecond) || math.IsInf(s.RatePerSecond, 0) {
				return p.errorAt(v, key, "want a number of deliveries per second (0: no limit)")
			}
			return nil
		},
		admin.SettingConcurrency: func(v *yaml.Node, key string) error {
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || v.Decode(&s.Concurrency) != nil {
				return p.errorAt(v, key, "want a whole number of deliveries in flight")
			}
			return nil
		},
		admin.SettingShadow:       p.flag(&s.Shadow),
		admin.SettingAllowPrivate: p.flag(&s.AllowPrivate),
		"state": func(v *yaml.Node, key string) error {
			if err := p.text(&e.State)(v, key); err != nil {
				return err
			}
			if e.State != store.EndpointEnabled && e.State != store.EndpointDisabled {
				return p.errorAt(v, key, "want enabled or disabled (absent: left as it is)")
			}
			return nil
		},
		admin.SettingSecret: func(v *yaml.Node, key string) error {
			r, err := p.ref(v, key)
			e.Secret = &r
			return err
		},
		admin.SettingHeaders: func(v *yaml.Node, key string) error {
			h, err := p.headers(v, key)
			e.Headers = h
			return err
		},
		admin.SettingAuth: func(v *yaml.Node, key string) error {
			a, err := p.auth(v, key)
			e.Auth = a
			return err
		},
		admin.SettingTLS: func(v *yaml.Node, key string) error {
			t := &TLS{}
			e.TLS = t
			return p.mapping(v, key, map[string]field{
				"cert": p.refPtr(&t.Cert),
				"key":  p.refPtr(&t.Key),
				"ca":   p.refPtr(&t.CA),
			}, "cert, key, ca")
		},
	}, endpointKeys)
	return e, err
}

// text reads a plain text value into s: a string (or a number, as
// written); not a bool, a list or a mapping.
func (p *parser) text(s *string) field {
	return func(v *yaml.Node, key string) error {
		switch v.ShortTag() {
		case "!!str", "!!int", "!!float", "!!timestamp":
			if v.Kind == yaml.ScalarNode {
				*s = v.Value
				return nil
			}
		}
		return p.errorAt(v, key, "want a text (quote it)")
	}
}

// texts reads a list of texts.
func (p *parser) texts(s *[]string) field {
	return func(v *yaml.Node, key string) error {
		if v.Kind != yaml.SequenceNode {
			return p.errorAt(v, key, "want a list, such as [a, b]")
		}
		out := make([]string, 0, len(v.Content))
		for i, item := range v.Content {
			k := fmt.Sprintf("%s[%d]", key, i)
			item, err := p.node(item, k)
			if err != nil {
				return err
			}
			var t string
			if err := p.text(&t)(item, k); err != nil {
				return err
			}
			out = append(out, t)
		}
		*s = out
		return nil
	}
}

// flag reads true or false.
func (p *parser) flag(b *bool) field {
	return func(v *yaml.Node, key string) error {
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || v.Decode(b) != nil {
			return p.errorAt(v, key, "want true or false")
		}
		return nil
	}
}

// ref reads a secret's reference, refusing anything else without quoting
// it: it may be the secret itself.
func (p *parser) ref(v *yaml.Node, key string) (Ref, error) {
	r := Ref{Line: v.Line, Column: v.Column}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		return r, p.errorAt(v, key, refMessage)
	}
	scheme, name, _ := strings.Cut(v.Value, ":")
	switch {
	case scheme == "env" && validEnvName(name):
		r.Scheme, r.Name = scheme, name
	case scheme == "env":
		return r, p.errorAt(v, key, "env:NAME: want the name of an environment variable (letters, digits and _, not starting with a digit)")
	case scheme == "file" && name != "" && !strings.ContainsRune(name, 0):
		r.Scheme, r.Name = scheme, name
	case scheme == "file":
		return r, p.errorAt(v, key, "file:PATH: want a file's path")
	default:
		return r, p.errorAt(v, key, refMessage)
	}
	return r, nil
}

// refMessage refuses a secret written in the file.
const refMessage = "a secret is given as a reference, env:NAME or file:PATH, never written in the file (the value is not shown)"

// refPtr reads a reference into *r.
func (p *parser) refPtr(r **Ref) field {
	return func(v *yaml.Node, key string) error {
		ref, err := p.ref(v, key)
		*r = &ref
		return err
	}
}

// isRef reports whether a URL given is a reference: env:NAME or
// file:PATH (no endpoint's URL has these schemes).
func isRef(rawURL string) bool {
	return strings.HasPrefix(rawURL, "env:") || strings.HasPrefix(rawURL, "file:")
}

// hasUserInfo reports whether rawURL's authority holds user information:
// what comes before an @ between :// and the path, query or fragment.
func hasUserInfo(rawURL string) bool {
	_, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return false
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return strings.Contains(rest, "@")
}

// validEnvName reports whether name can be an environment variable's
// name as a shell writes it.
func validEnvName(name string) bool {
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for _, c := range []byte(name) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// headers reads static headers: names canonical and given once, values
// references.
func (p *parser) headers(v *yaml.Node, key string) (map[string]Ref, error) {
	pairs, err := p.pairs(v, key)
	if err != nil {
		return nil, err
	}
	h := make(map[string]Ref, len(pairs))
	for _, kv := range pairs {
		k := joinKey(key, kv.key.Value)
		if !httpguts.ValidHeaderFieldName(kv.key.Value) {
			return nil, p.errorAt(kv.key, key, fmt.Sprintf("%q is not an HTTP header name (a token: letters, digits and !#$%%&'*+-.^_`|~)", shortText(kv.key.Value)))
		}
		name := http.CanonicalHeaderKey(kv.key.Value)
		if _, dup := h[name]; dup {
			return nil, p.errorAt(kv.key, k, fmt.Sprintf("header %s is given twice (names are not case-sensitive)", shortText(name)))
		}
		value, err := p.node(kv.value, k)
		if err != nil {
			return nil, err
		}
		r, err := p.ref(value, k)
		if err != nil {
			return nil, err
		}
		h[name] = r
	}
	return h, nil
}

func (p *parser) auth(v *yaml.Node, key string) (*Auth, error) {
	a := &Auth{}
	n := 0
	err := p.mapping(v, key, map[string]field{
		"basic": func(v *yaml.Node, key string) error {
			n++
			b := &Basic{}
			a.Basic = b
			password := false
			err := p.mapping(v, key, map[string]field{
				"user": p.text(&b.User),
				"password": func(v *yaml.Node, key string) error {
					r, err := p.ref(v, key)
					b.Password, password = r, true
					return err
				},
			}, "user, password")
			if err == nil && !password {
				err = p.errorAt(v, key+".password", "required: a reference, env:NAME or file:PATH")
			}
			return err
		},
		"bearer": func(v *yaml.Node, key string) error {
			n++
			r, err := p.ref(v, key)
			a.Bearer = &r
			return err
		},
		"oauth2": func(v *yaml.Node, key string) error {
			n++
			o := &OAuth2{}
			a.OAuth2 = o
			secret := false
			err := p.mapping(v, key, map[string]field{
				"token_url": p.text(&o.TokenURL),
				"client_id": p.text(&o.ClientID),
				"client_secret": func(v *yaml.Node, key string) error {
					r, err := p.ref(v, key)
					o.ClientSecret, secret = r, true
					return err
				},
				"scopes": p.texts(&o.Scopes),
				"params": func(v *yaml.Node, key string) error {
					params, err := p.params(v, key)
					o.Params = params
					return err
				},
			}, "token_url, client_id, client_secret, scopes, params")
			if err == nil && !secret {
				err = p.errorAt(v, key+".client_secret", "required: a reference, env:NAME or file:PATH")
			}
			return err
		},
	}, "basic, bearer, oauth2")
	if err == nil && n > 1 {
		err = p.errorAt(v, key, "give one of basic, bearer and oauth2")
	}
	return a, err
}

// params reads OAuth2 parameters: each a text or a list of texts.
func (p *parser) params(v *yaml.Node, key string) (map[string][]string, error) {
	pairs, err := p.pairs(v, key)
	if err != nil {
		return nil, err
	}
	params := make(map[string][]string, len(pairs))
	for _, kv := range pairs {
		k := joinKey(key, kv.key.Value)
		value, err := p.node(kv.value, k)
		if err != nil {
			return nil, err
		}
		var values []string
		if value.Kind == yaml.SequenceNode {
			err = p.texts(&values)(value, k)
		} else {
			values = []string{""}
			err = p.text(&values[0])(value, k)
		}
		if err != nil {
			return nil, err
		}
		params[kv.key.Value] = values
	}
	return params, nil
}
