package signature

import (
	"net/http"
	"time"
)

// Signer signs outgoing webhook requests. It is safe for concurrent use.
type Signer struct {
	scheme Scheme
	names  HeaderNames // canonical
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
	return NewProfileSigner(Profile{Scheme: scheme}, secrets...)
}

// NewProfileSigner returns a Signer that signs in the profile's scheme,
// under its header names, with every one of secrets, which are written as
// for NewSigner. It refuses a profile that Profile.Validate refuses.
func NewProfileSigner(p Profile, secrets ...string) (*Signer, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	keys, err := p.Scheme.keys(secrets, signing)
	if err != nil {
		return nil, err
	}
	return &Signer{scheme: p.Scheme, names: p.HeaderNames(), keys: keys}, nil
}

// Sign sets the profile's id, timestamp and signature headers on h for a
// request carrying body, and the metadata signature header
// (HeaderMetadataSignature) over the id, the timestamp and the metadata
// headers h holds (Metadata: event type, aggregate type and id, sequence;
// "" for those it lacks), replacing any values h had under those names. So
// set the metadata headers first: the receiver acts only on what is signed.
//
// The timestamp is ts in whole unix seconds; each signature header holds
// one space-separated entry per secret, in the order of the secrets. Sign
// refuses an empty id or one containing "." with ErrInvalidID, and a
// metadata header given several times or holding a line break with
// ErrMalformedHeader.
func (s *Signer) Sign(h http.Header, id string, ts time.Time, body []byte) error {
	if err := checkID(id); err != nil {
		return err
	}
	md, err := metadataOf(h)
	if err != nil {
		return err
	}
	timestamp := formatTimestamp(ts)
	var buf [signBufLen]byte
	sigs := s.appendEntries(buf[:0], &message{scheme: s.scheme, id: id, timestamp: timestamp, body: body})
	n := len(sigs)
	sigs = s.appendEntries(sigs, &message{scheme: s.scheme, id: id, timestamp: timestamp, metadata: md, isMetadata: true})
	// The header names are canonical (Profile.HeaderNames): set the map directly,
	// with one backing array for the four values, and one string for both
	// signatures.
	both := string(sigs)
	values := []string{id, timestamp, both[:n], both[n:]}
	h[s.names.ID] = values[0:1:1]
	h[s.names.Timestamp] = values[1:2:2]
	h[s.names.Signature] = values[2:3:3]
	h[HeaderMetadataSignature] = values[3:4:4]
	return nil
}

// appendEntries appends the signature header of m to dst: one entry per
// key, space-separated.
func (s *Signer) appendEntries(dst []byte, m *message) []byte {
	for i, k := range s.keys {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = m.appendEntry(dst, k)
	}
	return dst
}

// signBufLen holds both signature headers of up to two v1a entries, or
// three v1 entries, each, on the stack; more grow it on the heap.
const signBufLen = 512
