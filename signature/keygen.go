package signature

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// GeneratedSecretLen is the length in bytes of the HMAC keys GenerateSecret
// makes.
const GeneratedSecretLen = 32

// GenerateSecret returns a new random HMAC secret for the v1 signature,
// "whsec_<base64 of 32 random bytes>", to be given to both the sender's
// Signer and the receiver's Verifier.
func GenerateSecret() (string, error) {
	k := make([]byte, GeneratedSecretLen)
	if _, err := rand.Read(k); err != nil {
		return "", fmt.Errorf("signature: generate secret: %w", err)
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(k), nil
}

// GenerateKeyPair returns a new ed25519 key pair for the v1a signature:
// secretKey "whsk_<base64 of the 64-byte private key>" (its seed then its
// public key, as Svix writes it) for the sender's Signer, and publicKey
// "whpk_<base64 of the 32-byte public key>" for the receivers' Verifiers.
// Only the secret key must be kept secret.
func GenerateKeyPair() (secretKey, publicKey string, err error) {
	public, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("signature: generate ed25519 key pair: %w", err)
	}
	return encodeSigningKey(private), encodePublicKey(public), nil
}

// PublicKey returns the "whpk_" public key of a "whsk_" secret key, for the
// receivers to verify with. Its errors match ErrMalformedSecret, or
// ErrWrongKeyKind for a secret that is no "whsk_" key, and never quote the
// secret.
func PublicKey(secretKey string) (string, error) {
	encoded, ok := strings.CutPrefix(secretKey, signingKeyPrefix)
	if !ok {
		return "", fmt.Errorf("%w: want a whsk_ ed25519 secret key", ErrWrongKeyKind)
	}
	private, err := decodeSigningKey(encoded)
	if err != nil {
		return "", fmt.Errorf("%w: %s", ErrMalformedSecret, err)
	}
	return encodePublicKey(private.Public().(ed25519.PublicKey)), nil
}

func encodeSigningKey(k ed25519.PrivateKey) string {
	return signingKeyPrefix + base64.StdEncoding.EncodeToString(k)
}

func encodePublicKey(k ed25519.PublicKey) string {
	return publicKeyPrefix + base64.StdEncoding.EncodeToString(k)
}

// decodeSigningKey decodes the base64 of a "whsk_" key: 64 bytes, the seed
// then the public key (the form GenerateKeyPair and Svix write), whose
// public half must be the seed's; or the 32-byte seed alone. Errors never
// quote the key.
func decodeSigningKey(encoded string) (ed25519.PrivateKey, error) {
	b, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, errors.New("whsk_ key is not standard base64")
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		k := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
		if subtle.ConstantTimeCompare(k[ed25519.SeedSize:], b[ed25519.SeedSize:]) != 1 {
			return nil, errors.New("whsk_ key's public half is not its seed's public key: the key is damaged")
		}
		return k, nil
	}
	return nil, fmt.Errorf("whsk_ key has %d bytes, want %d (seed and public key) or %d (seed)", len(b), ed25519.PrivateKeySize, ed25519.SeedSize)
}

// decodePublicKey decodes the base64 of a "whpk_" key: 32 bytes.
func decodePublicKey(encoded string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, errors.New("whpk_ key is not standard base64")
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("whpk_ key has %d bytes, want %d", len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}
