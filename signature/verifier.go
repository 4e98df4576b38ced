package signature

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ToleranceDefault is how far a timestamp may be from the verifier's clock,
// either way, when NewVerifier is given a zero tolerance.
const ToleranceDefault = 5 * time.Minute

// Verifier checks incoming webhook requests. It is safe for concurrent use.
type Verifier struct {
	// Now is the clock timestamps are checked against; nil means time.Now.
	// Set it, if at all, before the first Verify.
	Now func() time.Time

	scheme    Scheme
	names     HeaderNames
	tolerance time.Duration
	keys      []key
	// asymmetric is whether keys hold a public key.
	asymmetric bool
}

// NewVerifier returns a Verifier that accepts requests signed with any one
// of secrets whose timestamp is within tolerance of its clock, in the past
// or the future. A zero tolerance means ToleranceDefault; a negative one is
// refused.
//
// Secrets are written as for NewSigner, except that ed25519 keys are
// public: in the Standard scheme a "whpk_<base64 key>" secret verifies
// "v1a" signatures, beside "whsec_" and raw secrets verifying "v1". A
// "whsk_" private key is refused with ErrWrongKeyKind: the receiver needs
// only the public key (PublicKey derives it), and should not hold the
// key that signs.
func NewVerifier(scheme Scheme, tolerance time.Duration, secrets ...string) (*Verifier, error) {
	return NewProfileVerifier(Profile{Scheme: scheme}, tolerance, secrets...)
}

// NewProfileVerifier returns a Verifier of requests signed in the
// profile's scheme under its header names, as NewVerifier describes. It
// refuses a profile that Profile.Validate refuses.
func NewProfileVerifier(p Profile, tolerance time.Duration, secrets ...string) (*Verifier, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if tolerance < 0 {
		return nil, fmt.Errorf("signature: negative tolerance %v", tolerance)
	}
	if tolerance == 0 {
		tolerance = ToleranceDefault
	}
	keys, err := p.Scheme.keys(secrets, verifying)
	if err != nil {
		return nil, err
	}
	v := &Verifier{scheme: p.Scheme, names: p.HeaderNames(), tolerance: tolerance, keys: keys}
	for _, k := range keys {
		v.asymmetric = v.asymmetric || k.public != nil
	}
	return v, nil
}

// Verify checks the signature headers of a request (under the profile's
// names) against its body and returns the event id and the timestamp
// they carry. The body is only hashed, never parsed. HMAC signatures (v1,
// sha256=) are compared in constant time; v1a signatures are checked with
// ed25519.Verify against each public key. Entries of other versions are skipped. Errors
// match ErrMissingHeaders, ErrInvalidID, ErrMalformedHeader,
// ErrTimestampOutOfTolerance or ErrNoMatchingSignature, checked in that
// order.
//
// Verify does not check the metadata headers (event type, aggregate,
// sequence): VerifyMetadata does. In the XSignature scheme the returned id
// is not covered by the signature (see Scheme.SignsID).
func (v *Verifier) Verify(h http.Header, body []byte) (id string, ts time.Time, err error) {
	id, timestamp, ts, got, err := v.envelope(h, v.names.Signature)
	if err != nil {
		return "", time.Time{}, err
	}
	if !v.matches(got, &message{scheme: v.scheme, id: id, timestamp: timestamp, body: body}) {
		return "", time.Time{}, ErrNoMatchingSignature
	}
	return id, ts, nil
}

// VerifyMetadata checks the metadata signature of a request
// (HeaderMetadataSignature) against its id, timestamp and metadata headers,
// and returns the metadata it covers. Use it beside Verify, which checks the
// body: together they prove that the body and the metadata were signed for
// the same event id at the same time. It checks the id and the timestamp as
// Verify does, with the same secrets, and compares entries the same way.
//
// A request without the metadata signature header reports
// ErrMetadataUnsigned: its metadata headers, if any, may have been written
// by anyone on the path. A metadata header given several times or holding a
// line break reports ErrMalformedHeader. The other errors are Verify's.
//
// In the XSignature scheme the id is covered by the metadata signature but
// not by the body's: a receiver must also check that the signed body names
// the id (see Scheme.SignsID) to tie the metadata to the body.
func (v *Verifier) VerifyMetadata(h http.Header) (Metadata, error) {
	if len(h[HeaderMetadataSignature]) == 0 {
		return Metadata{}, fmt.Errorf("%w: no %s header", ErrMetadataUnsigned, HeaderMetadataSignature)
	}
	md, err := metadataOf(h)
	if err != nil {
		return Metadata{}, err
	}
	id, timestamp, _, got, err := v.envelope(h, HeaderMetadataSignature)
	if err != nil {
		return Metadata{}, err
	}
	if !v.matches(got, &message{scheme: v.scheme, id: id, timestamp: timestamp, metadata: md, isMetadata: true}) {
		return Metadata{}, fmt.Errorf("%w in %s", ErrNoMatchingSignature, HeaderMetadataSignature)
	}
	return md, nil
}

// envelope reads and checks what every signature of a request depends on:
// the id and timestamp headers, and the signature header sigName, parsed.
func (v *Verifier) envelope(h http.Header, sigName string) (id, timestamp string, ts time.Time, got entries, err error) {
	idName, timestampName := v.names.ID, v.names.Timestamp
	id, timestamp = h.Get(idName), h.Get(timestampName)
	sig := strings.Join(h.Values(sigName), " ")
	var missing []string
	if id == "" {
		missing = append(missing, idName)
	}
	if timestamp == "" {
		missing = append(missing, timestampName)
	}
	if sig == "" {
		missing = append(missing, sigName)
	}
	if len(missing) > 0 {
		return "", "", time.Time{}, entries{}, fmt.Errorf("%w: %s", ErrMissingHeaders, strings.Join(missing, ", "))
	}
	if err := checkID(id); err != nil {
		return "", "", time.Time{}, entries{}, err
	}
	ts, ok := parseTimestamp(timestamp)
	if !ok {
		return "", "", time.Time{}, entries{}, fmt.Errorf("%w: %s is not unix seconds", ErrMalformedHeader, timestampName)
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if t := now(); ts.Before(t.Add(-v.tolerance)) || ts.After(t.Add(v.tolerance)) {
		return "", "", time.Time{}, entries{}, fmt.Errorf("%w: %s is %v away, tolerance %v", ErrTimestampOutOfTolerance, timestampName, ts.Sub(t).Abs(), v.tolerance)
	}
	got = v.scheme.parseEntries(sig)
	if len(got.macs) == 0 && len(got.signatures) == 0 {
		return "", "", time.Time{}, entries{}, fmt.Errorf("%w: %s holds no %s signature", ErrMalformedHeader, sigName, v.scheme)
	}
	if v.asymmetric && len(got.signatures) > MaxAsymmetricSignatures {
		return "", "", time.Time{}, entries{}, fmt.Errorf("%w: %s holds %d v1a signatures, at most %d are checked", ErrMalformedHeader, sigName, len(got.signatures), MaxAsymmetricSignatures)
	}
	return id, timestamp, ts, got, nil
}

// matches reports whether one of got is m's signature under one of the
// verifier's keys.
func (v *Verifier) matches(got entries, m *message) bool {
	for _, k := range v.keys {
		if got.matches(m, k) {
			return true
		}
	}
	return false
}
