package signature

import (
	"fmt"
	"net/http"
	"strings"
)

// HeaderNames are the names of the id, timestamp and signature headers of
// a request. A Profile's are all set or all empty.
type HeaderNames struct {
	ID, Timestamp, Signature string
}

// Profile is a scheme with the names of its headers: what a receiver
// migrating from another provider expects, such as Svix's svix-id,
// svix-timestamp and svix-signature for the Standard scheme, which Svix
// signs with. Only the names change: the signed content and the
// signature's form are the scheme's. The metadata signature keeps its own
// header, HeaderMetadataSignature. The zero Profile is the Standard scheme
// with its own names.
type Profile struct {
	Scheme Scheme
	// Names are the header names; the zero value means the scheme's own
	// (Scheme.HeaderNames). Set all three or none.
	Names HeaderNames
}

// SvixNames are the header names of Svix, which signs as Standard Webhooks
// do: svix-id, svix-timestamp and svix-signature.
var SvixNames = HeaderNames{ID: "Svix-Id", Timestamp: "Svix-Timestamp", Signature: "Svix-Signature"}

// Svix is the profile of Svix: the Standard scheme under SvixNames.
var Svix = Profile{Scheme: Standard, Names: SvixNames}

// ParseProfile reads a profile as Profile.String writes it, names in any
// case and spaces around the parts ignored:
//
//   - "" or "standard": the Standard scheme, webhook-* headers;
//   - "x-signature": the XSignature scheme, X-Event-Id, X-Timestamp and
//     X-Signature;
//   - "svix": the Standard scheme under svix-id, svix-timestamp and
//     svix-signature (Svix);
//   - "<scheme>;prefix=acme": the scheme ("standard" or "x-signature")
//     under acme-id, acme-timestamp and acme-signature;
//   - "<scheme>;id=X-Acme-Id,timestamp=X-Acme-Ts,signature=X-Acme-Sig": the
//     scheme under the three names given.
//
// The names are returned canonical (http.CanonicalHeaderKey), and as the
// zero Names when they are the scheme's own. ParseProfile refuses names
// that Profile.Validate refuses, with ErrInvalidProfile, and an unknown
// scheme with ErrUnknownScheme.
func ParseProfile(spec string) (Profile, error) {
	name, params, hasParams := strings.Cut(spec, ";")
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "svix" || name == "" && !hasParams {
		if hasParams {
			return Profile{}, fmt.Errorf("%w %q: svix takes no parameters", ErrInvalidProfile, spec)
		}
		if name == "svix" {
			return Svix, nil
		}
		return Profile{}, nil
	}
	scheme, err := ParseScheme(name)
	if err != nil {
		return Profile{}, fmt.Errorf("%w %q: want \"standard\", \"x-signature\" or \"svix\", optionally followed by \";prefix=NAME\" or \";id=NAME,timestamp=NAME,signature=NAME\" (but for svix)", ErrUnknownScheme, name)
	}
	p := Profile{Scheme: scheme}
	if !hasParams {
		return p, nil
	}
	if p.Names, err = parseNames(params); err != nil {
		return Profile{}, err
	}
	if err := p.Validate(); err != nil {
		return Profile{}, err
	}
	if p.Names = canonicalNames(p.Names); p.Names == scheme.ownNames() {
		p.Names = HeaderNames{}
	}
	return p, nil
}

// parseNames reads the parameters of a profile: "prefix=P", or "id=A,
// timestamp=B,signature=C" in any order.
func parseNames(params string) (HeaderNames, error) {
	var n HeaderNames
	seen := map[string]bool{}
	for param := range strings.SplitSeq(params, ",") {
		key, value, ok := strings.Cut(param, "=")
		key, value = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(value)
		if !ok || value == "" {
			return HeaderNames{}, fmt.Errorf("%w: parameter %q is not key=value", ErrInvalidProfile, strings.TrimSpace(param))
		}
		if seen[key] {
			return HeaderNames{}, fmt.Errorf("%w: parameter %s is given twice", ErrInvalidProfile, key)
		}
		seen[key] = true
		switch key {
		case "prefix":
			if !validToken(value) {
				return HeaderNames{}, fmt.Errorf("%w: prefix %q is not an HTTP token", ErrInvalidProfile, value)
			}
			n = HeaderNames{ID: value + "-id", Timestamp: value + "-timestamp", Signature: value + "-signature"}
		case "id":
			n.ID = value
		case "timestamp":
			n.Timestamp = value
		case "signature":
			n.Signature = value
		default:
			return HeaderNames{}, fmt.Errorf("%w: unknown parameter %q: want prefix, or id, timestamp and signature", ErrInvalidProfile, key)
		}
	}
	if seen["prefix"] && len(seen) > 1 {
		return HeaderNames{}, fmt.Errorf("%w: prefix cannot be given with id, timestamp or signature", ErrInvalidProfile)
	}
	if !seen["prefix"] && len(seen) != 3 {
		return HeaderNames{}, fmt.Errorf("%w: give prefix, or all three of id, timestamp and signature", ErrInvalidProfile)
	}
	return n, nil
}

// String returns the profile as ParseProfile reads it, names canonical:
// the scheme's name alone for its own names, "svix" for Svix, "<scheme>;prefix=P" when the
// names are P-Id, P-Timestamp and P-Signature, and
// "<scheme>;id=...,timestamp=...,signature=..." otherwise.
func (p Profile) String() string {
	n := p.HeaderNames()
	switch {
	case n == p.Scheme.ownNames():
		return p.Scheme.String()
	case p.Scheme == Standard && n == SvixNames:
		return "svix"
	}
	if prefix, ok := strings.CutSuffix(n.ID, "-Id"); ok && n.Timestamp == prefix+"-Timestamp" && n.Signature == prefix+"-Signature" {
		return p.Scheme.String() + ";prefix=" + prefix
	}
	return fmt.Sprintf("%s;id=%s,timestamp=%s,signature=%s", p.Scheme, n.ID, n.Timestamp, n.Signature)
}

// HeaderNames returns the canonical names of the profile's headers: its
// Names, or the scheme's own when they are empty.
func (p Profile) HeaderNames() HeaderNames {
	if p.Names == (HeaderNames{}) {
		return p.Scheme.ownNames()
	}
	return canonicalNames(p.Names)
}

// Validate checks the profile: a known scheme (ErrUnknownScheme), and
// names (ErrInvalidProfile) that are all empty, or three distinct HTTP
// tokens of which none is a postbox header (Postbox-*), a header of the
// request's transport or framing (Host, Content-Length, Content-Type,
// Authorization, hop-by-hop and Proxy-* headers...) or User-Agent.
func (p Profile) Validate() error {
	if err := p.Scheme.check(); err != nil {
		return err
	}
	n := p.Names
	if n == (HeaderNames{}) {
		return nil
	}
	names := [...]struct{ field, name string }{{"id", n.ID}, {"timestamp", n.Timestamp}, {"signature", n.Signature}}
	for _, f := range names {
		canonical := http.CanonicalHeaderKey(f.name)
		switch {
		case f.name == "":
			return fmt.Errorf("%w: the %s header has no name: set all three names or none", ErrInvalidProfile, f.field)
		case !validToken(f.name):
			return fmt.Errorf("%w: the %s header %q is not an HTTP token", ErrInvalidProfile, f.field, f.name)
		case strings.HasPrefix(canonical, "Postbox-"):
			return fmt.Errorf("%w: the %s header %s is a postbox header", ErrInvalidProfile, f.field, canonical)
		case reservedHeader(canonical):
			return fmt.Errorf("%w: the %s header %s is a header of the request itself", ErrInvalidProfile, f.field, canonical)
		}
	}
	c := canonicalNames(n)
	if c.ID == c.Timestamp || c.ID == c.Signature || c.Timestamp == c.Signature {
		return fmt.Errorf("%w: the id, timestamp and signature headers must have three distinct names", ErrInvalidProfile)
	}
	return nil
}

// ownNames are the scheme's own header names.
func (s Scheme) ownNames() HeaderNames {
	id, timestamp, sig := s.HeaderNames()
	return HeaderNames{ID: id, Timestamp: timestamp, Signature: sig}
}

func canonicalNames(n HeaderNames) HeaderNames {
	return HeaderNames{
		ID:        http.CanonicalHeaderKey(n.ID),
		Timestamp: http.CanonicalHeaderKey(n.Timestamp),
		Signature: http.CanonicalHeaderKey(n.Signature),
	}
}

// reservedHeader reports whether a header of canonical name belongs to the
// request rather than to its signature: what a sender sets itself
// (Content-Type, User-Agent), credentials, framing, hop-by-hop and proxy
// headers. It is in the spirit of package webhook's TransportHeader, which
// this package does not import.
func reservedHeader(canonical string) bool {
	switch canonical {
	case "Authorization", "Cookie", "Set-Cookie", "Connection", "Keep-Alive", "Te", "Trailer",
		"Transfer-Encoding", "Upgrade", "Http2-Settings", "Host", "Content-Length", "Content-Encoding",
		"Content-Type", "User-Agent", "Expect", "Forwarded", "X-Real-Ip", "Date":
		return true
	}
	return strings.HasPrefix(canonical, "Proxy-") || strings.HasPrefix(canonical, "X-Forwarded-")
}

// validToken reports whether s is an RFC 9110 token.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
