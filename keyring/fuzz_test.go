package keyring_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/postbox-go/postbox/keyring"
)

// Fixed keys for the fuzz tests, so that the corpus stays meaningful
// between runs. They seal nothing but test data.
const (
	fuzzPrimary  = "pbkey_cG9zdGJveCBrZXlyaW5nIGZ1enogcHJpbWFyeSBrZXk"
	fuzzPrevious = "706f7374626f78206b657972696e672066757a7a2070726576696f7573203332"
	fuzzStranger = "pbkey_c3RyYW5nZXIga2V5IG9mIHRoZSBmdXp6IHRlc3RzISE"
)

// FuzzOpen feeds arbitrary blobs and aads to Open, Rewrap and KeyID of a
// keyring of two keys. Properties: none panics; every error is ErrCorrupt
// or ErrUnknownKey; what opens also rewraps to a blob of the primary key
// that opens to the same plaintext, and KeyID reads it.
func FuzzOpen(f *testing.F) {
	r := mustParse(f, fuzzPrimary+","+fuzzPrevious)
	previous := mustParse(f, fuzzPrevious)
	stranger := mustParse(f, fuzzStranger)
	good := mustSeal(f, r, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "ep-1")
	f.Add(good, []byte("ep-1"))
	f.Add(good, []byte("ep-2"))
	f.Add(mustSeal(f, r, "", ""), []byte(nil))
	f.Add(mustSeal(f, previous, "old secret", "ep-3"), []byte("ep-3"))
	f.Add(mustSeal(f, stranger, "stranger's secret", "ep-4"), []byte("ep-4"))
	f.Add(good[:100], []byte("ep-1"))
	f.Add(good[:13], []byte("ep-1"))
	f.Add(append([]byte{2}, good[1:]...), []byte("ep-1"))
	f.Add([]byte{}, []byte{})
	f.Add(bytes.Repeat([]byte{0}, 200), []byte{0})
	f.Add(bytes.Repeat([]byte{1}, 101), []byte{})

	f.Fuzz(func(t *testing.T, sealed, aad []byte) {
		kept := bytes.Clone(sealed)
		plaintext, err := r.Open(sealed, aad)
		_, idErr := keyring.KeyID(sealed)
		out, changed, rewrapErr := r.Rewrap(sealed, aad)
		if !bytes.Equal(sealed, kept) {
			t.Fatal("the blob was modified")
		}
		if err != nil {
			if !errors.Is(err, keyring.ErrCorrupt) && !errors.Is(err, keyring.ErrUnknownKey) {
				t.Fatalf("Open error %v is neither ErrCorrupt nor ErrUnknownKey", err)
			}
			if rewrapErr == nil {
				t.Fatalf("Rewrap accepted a blob Open refused with %v", err)
			}
			if errors.Is(err, keyring.ErrUnknownKey) && idErr != nil {
				t.Fatalf("ErrUnknownKey, yet KeyID fails: %v", idErr)
			}
			return
		}
		if idErr != nil || rewrapErr != nil {
			t.Fatalf("the blob opens, yet KeyID: %v, Rewrap: %v", idErr, rewrapErr)
		}
		if id, _ := keyring.KeyID(out); id != r.PrimaryID() {
			t.Fatalf("Rewrap gave a blob of %s, want the primary %s", id, r.PrimaryID())
		}
		if id, _ := keyring.KeyID(sealed); changed != (id != r.PrimaryID()) {
			t.Fatalf("Rewrap of a blob of %s: changed %v", id, changed)
		}
		again, err := r.Open(out, aad)
		if err != nil || !bytes.Equal(again, plaintext) {
			t.Fatalf("the rewrapped blob opens to %q, %v; want %q", again, err, plaintext)
		}
	})
}

// FuzzParseKey feeds arbitrary text to ParseKey. Properties: it never
// panics; what it accepts is 32 bytes, which read back the same in the
// pbkey_ form; what it refuses is ErrMalformedKey. (That errors do not
// quote the text is checked by TestParseKeyErrorsNeverQuoteTheInput.)
func FuzzParseKey(f *testing.F) {
	for _, seed := range []string{fuzzPrimary, fuzzPrevious, fuzzStranger, "", "pbkey_", fuzzPrimary + "==",
		"bXkgMzItYnl0ZSBrZXkgZm9yIHRoZSBmdXp6IHRlc3Q=", "bXkgMzItYnl0ZSBrZXkgZm9yIHRoZSBmdXp6IHRlc3Q", fuzzPrevious[:63] + "g"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		raw, err := keyring.ParseKey(text)
		if err != nil {
			if !errors.Is(err, keyring.ErrMalformedKey) || raw != nil {
				t.Fatalf("ParseKey = %d bytes, %v; want nil and ErrMalformedKey", len(raw), err)
			}
			return
		}
		if len(raw) != keyring.KeySize {
			t.Fatalf("ParseKey accepted %d bytes", len(raw))
		}
		r, err := keyring.New(raw)
		if err != nil {
			t.Fatal(err)
		}
		if back := mustParse(t, text); back.PrimaryID() != r.PrimaryID() {
			t.Fatalf("Parse and ParseKey disagree on the key")
		}
	})
}
