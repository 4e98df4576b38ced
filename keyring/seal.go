package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"strings"
)

// The blob format, as the package documentation describes it.
const (
	version     = 1
	nonceSize   = 12 // crypto/cipher's standard GCM nonce
	tagSize     = 16 // crypto/cipher's standard GCM tag
	checkSize   = 4
	checkDomain = "postbox keyring header"

	idStart        = 1
	checkStart     = idStart + idSize           // 9
	wrapNonceStart = checkStart + checkSize     // 13
	wrappedStart   = wrapNonceStart + nonceSize // 25
	dataNonceStart = wrappedStart + KeySize + tagSize
	dataStart      = dataNonceStart + nonceSize // 85
	overhead       = dataStart + tagSize        // 101: a blob's length beyond its plaintext's
)

// blob is a sealed blob cut into its parts; the slices alias the blob.
type blob struct {
	id        [idSize]byte
	header    []byte // version and key id: the wrap's additional data
	wrapNonce []byte
	wrapped   []byte
	data      []byte // data nonce and ciphertext, which Rewrap keeps
}

// parseBlob cuts a blob into its parts, checking its length, version and
// header check.
func parseBlob(sealed []byte) (blob, error) {
	if len(sealed) < overhead {
		return blob{}, fmt.Errorf("%w: %d bytes, shorter than the %d of an empty plaintext's", ErrCorrupt, len(sealed), overhead)
	}
	if sealed[0] != version {
		return blob{}, fmt.Errorf("%w: format version %d, want %d", ErrCorrupt, sealed[0], version)
	}
	check := headerCheck(sealed[:checkStart])
	if string(check[:]) != string(sealed[checkStart:wrapNonceStart]) {
		return blob{}, fmt.Errorf("%w: header check mismatch (damaged version or key id)", ErrCorrupt)
	}
	b := blob{
		header:    sealed[:checkStart],
		wrapNonce: sealed[wrapNonceStart:wrappedStart],
		wrapped:   sealed[wrappedStart:dataNonceStart],
		data:      sealed[dataNonceStart:],
	}
	copy(b.id[:], sealed[idStart:checkStart])
	return b, nil
}

func headerCheck(header []byte) [checkSize]byte {
	h := sha256.New()
	h.Write([]byte(checkDomain))
	h.Write(header)
	var c [checkSize]byte
	copy(c[:], h.Sum(nil))
	return c
}

// appendHeader appends the version, the key id and the header check.
func appendHeader(dst []byte, id [idSize]byte) []byte {
	start := len(dst)
	dst = append(dst, version)
	dst = append(dst, id[:]...)
	check := headerCheck(dst[start:])
	return append(dst, check[:]...)
}

// appendWrap appends a fresh wrap nonce and the DEK wrapped under k, whose
// additional data is header.
func appendWrap(dst []byte, k *key, header, dek []byte) []byte {
	nonce := make([]byte, nonceSize)
	rand.Read(nonce) // never returns an error
	dst = append(dst, nonce...)
	return k.aead.Seal(dst, nonce, dek, header)
}

// Seal seals plaintext under a fresh data key, wrapped under the primary
// key, and returns the blob (see the package documentation for its
// format). aad is authenticated but not stored: Open must be given the same
// aad, typically the id of the row that holds the blob. It fails only on a
// keyring without a key (ErrNoKey).
func (r *Keyring) Seal(plaintext, aad []byte) ([]byte, error) {
	if len(r.keys) == 0 {
		return nil, ErrNoKey
	}
	primary := &r.keys[0]
	dek := make([]byte, KeySize)
	rand.Read(dek) // never returns an error
	defer clear(dek)
	data, err := dataAEAD(dek)
	if err != nil {
		return nil, err
	}

	out := make([]byte, 0, overhead+len(plaintext))
	out = appendHeader(out, primary.id)
	out = appendWrap(out, primary, out[:checkStart], dek)
	nonce := make([]byte, nonceSize)
	rand.Read(nonce) // never returns an error
	out = append(out, nonce...)
	return data.Seal(out, nonce, plaintext, aad), nil
}

// dataAEAD returns AES-256-GCM under a data key.
func dataAEAD(dek []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(dek)
	if err != nil { // unreachable: a DEK is KeySize bytes
		return nil, fmt.Errorf("keyring: data key: %w", err)
	}
	return cipher.NewGCM(block)
}

// Open returns the plaintext of a blob Seal made with the same aad, under
// any key of the keyring. Its errors: ErrUnknownKey, naming the id of the
// key that sealed the blob, when the keyring lacks that key; ErrCorrupt
// when the blob is not one Seal made and left intact, or aad differs. It
// never panics, whatever the input.
func (r *Keyring) Open(sealed, aad []byte) ([]byte, error) {
	b, err := parseBlob(sealed)
	if err != nil {
		return nil, err
	}
	dek, data, err := r.unwrap(b)
	if err != nil {
		return nil, err
	}
	defer clear(dek)
	return openData(data, b.data, aad)
}

// unwrap returns the DEK of a parsed blob and its cipher.
func (r *Keyring) unwrap(b blob) ([]byte, cipher.AEAD, error) {
	k := r.lookup(b.id)
	if k == nil {
		return nil, nil, fmt.Errorf("%w: %s (it holds %s)", ErrUnknownKey, idText(b.id), r.heldIDs())
	}
	dek, err := k.aead.Open(nil, b.wrapNonce, b.wrapped, b.header)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the data key does not authenticate under key %s", ErrCorrupt, k.name)
	}
	data, err := dataAEAD(dek)
	if err != nil {
		clear(dek)
		return nil, nil, err
	}
	return dek, data, nil
}

// openData opens the data part of a blob: the data nonce then the
// ciphertext.
func openData(data cipher.AEAD, part, aad []byte) ([]byte, error) {
	plaintext, err := data.Open(nil, part[:nonceSize], part[nonceSize:], aad)
	if err != nil {
		return nil, fmt.Errorf("%w: the data does not authenticate (tampered, or another aad than it was sealed with)", ErrCorrupt)
	}
	return plaintext, nil
}

func (r *Keyring) heldIDs() string {
	if len(r.keys) == 0 {
		return "no key"
	}
	return strings.Join(r.IDs(), ", ")
}

// Rewrap returns the blob with its data key wrapped under the primary key,
// and changed true; the data part is kept as it is. It first checks that
// the blob opens with aad, so that a corrupt blob is reported (ErrCorrupt,
// ErrUnknownKey as Open), not re-wrapped. A blob the primary key already
// wraps is returned as it is (the same slice), with changed false.
func (r *Keyring) Rewrap(sealed, aad []byte) (out []byte, changed bool, err error) {
	b, err := parseBlob(sealed)
	if err != nil {
		return nil, false, err
	}
	dek, data, err := r.unwrap(b)
	if err != nil {
		return nil, false, err
	}
	defer clear(dek)
	plaintext, err := openData(data, b.data, aad)
	if err != nil {
		return nil, false, err
	}
	clear(plaintext)
	primary := &r.keys[0] // unwrap found a key, so there is one
	if b.id == primary.id {
		return sealed, false, nil
	}
	out = make([]byte, 0, len(sealed))
	out = appendHeader(out, primary.id)
	out = appendWrap(out, primary, out[:checkStart], dek)
	return append(out, b.data...), true, nil
}

// KeyID returns the id of the key that sealed a blob, read from the blob
// without opening it; ErrCorrupt for what is not a blob of this format.
func KeyID(sealed []byte) (string, error) {
	b, err := parseBlob(sealed)
	if err != nil {
		return "", err
	}
	return idText(b.id), nil
}
