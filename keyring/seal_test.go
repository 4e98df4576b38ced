package keyring_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/keyring"
)

// overhead is a blob's length beyond its plaintext's, as the package
// documentation gives it.
const overhead = 101

func TestSealOpenRoundTripsAnyPlaintextAndAAD(t *testing.T) {
	text, _ := newKey(t)
	r := mustParse(t, text)
	rng := seededRand(t)
	lengths := []int{0, 1, 15, 16, 17, 255, 256, 4096, 64 << 10}
	for range 200 {
		lengths = append(lengths, rng.IntN(64<<10+1))
	}
	for i, n := range lengths {
		plaintext := randomBytes(rng, n)
		var aad []byte
		if i%5 != 0 { // every fifth without aad
			aad = randomBytes(rng, rng.IntN(65))
		}
		sealed, err := r.Seal(plaintext, aad)
		if err != nil {
			t.Fatal(err)
		}
		if len(sealed) != n+overhead {
			t.Fatalf("plaintext of %d bytes: blob of %d bytes, want %d", n, len(sealed), n+overhead)
		}
		if n >= 16 && bytes.Contains(sealed, plaintext[:16]) {
			t.Fatalf("plaintext of %d bytes: the blob holds its first 16 bytes in clear", n)
		}
		got, err := r.Open(sealed, aad)
		if err != nil {
			t.Fatalf("plaintext of %d bytes, aad of %d: %v", n, len(aad), err)
		}
		if !bytes.Equal(got, plaintext) {
			t.Fatalf("plaintext of %d bytes: opened %d different bytes", n, len(got))
		}
		if id, err := keyring.KeyID(sealed); err != nil || id != r.PrimaryID() {
			t.Fatalf("KeyID = %q, %v; want the primary %s", id, err, r.PrimaryID())
		}
	}
}

func TestSealingTwiceGivesDifferentBlobs(t *testing.T) {
	text, _ := newKey(t)
	r := mustParse(t, text)
	a, b := mustSeal(t, r, "whsec_same", "ep-1"), mustSeal(t, r, "whsec_same", "ep-1")
	if bytes.Equal(a, b) {
		t.Fatal("two seals of the same plaintext gave the same blob")
	}
	// Beyond the version, key id and header check (13 bytes), nothing repeats:
	// the nonces and the data key are fresh.
	if bytes.Equal(a[13:25], b[13:25]) || bytes.Equal(a[73:85], b[73:85]) || bytes.Equal(a[85:], b[85:]) {
		t.Fatal("two seals share a nonce or a ciphertext")
	}
}

func TestAnyFlippedBitOrTruncationIsCorrupt(t *testing.T) {
	text, _ := newKey(t)
	other, _ := newKey(t)
	r := mustParse(t, text+","+other)
	sealed := mustSeal(t, r, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "ep-42")
	if _, err := r.Open(sealed, []byte("ep-42")); err != nil {
		t.Fatal(err)
	}
	for i := range sealed {
		for bit := range 8 {
			damaged := bytes.Clone(sealed)
			damaged[i] ^= 1 << bit
			if _, err := r.Open(damaged, []byte("ep-42")); !errors.Is(err, keyring.ErrCorrupt) {
				t.Fatalf("bit %d of byte %d flipped: Open error %v, want ErrCorrupt", bit, i, err)
			}
			if _, _, err := r.Rewrap(damaged, []byte("ep-42")); !errors.Is(err, keyring.ErrCorrupt) {
				t.Fatalf("bit %d of byte %d flipped: Rewrap error %v, want ErrCorrupt", bit, i, err)
			}
		}
		damaged := bytes.Clone(sealed)
		damaged[i] ^= 0xff
		if _, err := r.Open(damaged, []byte("ep-42")); !errors.Is(err, keyring.ErrCorrupt) {
			t.Fatalf("byte %d inverted: Open error %v, want ErrCorrupt", i, err)
		}
	}
	for n := range len(sealed) {
		if _, err := r.Open(sealed[:n], []byte("ep-42")); !errors.Is(err, keyring.ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: Open error %v, want ErrCorrupt", n, err)
		}
		if _, err := keyring.KeyID(sealed[:min(n, 12)]); !errors.Is(err, keyring.ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: KeyID error %v, want ErrCorrupt", n, err)
		}
	}
	if _, err := r.Open(append(bytes.Clone(sealed), 0), []byte("ep-42")); !errors.Is(err, keyring.ErrCorrupt) {
		t.Fatalf("a byte appended: Open error %v, want ErrCorrupt", err)
	}
}

func TestAnotherAADIsCorrupt(t *testing.T) {
	text, _ := newKey(t)
	r := mustParse(t, text)
	sealed := mustSeal(t, r, "s3cret-value", "ep-1")
	for _, aad := range []string{"", "ep-2", "ep-", "ep-1 ", "EP-1", "ep-10"} {
		if _, err := r.Open(sealed, []byte(aad)); !errors.Is(err, keyring.ErrCorrupt) {
			t.Errorf("aad %q: Open error %v, want ErrCorrupt", aad, err)
		}
		if _, _, err := r.Rewrap(sealed, []byte(aad)); !errors.Is(err, keyring.ErrCorrupt) {
			t.Errorf("aad %q: Rewrap error %v, want ErrCorrupt", aad, err)
		}
	}
	// nil and empty aad are the same additional data.
	empty := mustSeal(t, r, "s3cret-value", "")
	if _, err := r.Open(empty, nil); err != nil {
		t.Errorf("sealed with empty aad, opened with nil: %v", err)
	}
}

func TestBlobOfAnotherKeyIsUnknownKeyNamingIt(t *testing.T) {
	a, _ := newKey(t)
	b, _ := newKey(t)
	ra, rb := mustParse(t, a), mustParse(t, b)
	sealed := mustSeal(t, ra, "s3cret-value", "ep-1")
	_, err := rb.Open(sealed, []byte("ep-1"))
	if !errors.Is(err, keyring.ErrUnknownKey) || errors.Is(err, keyring.ErrCorrupt) {
		t.Fatalf("Open error %v, want ErrUnknownKey only", err)
	}
	if !strings.Contains(err.Error(), ra.PrimaryID()) {
		t.Fatalf("error %q does not name the sealing key %s", err, ra.PrimaryID())
	}
	if _, _, err := rb.Rewrap(sealed, []byte("ep-1")); !errors.Is(err, keyring.ErrUnknownKey) {
		t.Fatalf("Rewrap error %v, want ErrUnknownKey", err)
	}
	if id, err := keyring.KeyID(sealed); err != nil || id != ra.PrimaryID() {
		t.Fatalf("KeyID = %q, %v; want %s", id, err, ra.PrimaryID())
	}
}

func TestPreviousKeysOpenAndOnlyThePrimarySeals(t *testing.T) {
	oldKey, _ := newKey(t)
	newer, _ := newKey(t)
	old := mustParse(t, oldKey)
	sealed := mustSeal(t, old, "s3cret-value", "ep-1")

	rotated := mustParse(t, newer+","+oldKey)
	got, err := rotated.Open(sealed, []byte("ep-1"))
	if err != nil || string(got) != "s3cret-value" {
		t.Fatalf("previous key: Open = %q, %v", got, err)
	}
	fresh := mustSeal(t, rotated, "another", "ep-2")
	if id, _ := keyring.KeyID(fresh); id != rotated.PrimaryID() || id == old.PrimaryID() {
		t.Fatalf("sealed by %s, want the primary %s", id, rotated.PrimaryID())
	}
	if _, err := old.Open(fresh, []byte("ep-2")); !errors.Is(err, keyring.ErrUnknownKey) {
		t.Fatalf("a keyring of the old key only opened a blob of the new: %v", err)
	}
}

func TestRewrapMovesTheBlobToThePrimaryKey(t *testing.T) {
	oldKey, _ := newKey(t)
	newer, _ := newKey(t)
	old := mustParse(t, oldKey)
	sealed := mustSeal(t, old, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "ep-7")
	kept := bytes.Clone(sealed)

	rotated := mustParse(t, newer+"\n"+oldKey)
	out, changed, err := rotated.Rewrap(sealed, []byte("ep-7"))
	if err != nil || !changed {
		t.Fatalf("Rewrap = changed %v, %v; want changed", changed, err)
	}
	if !bytes.Equal(sealed, kept) {
		t.Fatal("Rewrap changed its input")
	}
	if id, _ := keyring.KeyID(out); id != rotated.PrimaryID() {
		t.Fatalf("rewrapped blob names %s, want %s", id, rotated.PrimaryID())
	}
	if !bytes.Equal(out[73:], sealed[73:]) {
		t.Fatal("Rewrap changed the data part (data nonce and ciphertext)")
	}

	onlyNew := mustParse(t, newer)
	got, err := onlyNew.Open(out, []byte("ep-7"))
	if err != nil || string(got) != "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" {
		t.Fatalf("keyring of the new key only: Open = %q, %v", got, err)
	}
	if _, err := onlyNew.Open(out, []byte("ep-8")); !errors.Is(err, keyring.ErrCorrupt) {
		t.Fatalf("rewrapped blob opened with another aad: %v", err)
	}

	again, changed, err := rotated.Rewrap(out, []byte("ep-7"))
	if err != nil || changed || !bytes.Equal(again, out) {
		t.Fatalf("second Rewrap = changed %v, %v, same bytes %v; want unchanged", changed, err, bytes.Equal(again, out))
	}
}

func TestRewrapRefusesCorruptBlobs(t *testing.T) {
	oldKey, _ := newKey(t)
	newer, _ := newKey(t)
	old, rotated := mustParse(t, oldKey), mustParse(t, newer+","+oldKey)
	byOld := mustSeal(t, old, "s3cret-value", "ep-1")
	byPrimary := mustSeal(t, rotated, "s3cret-value", "ep-1")
	for name, sealed := range map[string][]byte{"sealed by the previous key": byOld, "sealed by the primary": byPrimary} {
		last := bytes.Clone(sealed)
		last[len(last)-1] ^= 1 // the data's tag: the wrap alone still opens
		if out, _, err := rotated.Rewrap(last, []byte("ep-1")); !errors.Is(err, keyring.ErrCorrupt) || out != nil {
			t.Errorf("%s, data tampered: Rewrap = %d bytes, %v; want ErrCorrupt", name, len(out), err)
		}
		if out, _, err := rotated.Rewrap(sealed, []byte("ep-2")); !errors.Is(err, keyring.ErrCorrupt) || out != nil {
			t.Errorf("%s, another aad: Rewrap = %d bytes, %v; want ErrCorrupt", name, len(out), err)
		}
	}
}

func TestSealOnAZeroKeyringIsNoKey(t *testing.T) {
	var r keyring.Keyring
	if _, err := r.Seal([]byte("x"), nil); !errors.Is(err, keyring.ErrNoKey) {
		t.Fatalf("Seal error %v, want ErrNoKey", err)
	}
	text, _ := newKey(t)
	sealed := mustSeal(t, mustParse(t, text), "x", "")
	if _, err := r.Open(sealed, nil); !errors.Is(err, keyring.ErrUnknownKey) {
		t.Fatalf("Open error %v, want ErrUnknownKey", err)
	}
	if r.PrimaryID() != "" || len(r.IDs()) != 0 {
		t.Fatalf("zero keyring: PrimaryID %q, IDs %v", r.PrimaryID(), r.IDs())
	}
}

func TestAKeyringServesConcurrentCallers(t *testing.T) {
	oldKey, _ := newKey(t)
	newer, _ := newKey(t)
	old, r := mustParse(t, oldKey), mustParse(t, newer+","+oldKey)
	byOld := mustSeal(t, old, "old secret", "ep-0")
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			aad := []byte{byte(g)}
			for range 200 {
				sealed, err := r.Seal([]byte("s3cret-value"), aad)
				if err == nil {
					_, err = r.Open(sealed, aad)
				}
				if err == nil {
					_, _, err = r.Rewrap(byOld, []byte("ep-0"))
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
