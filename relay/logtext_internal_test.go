package relay

import (
	"strings"
	"testing"
)

func TestLogTextCapsAndEscapes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"order.created", "order.created"},
		{"", ""},
		{"é café", "é café"},
		{"a\x1b[2Jb\r\n\t", `a\x1b[2Jb\r\n\t`},
		{"bad \xff\x01 utf8", `bad \xff\x01 utf8`},
		{"line\u2028sep\u0085", `line\u2028sep\u0085`},
		{strings.Repeat("x", logTextMax), strings.Repeat("x", logTextMax)},
		{strings.Repeat("x", logTextMax+1), strings.Repeat("x", logTextMax) + "… (201 bytes)"},
		{strings.Repeat("\x00", 100), strings.Repeat(`\x00`, logTextMax/4) + "… (100 bytes)"},
	} {
		if got := logText(c.in).String(); got != c.want {
			t.Errorf("logText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
