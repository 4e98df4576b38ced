package signature

import (
	"fmt"
	"strings"
)

// Scheme is a webhook signature scheme. The zero value is Standard.
type Scheme int

const (
	// Standard is the Standard Webhooks scheme: webhook-id,
	// webhook-timestamp and webhook-signature "v1,<base64>" over
	// id.timestamp.body.
	Standard Scheme = iota
	// XSignature is the article's scheme: X-Event-Id, X-Timestamp and
	// X-Signature "sha256=<hex>" over timestamp and body. It does not sign
	// the id; see SignsID.
	XSignature
)

// ParseScheme returns the scheme named "standard" or "x-signature" (in any
// case), the names String gives.
func ParseScheme(name string) (Scheme, error) {
	switch strings.ToLower(name) {
	case "standard":
		return Standard, nil
	case "x-signature":
		return XSignature, nil
	}
	return 0, fmt.Errorf("%w %q: want \"standard\" or \"x-signature\"", ErrUnknownScheme, name)
}

// String returns the scheme's name as ParseScheme accepts it.
func (s Scheme) String() string {
	switch s {
	case Standard:
		return "standard"
	case XSignature:
		return "x-signature"
	}
	return fmt.Sprintf("Scheme(%d)", int(s))
}

// SignsID reports whether the signature covers the event id. When it does
// not (XSignature), a verified id proves nothing: a receiver that
// de-duplicates by id must not rely on it alone.
func (s Scheme) SignsID() bool { return s == Standard }

// check returns ErrUnknownScheme for a value that is no scheme.
func (s Scheme) check() error {
	if s != Standard && s != XSignature {
		return fmt.Errorf("%w %d", ErrUnknownScheme, int(s))
	}
	return nil
}

// HeaderNames returns the canonical names of the scheme's id, timestamp and
// signature headers, such as "Webhook-Id", "Webhook-Timestamp" and
// "Webhook-Signature".
func (s Scheme) HeaderNames() (id, timestamp, signature string) {
	if s == XSignature {
		return "X-Event-Id", "X-Timestamp", "X-Signature"
	}
	return "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"
}
