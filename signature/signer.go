package signature

import (
	"net/http"
	"time"
)

// Signer signs outgoing webhook requests. It is safe for concurrent use.
type Signer struct {
	scheme Scheme
	keys   [][]byte
}

// NewSigner returns a Signer that signs with every one of secrets. In the
// Standard scheme a secret is "whsec_<base64 key>" or, without the prefix,
// the key's own bytes; in XSignature it is always its own bytes. It refuses
// an unknown scheme, no or empty secrets and secrets shorter than
// SecretMinLen bytes.
func NewSigner(scheme Scheme, secrets ...string) (*Signer, error) {
	keys, err := scheme.keys(secrets)
	if err != nil {
		return nil, err
	}
	return &Signer{scheme: scheme, keys: keys}, nil
}

// Sign sets the scheme's id, timestamp and signature headers on h for a
// request carrying body, replacing any values h had under those names. The
// timestamp is ts in whole unix seconds; the signature header holds one
// space-separated entry per secret. Sign refuses an empty id or one
// containing "." with ErrInvalidID.
func (s *Signer) Sign(h http.Header, id string, ts time.Time, body []byte) error {
	if err := checkID(id); err != nil {
		return err
	}
	timestamp := formatTimestamp(ts)
	var sig []byte
	for i, key := range s.keys {
		if i > 0 {
			sig = append(sig, ' ')
		}
		sig = s.scheme.appendEntry(sig, s.scheme.mac(key, id, timestamp, body))
	}
	idName, timestampName, sigName := s.scheme.HeaderNames()
	h.Set(idName, id)
	h.Set(timestampName, timestamp)
	h.Set(sigName, string(sig))
	return nil
}
