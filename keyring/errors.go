package keyring

import "errors"

// Errors of this package; they are wrapped with details, so compare them
// with errors.Is. None of their messages holds a key or a plaintext.
var (
	// ErrNoKey is returned when no key is given: Parse of a text without a
	// key (empty, or only comments), Load with neither a key file nor a
	// value, Seal on a zero Keyring.
	ErrNoKey = errors.New("keyring: no key")
	// ErrMalformedKey is returned for a key that is not 32 bytes in one of
	// the forms ParseKey reads. The message gives the key's position and
	// length, never its text.
	ErrMalformedKey = errors.New("keyring: malformed key")
	// ErrUnknownKey is returned by Open and Rewrap for a blob sealed by a key
	// the keyring does not hold; the message names that key's id, the key to
	// add to the keyring.
	ErrUnknownKey = errors.New("keyring: sealed by a key the keyring does not hold")
	// ErrCorrupt is returned by Open, Rewrap and KeyID for a blob that is not
	// one Seal made and left intact: truncated, of an unknown format version,
	// or failing authentication (tampered, or opened with another aad than
	// it was sealed with).
	ErrCorrupt = errors.New("keyring: corrupt sealed blob")
)
