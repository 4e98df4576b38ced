package signature

import "errors"

// Errors of signers and verifiers; they are wrapped with details, so compare
// them with errors.Is.
var (
	// ErrUnknownScheme is returned for a scheme that is neither Standard nor
	// XSignature.
	ErrUnknownScheme = errors.New("signature: unknown scheme")
	// ErrInvalidProfile is returned for a Profile whose header names cannot
	// serve (see Profile.Validate), or a profile ParseProfile cannot read.
	ErrInvalidProfile = errors.New("signature: invalid profile")
	// ErrEmptySecret is returned when no secret, or an empty one, is given.
	ErrEmptySecret = errors.New("signature: empty secret")
	// ErrSecretTooShort is returned for a secret (for "whsec_" secrets, a
	// decoded key) shorter than SecretMinLen bytes.
	ErrSecretTooShort = errors.New("signature: secret too short")
	// ErrMalformedSecret is returned for a "whsec_", "whsk_" or "whpk_"
	// secret that is not valid standard base64, or an ed25519 key of the
	// wrong length or whose two halves do not belong together.
	ErrMalformedSecret = errors.New("signature: malformed secret")
	// ErrWrongKeyKind is returned for a Standard Webhooks ed25519 key given
	// where it cannot serve: a "whsk_" private key to a Verifier (give it
	// the "whpk_" public key), a "whpk_" public key to a Signer, or either
	// to the XSignature scheme.
	ErrWrongKeyKind = errors.New("signature: wrong kind of key")
	// ErrInvalidID is returned for an empty event id or one containing ".".
	ErrInvalidID = errors.New("signature: invalid event id")
	// ErrMissingHeaders is returned when a request lacks the id, timestamp or
	// signature header.
	ErrMissingHeaders = errors.New("signature: missing headers")
	// ErrMalformedHeader is returned for a timestamp that is not unix seconds,
	// a signature header without one signature of the scheme's form, one
	// with more v1a signatures than MaxAsymmetricSignatures when the
	// verifier holds public keys, or a metadata header (see Metadata) given
	// several times or holding a line break, to Sign or VerifyMetadata.
	ErrMalformedHeader = errors.New("signature: malformed header")
	// ErrTimestampOutOfTolerance is returned when the timestamp is further
	// than the tolerance from the verifier's clock.
	ErrTimestampOutOfTolerance = errors.New("signature: timestamp out of tolerance")
	// ErrMetadataUnsigned is returned by VerifyMetadata for a request
	// without a metadata signature (HeaderMetadataSignature).
	ErrMetadataUnsigned = errors.New("signature: metadata not signed")
	// ErrNoMatchingSignature is returned when no signature of the request
	// matches any secret of the verifier.
	ErrNoMatchingSignature = errors.New("signature: no matching signature")
)
