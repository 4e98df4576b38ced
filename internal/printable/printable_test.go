package printable_test

import (
	"testing"

	"github.com/postbox-go/postbox/internal/printable"
)

func TestStringEscapesWhatCanDriveATerminal(t *testing.T) {
	for in, want := range map[string]string{
		"order.created":       "order.created",
		"é ü 日本":              "é ü 日本",
		"\x1b[2J\x07\rfake":   `\x1b[2J\x07\rfake`,
		"tab\tnew\nline":      `tab\tnew\nline`,
		"c1\u009b31m":         `c1\u009b31m`,
		"rtl\u202eevil\u2066": `rtl\u202eevil\u2066`,
		"sep\u2028\u2029":     `sep\u2028\u2029`,
		"bad\xffutf8\xc3":     `bad\xffutf8\xc3`,
		"del\x7f":             `del\x7f`,
	} {
		if got := printable.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
		if printable.Is(in) != (in == want) {
			t.Errorf("Is(%q) = %v", in, printable.Is(in))
		}
	}
}
