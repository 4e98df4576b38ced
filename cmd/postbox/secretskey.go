package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/postbox-go/postbox/keyring"
)

// secretsKeyFlag is --secrets-key-file, with $POSTBOX_SECRETS_KEY beside
// it: where the commands that seal or open endpoints' secrets (relay
// --endpoints, endpoints add, update, rotate-secret, test, rekey) find
// the secrets key. The key itself is never a flag (it would show in the
// process list), never printed and never logged: only its id is.
type secretsKeyFlag struct{ file string }

func (k *secretsKeyFlag) register(fs *flag.FlagSet, what string) {
	fs.StringVar(&k.file, "secrets-key-file", "", "a file (mode 0600) holding the secrets key that seals endpoints' secrets, "+what+
		" (postbox keys generate --type secrets-key makes one; during a rotation NEW,OLD: the first seals, the others only open); default: the key in $"+keyring.EnvVar)
}

// given reports whether a secrets key is given, by the flag or the
// environment.
func (k *secretsKeyFlag) given() bool { return k.file != "" || os.Getenv(keyring.EnvVar) != "" }

// errNoSecretsKey is the refusal of a command that needs the secrets key
// and was given none: it says how to make one and where to put it.
func errNoSecretsKey(command string) error {
	return fmt.Errorf("%w: %s needs the secrets key that seals the endpoints' secrets, and none is given: "+
		"make one with `postbox keys generate --type secrets-key`, keep it where the relay's other secrets are, "+
		"and give it in $%s or in a file (mode 0600) named by --secrets-key-file", errUsage, command, keyring.EnvVar)
}

// load returns the keyring of the flag or of $POSTBOX_SECRETS_KEY, for
// command (named in the errors). A key file others may read is warned
// about on stderr. No error holds a key.
func (k *secretsKeyFlag) load(command string) (*keyring.Keyring, error) {
	r, err := keyring.Load(os.Getenv(keyring.EnvVar), k.file)
	switch {
	case k.file == "" && errors.Is(err, keyring.ErrNoKey):
		return nil, errNoSecretsKey(command)
	case err != nil && k.file != "":
		return nil, fmt.Errorf("%w: --secrets-key-file: %v", errUsage, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", errUsage, err) // it names the variable
	}
	if k.file != "" && keyring.FileTooOpen(k.file) {
		warn(fmt.Sprintf("warning: --secrets-key-file %s may be read by other users than its owner, and whoever reads it reads every endpoint's secrets: chmod 600 it", k.file))
	}
	return r, nil
}
