// Package redact hides the passwords of a connection string (a URL, or a
// keyword/value DSN) in what is printed: logs, errors, pages. It imports
// nothing of the module, so that the database URLs (cmd/postbox/internal/dburl) and the
// sinks' URLs (package sink) share it.
package redact

import (
	"net/url"
	"slices"
	"strings"
)

// Mask stands for a hidden password.
const Mask = "xxxxx"

// DSN returns a URL or keyword/value DSN fit to print in a log, an error
// or a page: the password of its user information and the values of its
// password parameters (password, sslpassword: any key that holds
// "password") read xxxxx. A URL that does not parse is replaced by its
// scheme alone.
func DSN(dsn string) string {
	if !IsURL(dsn) {
		return redactKeyValue(dsn)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		scheme, _, _ := strings.Cut(dsn, ":")
		return scheme + ":(unparsable URL)"
	}
	// hidden are the passwords the URL's structure masks: those need no
	// search through the text, where a short one ("p") would mask the
	// same letters elsewhere ("htt"+"p").
	var hidden []string
	if pw, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), Mask)
		hidden = append(hidden, pw)
	}
	q := u.Query()
	masked := false
	for key, values := range q {
		if isPasswordKey(key) {
			hidden = append(hidden, values...)
			q[key] = []string{Mask}
			masked = true
		}
	}
	if masked {
		u.RawQuery = q.Encode()
	}
	// A password holding an unescaped '/', '?' or '#' still parses, as a
	// host and a path: what its shape says is a password, and the URL's
	// structure did not mask, goes too.
	out := u.String()
	for _, p := range passwords(dsn) {
		if !isHidden(p, hidden) {
			out = strings.ReplaceAll(out, p, Mask)
		}
	}
	return out
}

// isHidden reports whether p, as written or percent-decoded, is one of
// hidden.
func isHidden(p string, hidden []string) bool {
	for _, h := range hidden {
		if p == h || unescape(p) == h {
			return true
		}
		if d, err := url.PathUnescape(p); err == nil && d == h {
			return true
		}
	}
	return false
}

// Scrub returns err with every password that dsn holds replaced by xxxxx
// in its text, for errors of drivers and servers that may quote a
// connection string or part of it; errors.Is and errors.As see err's chain
// as before. A nil err stays nil.
func Scrub(err error, dsn string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	scrubbed := msg
	for _, p := range passwords(dsn) {
		scrubbed = strings.ReplaceAll(scrubbed, p, Mask)
	}
	if scrubbed == msg {
		return err
	}
	return &scrubbedError{msg: scrubbed, err: err}
}

// scrubbedError is an error whose text had a password removed.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// IsURL reports whether dsn is written as a URL (scheme://...).
func IsURL(dsn string) bool {
	scheme, _, ok := strings.Cut(dsn, "://")
	return ok && scheme != "" && !strings.ContainsAny(scheme, " ='")
}

// isPasswordKey reports whether a URL or DSN parameter holds a password.
func isPasswordKey(key string) bool {
	return strings.Contains(strings.ToLower(key), "password")
}

// passwords are the texts of dsn that must not be printed, as written and
// percent-decoded, the longest first (so that a password holding another
// is replaced whole). It reads a URL that does not parse as well, by its
// shape.
func passwords(dsn string) []string {
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		out = append(out, p)
		if d, err := url.QueryUnescape(p); err == nil && d != p && d != "" {
			out = append(out, d)
		}
		if d, err := url.PathUnescape(p); err == nil && d != p && d != "" {
			out = append(out, d)
		}
	}
	if IsURL(dsn) {
		_, rest, _ := strings.Cut(dsn, "://")
		head, query, _ := strings.Cut(rest, "?")
		// The user information ends at the last '@' before the query, or,
		// for a password holding an unescaped '?', at the last '@' of all.
		for _, s := range []string{head, rest} {
			if at := strings.LastIndexByte(s, '@'); at >= 0 {
				if _, p, ok := strings.Cut(s[:at], ":"); ok {
					add(p)
				}
			}
		}
		for _, kv := range strings.Split(query, "&") {
			if k, v, ok := strings.Cut(kv, "="); ok && isPasswordKey(unescape(k)) {
				add(v)
			}
		}
	} else {
		for _, kv := range keyValues(dsn) {
			if isPasswordKey(kv.key) {
				add(kv.value)
			}
		}
	}
	// The longest first: "pw" must not break "pw2" into "xxxxx2".
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && len(out[j]) > len(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func unescape(s string) string {
	if d, err := url.QueryUnescape(s); err == nil {
		return d
	}
	return s
}

// keyValue is one setting of a keyword/value DSN, with where its value
// is written (quotes included).
type keyValue struct {
	key, value string
	start, end int
}

// keyValues reads a keyword/value DSN (host=h password='a b'), as
// libpq writes it: a value is quoted with ' (\' and \\ escaped) or runs
// to the next white space. It reads what it can of a malformed one.
func keyValues(dsn string) []keyValue {
	var out []keyValue
	i := 0
	for i < len(dsn) {
		for i < len(dsn) && isSpace(dsn[i]) {
			i++
		}
		eq := strings.IndexByte(dsn[i:], '=')
		if eq < 0 {
			break
		}
		key := strings.TrimSpace(dsn[i : i+eq])
		i += eq + 1
		for i < len(dsn) && isSpace(dsn[i]) {
			i++
		}
		kv := keyValue{key: key, start: i}
		var value strings.Builder
		if i < len(dsn) && dsn[i] == '\'' {
			i++
			for i < len(dsn) && dsn[i] != '\'' {
				if dsn[i] == '\\' && i+1 < len(dsn) {
					i++
				}
				value.WriteByte(dsn[i])
				i++
			}
			i++ // the closing quote
		} else {
			for i < len(dsn) && !isSpace(dsn[i]) {
				value.WriteByte(dsn[i])
				i++
			}
		}
		kv.end = min(i, len(dsn))
		kv.value = value.String()
		out = append(out, kv)
	}
	return out
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' || b == '\v'
}

// redactKeyValue masks the password values of a keyword/value DSN.
func redactKeyValue(dsn string) string {
	var b strings.Builder
	last := 0
	for _, kv := range keyValues(dsn) {
		if !isPasswordKey(kv.key) {
			continue
		}
		b.WriteString(dsn[last:kv.start])
		b.WriteString(Mask)
		last = kv.end
	}
	b.WriteString(dsn[last:])
	out := b.String()
	for _, p := range passwords(dsn) { // what a malformed DSN left
		out = strings.ReplaceAll(out, p, Mask)
	}
	return out
}

// URLAllowing returns u fit to print when only some of its query
// parameters are known to hold no secret (a bucket URL, whose driver
// takes keys and tokens as parameters): it drops the user information
// (its user name may be a key id) and the fragment, and the values of the
// parameters plain does not name read xxxxx. A plain parameter's value
// that is a URL loses its own user information.
func URLAllowing(u *url.URL, plain func(key string) bool) string {
	c := *u
	c.User = nil
	c.Fragment, c.RawFragment = "", ""
	q := c.Query()
	for k, vs := range q {
		for i, v := range vs {
			switch {
			case !plain(k):
				vs[i] = Mask
			case strings.Contains(v, "@"):
				if p, err := url.Parse(v); err == nil && p.User != nil {
					p.User = nil
					vs[i] = p.String()
				} else {
					vs[i] = Mask
				}
			}
		}
	}
	c.RawQuery = q.Encode()
	return c.String()
}

// ScrubURLAllowing returns err with what URLAllowing hides of u (its user
// name and password, the values of the parameters plain does not name,
// as written and percent-decoded) replaced by xxxxx in its text;
// errors.Is and errors.As see err's chain as before. A secret is masked
// only where it stands whole (not inside a longer word: a profile "s3"
// leaves "s3blob" be). A nil err stays nil.
func ScrubURLAllowing(err error, u *url.URL, plain func(key string) bool) error {
	if err == nil {
		return nil
	}
	var secrets []string
	add := func(v string) {
		for _, s := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			if s != "" {
				secrets = append(secrets, s)
			}
		}
	}
	if u.User != nil {
		add(u.User.String())
		add(u.User.Username())
		if p, ok := u.User.Password(); ok {
			add(p)
		}
	}
	for k, vs := range u.Query() {
		if !plain(k) {
			for _, v := range vs {
				add(v)
			}
		}
	}
	// The longest first: "pw" must not break "pw2" into "xxxxx2".
	slices.SortStableFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	msg := err.Error()
	scrubbed := msg
	for _, s := range secrets {
		scrubbed = replaceWords(scrubbed, s)
	}
	if scrubbed == msg {
		return err
	}
	return &scrubbedError{msg: scrubbed, err: err}
}

// replaceWords replaces by xxxxx each occurrence of s in msg that no
// letter or digit adjoins.
func replaceWords(msg, s string) string {
	var b strings.Builder
	for {
		i := strings.Index(msg, s)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		end := i + len(s)
		if (i > 0 && isWordByte(msg[i-1])) || (end < len(msg) && isWordByte(msg[end])) {
			b.WriteString(msg[:i+1])
			msg = msg[i+1:]
			continue
		}
		b.WriteString(msg[:i])
		b.WriteString(Mask)
		msg = msg[end:]
	}
}

func isWordByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
