package endpoint

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// GenerateSecret returns a new Standard Webhooks secret: "whsec_" and 32
// random bytes in base64.
func GenerateSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand never fails
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// Fingerprint names a secret without revealing it: the first 12 hex digits
// of its SHA-256, what postbox endpoints list and show print.
func Fingerprint(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:6])
}
