package envelope

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// invalidUTF8 returns the byte offset in s of its first byte that is not
// valid UTF-8, and what it is; -1 when s is valid UTF-8.
func invalidUTF8(s string) (int, string) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return i, fmt.Sprintf("invalid UTF-8 (byte 0x%02X)", s[i])
		}
		i += n
	}
	return -1, ""
}

// invalidString returns the byte offset in s of its first character that
// a CloudEvents String may not hold, and what it is; -1 when s is a valid
// String. A String (CloudEvents 1.0.2, "Type System") is Unicode without
// the control characters U+0000-U+001F and U+007F-U+009F, the
// noncharacters and unpaired surrogates (which valid UTF-8 cannot hold).
func invalidString(s string) (int, string) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i, fmt.Sprintf("invalid UTF-8 (byte 0x%02X)", s[i])
			}
		case r <= 0x1F || r >= 0x7F && r <= 0x9F:
			return i, fmt.Sprintf("the control character %U", r)
		case r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE:
			return i, fmt.Sprintf("the noncharacter %U", r)
		}
	}
	return -1, ""
}

// isJSONMediaType reports whether the media type ct declares JSON: its
// subtype, without parameters, is "json" or ends in "+json" (CloudEvents
// JSON event format, 3.1.1; RFC 6839), in any case.
func isJSONMediaType(ct string) bool {
	mediaType, _, _ := strings.Cut(ct, ";")
	_, subtype, ok := strings.Cut(strings.TrimSpace(mediaType), "/")
	const suffix = "+json"
	return ok && (strings.EqualFold(subtype, "json") ||
		len(subtype) > len(suffix) && strings.EqualFold(subtype[len(subtype)-len(suffix):], suffix))
}

const hexDigits = "0123456789ABCDEF"

// appendJSONString appends s, valid UTF-8, as a JSON string: quotation
// mark, reverse solidus and the control characters U+0000-U+001F
// escaped, every other character as it is (RFC 8259, 7).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// mustPercentEncode reports whether byte c of a header value's UTF-8 is
// percent-encoded: space, double quote, percent, and every byte outside
// the printable ASCII U+0021-U+007E (the CloudEvents HTTP binding,
// 3.1.3.2, a character at a time: each byte of a non-ASCII character's
// UTF-8 is outside).
func mustPercentEncode(c byte) bool {
	return c <= ' ' || c >= 0x7F || c == '"' || c == '%'
}

// percentEncode returns s with the bytes mustPercentEncode names written
// "%XY", in upper case; s itself when it has none.
func percentEncode(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if mustPercentEncode(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		if c := s[i]; mustPercentEncode(c) {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&0xF])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

// checkURIReference returns why s is not a non-empty URI-reference (RFC
// 3986, 4.1), or nil: only the characters RFC 3986 allows, each "%"
// beginning a percent-encoded octet, "[" and "]" only around an IP literal
// host, at most one "#", and what net/url parses.
func checkURIReference(s string) error {
	if s == "" {
		return errors.New("it is empty")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return fmt.Errorf("the %% at byte %d begins no percent-encoded octet", i)
			}
			i += 2
		case !isURIChar(c):
			return fmt.Errorf("byte %d, 0x%02X, is not allowed in a URI-reference (RFC 3986)", i, c)
		}
	}
	if strings.Count(s, "#") > 1 {
		return errors.New(`it has more than one "#"`)
	}
	u, err := url.Parse(s)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return err
	}
	if strings.ContainsAny(s, "[]") && !strings.HasPrefix(u.Host, "[") {
		return errors.New(`"[" and "]" are allowed only around an IP literal host`)
	}
	return nil
}

// isURIChar reports whether c is an unreserved or reserved character of
// RFC 3986 (2.2, 2.3).
func isURIChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
