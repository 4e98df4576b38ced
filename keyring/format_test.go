package keyring_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/postbox-go/postbox/keyring"
)

// TestBlobIsTheDocumentedFormat decodes a blob with crypto/cipher alone,
// following the package documentation, so that the format stays what it
// says (another implementation could read the blobs).
func TestBlobIsTheDocumentedFormat(t *testing.T) {
	_, key := newKey(t)
	r, err := keyring.New(key)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append([]byte("postbox keyring key id"), key...))
	wantID := "k-" + hex.EncodeToString(sum[:8])
	if r.PrimaryID() != wantID {
		t.Fatalf("PrimaryID %s, want %s", r.PrimaryID(), wantID)
	}

	plaintext, aad := []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), []byte("ep-1")
	sealed, err := r.Seal(plaintext, aad)
	if err != nil {
		t.Fatal(err)
	}
	if sealed[0] != 1 {
		t.Fatalf("version %d, want 1", sealed[0])
	}
	if got := "k-" + hex.EncodeToString(sealed[1:9]); got != wantID {
		t.Fatalf("key id bytes spell %s, want %s", got, wantID)
	}
	check := sha256.Sum256(append([]byte("postbox keyring header"), sealed[:9]...))
	if !bytes.Equal(sealed[9:13], check[:4]) {
		t.Fatal("header check is not SHA-256(domain || version || key id)[:4]")
	}
	dek, err := gcm(t, key).Open(nil, sealed[13:25], sealed[25:73], sealed[:9])
	if err != nil {
		t.Fatalf("unwrap per the documentation: %v", err)
	}
	if len(dek) != 32 {
		t.Fatalf("DEK of %d bytes", len(dek))
	}
	got, err := gcm(t, dek).Open(nil, sealed[73:85], sealed[85:], aad)
	if err != nil || !bytes.Equal(got, plaintext) {
		t.Fatalf("open per the documentation: %q, %v", got, err)
	}
}

func gcm(t *testing.T, key []byte) cipher.AEAD {
	t.Helper()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
