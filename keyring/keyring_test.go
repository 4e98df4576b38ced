package keyring_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/keyring"
)

func TestParseReadsKeyFilesAndLists(t *testing.T) {
	a, rawA := newKey(t)
	b, rawB := newKey(t)
	c, _ := newKey(t)
	ids := mustParse(t, a+","+b+","+c).IDs()
	for name, text := range map[string]string{
		"commas":         a + "," + b + "," + c,
		"commas, spaces": a + ", " + b + " ,\t" + c,
		"spaces":         a + " " + b + " " + c,
		"lines":          a + "\n" + b + "\n" + c + "\n",
		"CRLF lines":     a + "\r\n" + b + "\r\n" + c,
		"other forms":    hex.EncodeToString(rawA) + " " + base64.StdEncoding.EncodeToString(rawB) + " " + c,
		"duplicates":     a + "," + a + "," + b + "," + a + "," + c + "," + b,
		"a commented file": "# postbox secrets keyring\n\n# the primary, since 2025-06\n" + a +
			"\n  # previous keys\n" + b + "\n\n" + c + "\n# end\n",
	} {
		r, err := keyring.Parse(text)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(r.IDs(), ids) || r.PrimaryID() != ids[0] {
			t.Fatalf("%s: IDs %v, primary %s; want %v", name, r.IDs(), r.PrimaryID(), ids)
		}
	}
}

func TestParseWithoutKeyIsNoKey(t *testing.T) {
	for _, text := range []string{"", " ", "\n\n", ",,, ,", "# only a comment\n  # another\n"} {
		if _, err := keyring.Parse(text); !errors.Is(err, keyring.ErrNoKey) {
			t.Errorf("Parse(%q) error %v, want ErrNoKey", text, err)
		}
	}
}

func TestParseNamesTheMalformedKeyByPosition(t *testing.T) {
	a, _ := newKey(t)
	_, err := keyring.Parse(a + ", pbkey_notakeyatall, " + a)
	if !errors.Is(err, keyring.ErrMalformedKey) || !strings.Contains(err.Error(), "key 2 of 3") {
		t.Fatalf("error %v, want ErrMalformedKey naming key 2 of 3", err)
	}
	// A comment is a comment only at the start of a line.
	if _, err := keyring.Parse(a + " # the primary"); !errors.Is(err, keyring.ErrMalformedKey) {
		t.Fatalf("trailing comment: error %v, want ErrMalformedKey", err)
	}
}

func TestNewChecksLengthsAndCopiesKeys(t *testing.T) {
	_, key := newKey(t)
	for _, bad := range [][]byte{nil, {}, key[:31], append(bytes.Clone(key), 1)} {
		if _, err := keyring.New(bad); !errors.Is(err, keyring.ErrMalformedKey) {
			t.Errorf("New of %d bytes: error %v, want ErrMalformedKey", len(bad), err)
		}
		if _, err := keyring.New(key, key, bad); !errors.Is(err, keyring.ErrMalformedKey) || !strings.Contains(err.Error(), "key 3 of 3") {
			t.Errorf("New with a third key of %d bytes: error %v, want ErrMalformedKey naming key 3", len(bad), err)
		}
	}

	mine := bytes.Clone(key)
	r, err := keyring.New(mine, mine)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.IDs()) != 1 {
		t.Fatalf("a key given twice: IDs %v", r.IDs())
	}
	sealed, err := r.Seal([]byte("s3cret-value"), nil)
	if err != nil {
		t.Fatal(err)
	}
	clear(mine)
	if _, err := r.Open(sealed, nil); err != nil {
		t.Fatalf("after the caller cleared its key slice: %v", err)
	}
	byBytes, _ := keyring.New(key)
	if byBytes.PrimaryID() != r.PrimaryID() {
		t.Fatal("the same key has two ids")
	}
}

func TestFmtOfAKeyringShowsIDsOnly(t *testing.T) {
	a, rawA := newKey(t)
	b, rawB := newKey(t)
	r := mustParse(t, a+","+b)
	want := fmt.Sprintf("keyring{primary %s, previous %s}", r.PrimaryID(), r.IDs()[1])
	if r.String() != want {
		t.Fatalf("String %q, want %q", r.String(), want)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%10.3f"} {
		if got, gotValue := fmt.Sprintf(verb, r), fmt.Sprintf(verb, *r); got != want || gotValue != want {
			t.Errorf("Sprintf(%q) = %q and %q of the value, want %q", verb, got, gotValue, want)
		}
	}
	type holder struct {
		Ring  *keyring.Keyring
		Value keyring.Keyring
	}
	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%p"} {
		outputs = append(outputs, fmt.Sprintf(verb, r), fmt.Sprintf(verb, *r), fmt.Sprintf(verb, holder{r, *r}))
	}
	outputs = append(outputs, fmt.Sprint(r), fmt.Sprintln(*r), r.GoString(), fmt.Sprintf("%v", []*keyring.Keyring{r}))
	for _, out := range outputs {
		for i, raw := range [][]byte{rawA, rawB} {
			for _, form := range []string{
				[]string{a, b}[i], string(raw), hex.EncodeToString(raw), strings.ToUpper(hex.EncodeToString(raw)),
				base64.StdEncoding.EncodeToString(raw)[:20], base64.RawURLEncoding.EncodeToString(raw)[:20],
				fmt.Sprint(raw[:8])[1:20], // the decimal bytes %v prints
			} {
				if strings.Contains(out, form) {
					t.Fatalf("fmt output %q holds key %d", out, i+1)
				}
			}
		}
	}
}

func TestErrorsHoldNoKeyNorPlaintext(t *testing.T) {
	a, rawA := newKey(t)
	other, _ := newKey(t)
	r := mustParse(t, a)
	plaintext := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	sealed := mustSeal(t, r, plaintext, "ep-1")
	damaged := bytes.Clone(sealed)
	damaged[len(damaged)-1] ^= 1
	var errs []error
	_, err := r.Open(sealed, []byte("ep-2"))
	errs = append(errs, err)
	_, err = r.Open(damaged, []byte("ep-1"))
	errs = append(errs, err)
	_, err = mustParse(t, other).Open(sealed, []byte("ep-1"))
	errs = append(errs, err)
	_, _, err = mustParse(t, other).Rewrap(sealed, []byte("ep-1"))
	errs = append(errs, err)
	_, err = keyring.Parse(a + "," + a[:40])
	errs = append(errs, err)
	for _, err := range errs {
		if err == nil {
			t.Fatal("no error")
		}
		msg := err.Error()
		assertNotQuoted(t, msg, a)
		assertNotQuoted(t, msg, other)
		assertNotQuoted(t, msg, plaintext)
		if strings.Contains(msg, hex.EncodeToString(rawA)[:16]) || strings.Contains(msg, string(rawA[:8])) {
			t.Fatalf("error %q holds the key", msg)
		}
	}
}
