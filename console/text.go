package console

import (
	"github.com/postbox-go/postbox/internal/jsondepth"

	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/postbox-go/postbox/internal/printable"
)

// Caps of the texts a table cell shows; the row's own page shows them
// whole.
const (
	// cellMax is the most characters of a name (a type, an aggregate) in a
	// table cell.
	cellMax = 120
	// errorCellMax is the most characters of an error text in a table
	// cell.
	errorCellMax = 400
	// prettyDepthMax is the deepest JSON payload shown indented; a deeper
	// one is shown as stored (indenting n levels writes n² spaces).
	prettyDepthMax = 64
)

// show writes s for a table cell: every rune printable.Unsafe names (line
// breaks included) visible as an escape ("\x1b"),
// invalid UTF-8 as U+FFFD, and at most max characters, "…" after.
func show(s string, max int) string {
	return visible(s, max, false)
}

// showAll writes s whole for an event's own page: control characters
// visible as in show, but line breaks and tabs kept.
func showAll(s string) string {
	return visible(s, -1, true)
}

// visible is show and showAll: max < 0 shows every character.
func visible(s string, max int, keepLines bool) string {
	var b strings.Builder
	n := 0
	for i, r := range s {
		if max >= 0 && n == max {
			b.WriteString("…")
			break
		}
		n++
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				b.WriteRune(utf8.RuneError)
				continue
			}
			b.WriteRune(r)
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case printable.Unsafe(r):
			b.WriteString(printable.EscapeRune(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// prettyJSON indents a JSON payload, shown whole; anything else (or JSON
// nested deeper than prettyDepthMax) is shown as stored.
func prettyJSON(b []byte) string {
	if _, deep := jsondepth.Exceeds(b, prettyDepthMax); deep {
		return showAll(string(b))
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return showAll(string(b))
	}
	return showAll(out.String())
}
