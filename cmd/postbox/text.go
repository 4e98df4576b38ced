package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// printable returns s fit to print on a terminal: every control character
// (C0, DEL and C1: ESC, BEL, CR, tabs and new lines too), every bidirectional
// control and line or paragraph separator is written as a Go escape (\x1b,
// \r, \u202e) and every byte of invalid UTF-8 as \xNN; the rest is kept as
// it is. Every text a producer, a receiver or a relay wrote (event types,
// aggregate ids, errors, headers, payloads, endpoint names and URLs, relay
// rows) goes through it before the commands print it, so that it can
// neither drive the terminal (clear the screen, set its title) nor fake
// lines or columns of the output.
func printable(s string) string {
	if isPrintable(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			b.WriteString(escapeRune(r))
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isPrintable reports whether printable would return s as it is.
func isPrintable(s string) bool {
	for _, r := range s {
		if unsafeRune(r) {
			return false
		}
	}
	return utf8.ValidString(s)
}

// unsafeRune reports whether r must not reach a terminal as it is.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// escapeRune writes r as Go writes it in a string literal.
func escapeRune(r rune) string {
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

// printableLines is printable for a text of several lines (an indented
// payload): each line is escaped, the new lines between them kept.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n")
}

// writeJSON writes v as one line of JSON. encoding/json escapes the C0
// controls and replaces invalid UTF-8; writeJSON escapes as well the C1
// controls and the bidirectional controls that it leaves raw (\u009b is a
// terminal's CSI), which can only stand inside JSON strings.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return err
	}
	b := buf.Bytes()
	if isPrintable(strings.TrimSuffix(string(b), "\n")) {
		_, err := w.Write(b)
		return err
	}
	var out bytes.Buffer
	for _, r := range strings.TrimSuffix(string(b), "\n") {
		if unsafeRune(r) {
			fmt.Fprintf(&out, `\u%04x`, r)
			continue
		}
		out.WriteRune(r)
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}
