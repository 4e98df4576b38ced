package store_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/postbox-go/postbox/store"
)

// An error text from anywhere (a receiver's body) fits a text column: valid
// UTF-8, no NUL byte, at most the bound, cut between characters.
func TestErrorText(t *testing.T) {
	for _, in := range []string{
		"",
		"plain",
		"nul\x00in the middle",
		"invalid \xff\xfe bytes",
		strings.Repeat("é", 600),
		strings.Repeat("\x00", 600),
		strings.Repeat("a", 1023) + "€uro",
	} {
		got := store.ErrorText(in, 1024)
		if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 || len(got) > 1024 {
			t.Errorf("ErrorText(%q) = %q: want valid UTF-8, no NUL, at most 1024 bytes", in, got)
		}
		if len(in) <= 300 && utf8.ValidString(in) && !strings.Contains(in, "\x00") && got != in {
			t.Errorf("ErrorText(%q) = %q: a short, clean text must stay as it is", in, got)
		}
	}
}
