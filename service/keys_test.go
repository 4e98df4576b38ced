package service_test

import "github.com/postbox-go/postbox/keyring"

// testKeyring seals and opens the tests' endpoints' secrets.
var testKeyring = func() *keyring.Keyring {
	k, err := keyring.Parse(keyring.GenerateKey())
	if err != nil {
		panic(err)
	}
	return k
}()
