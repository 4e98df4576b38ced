package signature

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"strings"
	"sync"
)

// SecretMinLen is the length in bytes of the shortest HMAC secret accepted;
// for a "whsec_" secret it is the length of the decoded key.
const SecretMinLen = 24

// Prefixes of the Standard Webhooks secret forms.
const (
	// secretPrefix marks an HMAC secret (v1): the base64 of the key.
	secretPrefix = "whsec_"
	// signingKeyPrefix marks an ed25519 private key (v1a): the base64 of
	// its 64 bytes, seed then public key, or of its 32-byte seed.
	signingKeyPrefix = "whsk_"
	// publicKeyPrefix marks an ed25519 public key (v1a): the base64 of its
	// 32 bytes.
	publicKeyPrefix = "whpk_"
)

// key is one secret of a Signer or a Verifier, decoded: exactly one field
// is set.
type key struct {
	macs    *sync.Pool         // v1: *macState of an HMAC-SHA256 key
	private ed25519.PrivateKey // v1a, in a Signer
	public  ed25519.PublicKey  // v1a, in a Verifier
}

// role says which side a secret is given to: ed25519 keys belong to one
// side only.
type role int

const (
	signing role = iota
	verifying
)

// keys decodes the secrets of a Signer or a Verifier. In the Standard
// scheme a "whsec_" secret is the base64 of an HMAC key, "whsk_" an ed25519
// private key (signers only), "whpk_" an ed25519 public key (verifiers only)
// and any other secret an HMAC key of its own bytes; XSignature uses a
// secret's bytes as an HMAC key, as the article's receivers do, and refuses
// ed25519 keys. Error messages name a secret by its position, never by its
// value.
func (s Scheme) keys(secrets []string, r role) ([]key, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no secret given", ErrEmptySecret)
	}
	keys := make([]key, len(secrets))
	for i, secret := range secrets {
		var err error
		if keys[i], err = s.key(secret, r, i+1); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// key decodes secret number n, given to side r.
func (s Scheme) key(secret string, r role, n int) (key, error) {
	signingKey, isSigning := strings.CutPrefix(secret, signingKeyPrefix)
	publicKey, isPublic := strings.CutPrefix(secret, publicKeyPrefix)
	switch {
	case (isSigning || isPublic) && s == XSignature:
		return key{}, fmt.Errorf("%w: secret %d is a Standard Webhooks ed25519 key (whsk_/whpk_); x-signature signs with HMAC secrets only", ErrWrongKeyKind, n)
	case isSigning && r == verifying:
		return key{}, fmt.Errorf("%w: secret %d is a whsk_ private key, which signs: give the verifier its whpk_ public key (signature.PublicKey derives it, and it need not be kept secret)", ErrWrongKeyKind, n)
	case isPublic && r == signing:
		return key{}, fmt.Errorf("%w: secret %d is a whpk_ public key, which only verifies: sign with its whsk_ private key", ErrWrongKeyKind, n)
	case isSigning:
		private, err := decodeSigningKey(signingKey)
		if err != nil {
			return key{}, fmt.Errorf("%w: secret %d: %s", ErrMalformedSecret, n, err)
		}
		return key{private: private}, nil
	case isPublic:
		public, err := decodePublicKey(publicKey)
		if err != nil {
			return key{}, fmt.Errorf("%w: secret %d: %s", ErrMalformedSecret, n, err)
		}
		return key{public: public}, nil
	}
	hmacKey := []byte(secret)
	if encoded, ok := strings.CutPrefix(secret, secretPrefix); ok && s == Standard {
		var err error
		if hmacKey, err = base64.StdEncoding.DecodeString(encoded); err != nil {
			return key{}, fmt.Errorf("%w: secret %d: %s key is not standard base64", ErrMalformedSecret, n, secretPrefix)
		}
	}
	switch {
	case len(hmacKey) == 0:
		return key{}, fmt.Errorf("%w: secret %d", ErrEmptySecret, n)
	case len(hmacKey) < SecretMinLen:
		return key{}, fmt.Errorf("%w: secret %d has %d bytes, want at least %d", ErrSecretTooShort, n, len(hmacKey), SecretMinLen)
	}
	return key{macs: &sync.Pool{New: func() any {
		return &macState{hash: hmac.New(sha256.New, hmacKey)}
	}}}, nil
}

// macState is an HMAC-SHA256 hash of one key with room for what it signs
// before the body and for its sum, reused across signatures: hmac.New
// derives the inner and outer pads from the key, which Reset keeps.
type macState struct {
	hash   hash.Hash
	prefix []byte
	sum    [sha256.Size]byte
}
