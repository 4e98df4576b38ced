// Package jsondepth measures how deeply a JSON text nests arrays and
// objects without decoding it: what a reader checks before handing a
// hostile payload to a recursive decoder or printer.
package jsondepth

// Exceeds reports whether b nests arrays and objects deeper than limit,
// and if so the offset of the bracket that went past it. Brackets inside
// strings do not count; b need not be valid JSON (the decoder that follows
// says whether it is).
func Exceeds(b []byte, limit int) (at int, exceeds bool) {
	depth := 0
	inString, escaped := false, false
	for i, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > limit {
				return i, true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return 0, false
}
