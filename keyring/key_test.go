package keyring_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/keyring"
)

func TestGenerateKeyWritesFreshPbkeyKeys(t *testing.T) {
	form := regexp.MustCompile(`^pbkey_[A-Za-z0-9_-]{43}$`)
	seen := map[string]bool{}
	for range 100 {
		k := keyring.GenerateKey()
		if !form.MatchString(k) {
			t.Fatalf("GenerateKey wrote a key of %d characters not of the form pbkey_<43 base64url>", len(k))
		}
		if seen[k] {
			t.Fatal("GenerateKey repeated a key")
		}
		seen[k] = true
		raw, err := keyring.ParseKey(k)
		if err != nil || len(raw) != keyring.KeySize {
			t.Fatalf("ParseKey(GenerateKey()) = %d bytes, %v", len(raw), err)
		}
	}
}

func TestParseKeyReadsEveryForm(t *testing.T) {
	rng := seededRand(t)
	for range 200 { // random keys, so that +, /, - and _ all occur
		key := randomBytes(rng, 32)
		forms := map[string]string{
			"pbkey":           "pbkey_" + base64.RawURLEncoding.EncodeToString(key),
			"pbkey padded":    "pbkey_" + base64.URLEncoding.EncodeToString(key),
			"std base64":      base64.StdEncoding.EncodeToString(key),
			"raw std base64":  base64.RawStdEncoding.EncodeToString(key),
			"url base64":      base64.URLEncoding.EncodeToString(key),
			"raw url base64":  base64.RawURLEncoding.EncodeToString(key),
			"hex":             hex.EncodeToString(key),
			"upper hex":       strings.ToUpper(hex.EncodeToString(key)),
			"spaces around":   " \t" + hex.EncodeToString(key) + "\r\n",
			"newline in file": "pbkey_" + base64.RawURLEncoding.EncodeToString(key) + "\n",
		}
		for name, text := range forms {
			got, err := keyring.ParseKey(text)
			if err != nil || !bytes.Equal(got, key) {
				t.Fatalf("%s: ParseKey = %x, %v; want the key", name, got, err)
			}
		}
	}
}

func TestParseKeyErrorsNeverQuoteTheInput(t *testing.T) {
	rng := seededRand(t)
	_, key := newKey(t)
	valid := base64.RawURLEncoding.EncodeToString(key)
	hexKey := hex.EncodeToString(key)
	inputs := []string{
		"", " ", "pbkey_", "pbkey", "PBKEY_" + valid,
		"pbkey_" + valid[:42], "pbkey_" + valid + "A", "pbkey_" + valid + "AAAA",
		"pbkey_" + base64.StdEncoding.EncodeToString(append([]byte{0xfb, 0xff}, key[2:]...)), // + and /
		"pbkey_" + valid[:20] + "!" + valid[21:],
		hexKey[:63], hexKey + "0", hexKey[:62] + "zz", "0x" + hexKey,
		base64.StdEncoding.EncodeToString(key[:31]), base64.StdEncoding.EncodeToString(append(bytes.Clone(key), 0)),
		base64.StdEncoding.EncodeToString(key)[:43] + "==", base64.StdEncoding.EncodeToString(make([]byte, 64)),
		valid + " " + valid, valid + "," + valid, "whsec_" + valid, "password1234", strings.Repeat("A", 1000),
		"\x00\x01\x02\x03\x04\x05\x06\x07\x08", "ключ-не-тот-ключ-не-тот", "pbkey_\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9",
	}
	alphabets := []string{
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
		"0123456789abcdefABCDEF",
		"abcdefghijklmnopqrstuvwxyz _-:,.!#\"'",
	}
	for range 5000 {
		alphabet := alphabets[rng.IntN(len(alphabets))]
		n := []int{8, 16, 42, 43, 44, 63, 64, 65, 86, 88, 100}[rng.IntN(11)] + rng.IntN(3) - 1
		s := randomString(rng, alphabet, n)
		if rng.IntN(3) == 0 {
			s = "pbkey_" + s
		}
		inputs = append(inputs, s)
	}
	for _, in := range inputs {
		raw, err := keyring.ParseKey(in)
		if err == nil {
			if len(raw) != keyring.KeySize {
				t.Fatalf("an input of %d characters parsed to %d bytes", len(in), len(raw))
			}
			continue // a random input that happens to be a key (64 hex digits, 43 base64)
		}
		if !errors.Is(err, keyring.ErrMalformedKey) {
			t.Fatalf("error %v does not match ErrMalformedKey", err)
		}
		assertNotQuoted(t, err.Error(), in)
		if _, perr := keyring.Parse("pbkey_" + valid + ", " + in); perr != nil {
			assertNotQuoted(t, perr.Error(), in)
			assertNotQuoted(t, perr.Error(), valid)
		}
	}
}

// assertNotQuoted fails when msg holds secret, or any 8 characters of it
// in a row (for secrets of 8 characters or more), the "pbkey_" prefix,
// which errors name, set aside.
func assertNotQuoted(t *testing.T, msg, secret string) {
	t.Helper()
	secret = strings.TrimPrefix(strings.TrimSpace(secret), keyring.KeyPrefix)
	if len(secret) < 8 {
		return
	}
	for i := 0; i+8 <= len(secret); i++ {
		if strings.Contains(msg, secret[i:i+8]) {
			t.Fatalf("error %q quotes 8 characters of an input of %d", msg, len(secret))
		}
	}
}

func randomString(rng *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

func TestParseKeyErrorsGiveLengthAndExpectation(t *testing.T) {
	_, err := keyring.ParseKey("pbkey_tooshort")
	if err == nil || !strings.Contains(err.Error(), "8 characters after pbkey_") || !strings.Contains(err.Error(), "64 hex digits") {
		t.Fatalf("error %v does not give the length and the expected forms", err)
	}
}
