package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/signature"
)

// keysCommands are the subcommands of "postbox keys".
var keysCommands = map[string]command{
	"generate": {summary: "print a new ed25519 key pair for v1a signatures (--type hmac: a whsec_ secret for v1; --type secrets-key: the key that seals endpoints' secrets), once, to stdout", setup: setupKeysGenerate},
}

// setupKeysGenerate prints new keys: signing keys, or a secrets key. They
// are written to stdout only, once, and never logged: the secret must go
// straight to where it is kept (a secret store, --webhook-secret,
// $POSTBOX_SECRETS_KEY).
func setupKeysGenerate(fs *flag.FlagSet) func(context.Context) error {
	kind := fs.String("type", "ed25519", "ed25519: a whsk_ secret key for the sender and its whpk_ public key for the receivers (Standard Webhooks v1a); hmac: one whsec_ secret for both (v1); secrets-key: a pbkey_ key that seals endpoints' secrets in the database ($"+keyring.EnvVar+" or --secrets-key-file of postbox relay --endpoints and postbox endpoints)")
	return func(context.Context) error {
		switch *kind {
		case "ed25519":
			secretKey, publicKey, err := signature.GenerateKeyPair()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(os.Stdout, "secret key: %s\npublic key: %s\n", secretKey, publicKey)
			return err
		case "hmac":
			secret, err := signature.GenerateSecret()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(os.Stdout, "secret: %s\n", secret)
			return err
		case "secrets-key":
			_, err := fmt.Fprintf(os.Stdout, "secrets key: %s\n", keyring.GenerateKey())
			return err
		}
		return fmt.Errorf("%w: --type %q: want ed25519, hmac or secrets-key", errUsage, *kind)
	}
}
