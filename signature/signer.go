package signature

import (
	"net/http"
	"time"
)

// Signer signs outgoing webhook requests. It is safe for concurrent use.
type Signer struct {
	scheme Scheme
	keys   []key
}

// NewSigner returns a Signer that signs with every one of secrets. In the
// Standard scheme a secret is
//
//   - "whsec_<base64 key>": an HMAC-SHA256 key, signing "v1,<base64>";
//   - "whsk_<base64 key>": an ed25519 private key (see GenerateKeyPair),
//     signing "v1a,<base64>";
//   - anything else: an HMAC key of the secret's own bytes, signing "v1".
//
// Kinds may be mixed, for example to move receivers from v1 to v1a. In
// XSignature a secret is always an HMAC key of its own bytes. NewSigner
// refuses an unknown scheme, no or empty secrets, HMAC keys shorter than
// SecretMinLen bytes, malformed keys (ErrMalformedSecret), and "whpk_"
// public keys or, in XSignature, any ed25519 key (ErrWrongKeyKind).
func NewSigner(scheme Scheme, secrets ...string) (*Signer, error) {
	keys, err := scheme.keys(secrets, signing)
	if err != nil {
		return nil, err
	}
	return &Signer{scheme: scheme, keys: keys}, nil
}

// Sign sets the scheme's id, timestamp and signature headers on h for a
// request carrying body, replacing any values h had under those names. The
// timestamp is ts in whole unix seconds; the signature header holds one
// space-separated entry per secret, in the order of the secrets. Sign
// refuses an empty id or one containing "." with ErrInvalidID.
func (s *Signer) Sign(h http.Header, id string, ts time.Time, body []byte) error {
	if err := checkID(id); err != nil {
		return err
	}
	m := &message{scheme: s.scheme, id: id, timestamp: formatTimestamp(ts), body: body}
	var buf [signBufLen]byte
	sig := buf[:0]
	for i, k := range s.keys {
		if i > 0 {
			sig = append(sig, ' ')
		}
		sig = m.appendEntry(sig, k)
	}
	// The header names are canonical (HeaderNames): set the map directly,
	// with one backing array for the three values.
	values := []string{id, m.timestamp, string(sig)}
	idName, timestampName, sigName := s.scheme.HeaderNames()
	h[idName] = values[0:1:1]
	h[timestampName] = values[1:2:2]
	h[sigName] = values[2:3:3]
	return nil
}

// signBufLen holds the signature header of up to two v1a entries, or
// three v1 entries, on the stack; more grow it on the heap.
const signBufLen = 256
