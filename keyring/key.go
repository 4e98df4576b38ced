package keyring

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// KeySize is the length in bytes of a key: AES-256.
const KeySize = 32

// KeyPrefix starts the text form of a key GenerateKey writes.
const KeyPrefix = "pbkey_"

// idSize is the length in bytes of a key id, in blobs; its text form is
// idPrefix and twice as many hex digits.
const (
	idSize   = 8
	idPrefix = "k-"
	idDomain = "postbox keyring key id"
)

// expectedForms says what ParseKey reads, in its errors.
const expectedForms = "want " + KeyPrefix + " and 43 base64url characters, 64 hex digits, or the base64 of 32 bytes"

// GenerateKey returns a new random key in its text form, KeyPrefix followed
// by the base64url (no padding) of 32 bytes from crypto/rand.
func GenerateKey() string {
	k := make([]byte, KeySize)
	rand.Read(k) // never returns an error: it crashes the program rather than return short
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(k)
}

// ParseKey returns the 32 bytes of a key written as GenerateKey writes it,
// as the plain base64 of 32 bytes (standard or URL alphabet, padded or not),
// or as 64 hex digits; spaces around it are ignored. Its errors match
// ErrMalformedKey and give the text's length, never the text.
func ParseKey(text string) ([]byte, error) {
	k, problem := decodeKey(strings.TrimSpace(text))
	if problem != "" {
		return nil, fmt.Errorf("%w: %s", ErrMalformedKey, problem)
	}
	return k, nil
}

// decodeKey decodes a trimmed key text, or says what is wrong with it
// without quoting it.
func decodeKey(s string) (key []byte, problem string) {
	if s == "" {
		return nil, "empty; " + expectedForms
	}
	if rest, ok := strings.CutPrefix(s, KeyPrefix); ok {
		k, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(rest, "="))
		switch {
		case rest == "":
			return nil, KeyPrefix + " alone; " + expectedForms
		case err != nil:
			return nil, fmt.Sprintf("%d characters after %s, not base64url; %s", len(rest), KeyPrefix, expectedForms)
		case len(k) != KeySize:
			return nil, fmt.Sprintf("%d characters after %s decode to %d bytes; %s", len(rest), KeyPrefix, len(k), expectedForms)
		}
		return k, ""
	}
	if len(s) == 2*KeySize {
		if k, err := hex.DecodeString(s); err == nil {
			return k, ""
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) == KeySize {
				return k, ""
			}
			return nil, fmt.Sprintf("%d characters decode to %d bytes; %s", len(s), len(k), expectedForms)
		}
	}
	return nil, fmt.Sprintf("%d characters, neither hex nor base64; %s", len(s), expectedForms)
}

// keyID returns the id of a key: the first idSize bytes of
// SHA-256(idDomain || key).
func keyID(key []byte) [idSize]byte {
	h := sha256.New()
	h.Write([]byte(idDomain))
	h.Write(key)
	var id [idSize]byte
	copy(id[:], h.Sum(nil))
	return id
}

// idText is the text form of a key id: "k-" and its hex.
func idText(id [idSize]byte) string {
	return idPrefix + hex.EncodeToString(id[:])
}
