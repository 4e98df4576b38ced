package keyring_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/postbox-go/postbox/keyring"
)

// newKey returns a fresh key, as text and as bytes.
func newKey(t testing.TB) (text string, raw []byte) {
	t.Helper()
	text = keyring.GenerateKey()
	raw, err := keyring.ParseKey(text)
	if err != nil {
		t.Fatal(err)
	}
	return text, raw
}

// mustParse returns the keyring of text.
func mustParse(t testing.TB, text string) *keyring.Keyring {
	t.Helper()
	r, err := keyring.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// mustSeal seals plaintext with aad.
func mustSeal(t testing.TB, r *keyring.Keyring, plaintext, aad string) []byte {
	t.Helper()
	sealed, err := r.Seal([]byte(plaintext), []byte(aad))
	if err != nil {
		t.Fatal(err)
	}
	return sealed
}

// seededRand returns a generator whose seed the test logs, so that a
// failure can be replayed.
func seededRand(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
