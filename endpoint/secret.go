package endpoint

import (
	"crypto/sha256"
	"encoding/hex"
)

// Fingerprint names a secret without revealing it: the first 12 hex digits
// of its SHA-256, what postbox endpoints list and show print.
func Fingerprint(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:6])
}
