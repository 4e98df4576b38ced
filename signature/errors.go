package signature

import "errors"

// Errors of signers and verifiers; they are wrapped with details, so compare
// them with errors.Is.
var (
	// ErrUnknownScheme is returned for a scheme that is neither Standard nor
	// XSignature.
	ErrUnknownScheme = errors.New("signature: unknown scheme")
	// ErrEmptySecret is returned when no secret, or an empty one, is given.
	ErrEmptySecret = errors.New("signature: empty secret")
	// ErrSecretTooShort is returned for a secret (for "whsec_" secrets, a
	// decoded key) shorter than SecretMinLen bytes.
	ErrSecretTooShort = errors.New("signature: secret too short")
	// ErrMalformedSecret is returned for a "whsec_" secret whose key is not
	// valid standard base64.
	ErrMalformedSecret = errors.New("signature: malformed secret")
	// ErrInvalidID is returned for an empty event id or one containing ".".
	ErrInvalidID = errors.New("signature: invalid event id")
	// ErrMissingHeaders is returned when a request lacks the id, timestamp or
	// signature header.
	ErrMissingHeaders = errors.New("signature: missing headers")
	// ErrMalformedHeader is returned for a timestamp that is not unix seconds
	// or a signature header without one signature of the scheme's form.
	ErrMalformedHeader = errors.New("signature: malformed header")
	// ErrTimestampOutOfTolerance is returned when the timestamp is further
	// than the tolerance from the verifier's clock.
	ErrTimestampOutOfTolerance = errors.New("signature: timestamp out of tolerance")
	// ErrNoMatchingSignature is returned when no signature of the request
	// matches any secret of the verifier.
	ErrNoMatchingSignature = errors.New("signature: no matching signature")
)
