package keyring_test

import (
	"fmt"
	"strings"

	"github.com/postbox-go/postbox/keyring"
)

func ExampleGenerateKey() {
	key := keyring.GenerateKey() // print it once, store it in POSTBOX_SECRETS_KEY or a key file
	r, err := keyring.Parse(key)
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.HasPrefix(key, keyring.KeyPrefix), len(key), strings.HasPrefix(r.PrimaryID(), "k-"))
	// Output: true 49 true
}

func ExampleKeyring_Seal() {
	// Example keys: never use a key that was published.
	r, err := keyring.Parse("pbkey_cG9zdGJveCBrZXlyaW5nIGV4YW1wbGUga2V5IG9uZSE")
	if err != nil {
		panic(err)
	}
	// The endpoint's id binds the sealed secret to its row.
	sealed, err := r.Seal([]byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), []byte("endpoint 42"))
	if err != nil {
		panic(err)
	}
	id, _ := keyring.KeyID(sealed)
	fmt.Println(r, id, len(sealed))

	secret, err := r.Open(sealed, []byte("endpoint 42"))
	fmt.Println(string(secret), err)

	_, err = r.Open(sealed, []byte("endpoint 43")) // copied into another row
	fmt.Println(err)
	// Output:
	// keyring{primary k-108f93c8220fc835} k-108f93c8220fc835 139
	// whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw <nil>
	// keyring: corrupt sealed blob: the data does not authenticate (tampered, or another aad than it was sealed with)
}

func ExampleKeyring_Rewrap() {
	const oldKey = "pbkey_cG9zdGJveCBrZXlyaW5nIGV4YW1wbGUga2V5IG9uZSE"
	const newKey = "pbkey_cG9zdGJveCBrZXlyaW5nIGV4YW1wbGUga2V5IHR3byE"
	old, _ := keyring.Parse(oldKey)
	sealed, _ := old.Seal([]byte("s3cret"), []byte("endpoint 42"))

	// Step 1: the new key first, the old one after it: new blobs are sealed
	// by the new key, old blobs still open.
	rotating, err := keyring.Parse(newKey + "," + oldKey)
	if err != nil {
		panic(err)
	}
	// Step 2 (postbox endpoints rekey): re-wrap every stored blob.
	rewrapped, changed, err := rotating.Rewrap(sealed, []byte("endpoint 42"))
	if err != nil {
		panic(err)
	}
	id, _ := keyring.KeyID(rewrapped)
	fmt.Println(rotating, changed, id)

	// Step 3: no blob names the old key any more; drop it.
	rotated, _ := keyring.Parse(newKey)
	secret, err := rotated.Open(rewrapped, []byte("endpoint 42"))
	fmt.Println(string(secret), err)
	_, err = rotated.Open(sealed, []byte("endpoint 42")) // a blob step 2 missed
	fmt.Println(err)
	// Output:
	// keyring{primary k-72f47c0724b9ee25, previous k-108f93c8220fc835} true k-72f47c0724b9ee25
	// s3cret <nil>
	// keyring: sealed by a key the keyring does not hold: k-108f93c8220fc835 (it holds k-72f47c0724b9ee25)
}
