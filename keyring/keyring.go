package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"fmt"
	"strings"
)

// A Keyring holds a primary key, which seals, and previous keys, which only
// open. Make one with New, Parse or Load; the zero Keyring holds no key.
// Its fmt forms print key ids only.
type Keyring struct {
	keys []key // keys[0] is the primary
}

// key is one key of a keyring, ready to wrap and unwrap data keys. The key
// bytes are kept only inside aead.
type key struct {
	id   [idSize]byte
	name string // idText(id)
	aead cipher.AEAD
}

// New returns a keyring with primary as its primary key and previous as
// keys that only open; each must be KeySize bytes (ErrMalformedKey). Keys
// given twice are kept once. The bytes are copied into the keyring's
// ciphers, so the caller may clear its slices afterwards.
func New(primary []byte, previous ...[]byte) (*Keyring, error) {
	all := append([][]byte{primary}, previous...)
	for i, k := range all {
		if len(k) != KeySize {
			return nil, fmt.Errorf("%w: key %d of %d is %d bytes, want %d", ErrMalformedKey, i+1, len(all), len(k), KeySize)
		}
	}
	r := &Keyring{}
	for i, k := range all {
		if containsKey(all[:i], k) {
			continue
		}
		block, err := aes.NewCipher(k)
		if err != nil { // unreachable for 32 bytes; kept so a change of KeySize cannot pass silently
			return nil, fmt.Errorf("keyring: key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("keyring: key %d: %w", i+1, err)
		}
		id := keyID(k)
		r.keys = append(r.keys, key{id: id, name: idText(id), aead: aead})
	}
	return r, nil
}

func containsKey(keys [][]byte, k []byte) bool {
	for _, other := range keys {
		if subtle.ConstantTimeCompare(other, k) == 1 {
			return true
		}
	}
	return false
}

// Parse returns the keyring written in text: keys in the forms ParseKey
// reads, separated by commas, spaces or newlines, the first the primary.
// Lines whose first non-space character is "#" are comments. Text without
// a key gives ErrNoKey; a malformed key gives ErrMalformedKey naming its
// position and length, never its text.
func Parse(text string) (*Keyring, error) {
	var fields []string
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		fields = append(fields, strings.FieldsFunc(line, isSeparator)...)
	}
	if len(fields) == 0 {
		return nil, ErrNoKey
	}
	keys := make([][]byte, len(fields))
	for i, f := range fields {
		k, problem := decodeKey(f)
		if problem != "" {
			return nil, fmt.Errorf("%w: key %d of %d: %s", ErrMalformedKey, i+1, len(fields), problem)
		}
		keys[i] = k
	}
	r, err := New(keys[0], keys[1:]...)
	for _, k := range keys {
		clear(k)
	}
	return r, err
}

func isSeparator(r rune) bool {
	switch r {
	case ',', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// PrimaryID returns the id of the primary key, the one Seal and Rewrap seal
// with; "" for the zero Keyring.
func (r *Keyring) PrimaryID() string {
	if len(r.keys) == 0 {
		return ""
	}
	return r.keys[0].name
}

// IDs returns the ids of the keys held, the primary first, then the previous
// keys in the order given, each once.
func (r *Keyring) IDs() []string {
	ids := make([]string, len(r.keys))
	for i, k := range r.keys {
		ids[i] = k.name
	}
	return ids
}

// lookup returns the key whose id is id, or nil.
func (r *Keyring) lookup(id [idSize]byte) *key {
	for i := range r.keys {
		if r.keys[i].id == id {
			return &r.keys[i]
		}
	}
	return nil
}

// String describes the keyring by its key ids only, the primary first:
// "keyring{primary k-…, previous k-…, k-…}".
func (r Keyring) String() string {
	var b strings.Builder
	b.WriteString("keyring{")
	for i, k := range r.keys {
		switch i {
		case 0:
			b.WriteString("primary ")
		case 1:
			b.WriteString(", previous ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(k.name)
	}
	b.WriteString("}")
	return b.String()
}

// GoString is String, so that %#v shows no key either.
func (r Keyring) GoString() string { return r.String() }

// Format writes String for every verb (%v, %+v, %#v, %s, %x, %d, ...), so
// that no fmt verb reaches the ciphers that hold the keys: without it, verbs
// that do not call String (%d, %f, ...) print the fields down to the AES key
// schedule, whose first round key is the key.
func (r Keyring) Format(f fmt.State, _ rune) { fmt.Fprint(f, r.String()) }
