package signature

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// SecretMinLen is the length in bytes of the shortest secret accepted; for a
// "whsec_" secret it is the length of the decoded key.
const SecretMinLen = 24

// secretPrefix marks a Standard Webhooks secret: the base64 of the key.
const secretPrefix = "whsec_"

// keys turns secrets into HMAC keys. In the Standard scheme a "whsec_" secret
// is the base64 of its key and any other secret is its own bytes; XSignature
// always uses a secret's bytes, as the article's receivers do. Error messages
// name a secret by its position, never by its value.
func (s Scheme) keys(secrets []string) ([][]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no secret given", ErrEmptySecret)
	}
	keys := make([][]byte, len(secrets))
	for i, secret := range secrets {
		key := []byte(secret)
		if encoded, ok := strings.CutPrefix(secret, secretPrefix); ok && s == Standard {
			var err error
			if key, err = base64.StdEncoding.DecodeString(encoded); err != nil {
				return nil, fmt.Errorf("%w: secret %d: %s key is not standard base64", ErrMalformedSecret, i+1, secretPrefix)
			}
		}
		switch {
		case len(key) == 0:
			return nil, fmt.Errorf("%w: secret %d", ErrEmptySecret, i+1)
		case len(key) < SecretMinLen:
			return nil, fmt.Errorf("%w: secret %d has %d bytes, want at least %d", ErrSecretTooShort, i+1, len(key), SecretMinLen)
		}
		keys[i] = key
	}
	return keys, nil
}
