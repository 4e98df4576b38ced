package relay

import (
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"
)

// logTextMax bounds the bytes a logged text keeps, before its "… (N bytes)"
// marker: an aggregate id of 100,000 characters made 200 KB log lines.
const logTextMax = 200

// logText is text that producers or receivers wrote (an event type, an
// aggregate, a sink's or a store's error, a row's defect), as the relay
// logs it: capped at logTextMax bytes, with "… (N bytes)" telling the
// whole length, and with control characters, other unprintable runes and
// invalid UTF-8 escaped (\x1b, \n, \u2028), so that a log line cannot
// clear a terminal, move its cursor or fake another line. It is a
// slog.LogValuer: the work is done only when a record is written.
type logText string

// logError is err as logText.
func logError(err error) logText { return logText(err.Error()) }

// LogValue returns the capped and escaped text.
func (t logText) LogValue() slog.Value { return slog.StringValue(t.String()) }

// String returns the capped and escaped text.
func (t logText) String() string {
	s := string(t)
	if len(s) <= logTextMax && plainASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), logTextMax) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && size == 1:
			piece = `\x` + strconv.FormatUint(uint64(s[i]), 16)
			if s[i] < 0x10 {
				piece = `\x0` + piece[2:]
			}
		case strconv.IsPrint(r):
			piece = s[i : i+size]
		default:
			q := strconv.QuoteRune(r) // '\x1b', '\n', '\u2028'
			piece = q[1 : len(q)-1]
		}
		if b.Len()+len(piece) > logTextMax {
			b.WriteString("… (" + strconv.Itoa(len(s)) + " bytes)")
			return b.String()
		}
		b.WriteString(piece)
		i += size
	}
	return b.String()
}

// plainASCII reports whether s holds printable ASCII only.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
