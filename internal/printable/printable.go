// Package printable makes text that producers, receivers or relays wrote
// (event types, aggregate ids, errors, headers) safe to show on a terminal
// or a page: every control character (C0, DEL and C1: ESC, BEL, CR, tabs
// and new lines too), every bidirectional control and every line or
// paragraph separator written as a Go escape (\x1b, \r, \u202e), so that
// the text can neither drive a terminal (clear the screen, set its title)
// nor fake lines, columns or the order of what is around it.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every unsafe rune (see Unsafe) escaped and every
// byte of invalid UTF-8 written as \xNN; the rest is kept as it is.
func String(s string) string {
	if Is(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case Unsafe(r):
			b.WriteString(EscapeRune(r))
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Is reports whether String would return s as it is: valid UTF-8 without
// an unsafe rune.
func Is(s string) bool {
	for _, r := range s {
		if Unsafe(r) {
			return false
		}
	}
	return utf8.ValidString(s)
}

// Unsafe reports whether r must not reach a terminal or a page as it is: a
// control character, a bidirectional control, or a line or paragraph
// separator.
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// EscapeRune writes r as Go writes it in a string literal: \t, \n, \r,
// \x1b below U+0080, \u009b and \u202e above.
func EscapeRune(r rune) string {
	switch r {
	case '\t':
		return `\t`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	}
	if r < utf8.RuneSelf {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}
