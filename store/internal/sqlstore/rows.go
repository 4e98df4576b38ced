package sqlstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// RetriesMax is the largest retries (failed attempts) a row may hold, the
// bound of migration 0008's checks: counting an attempt saturates there, so
// that no row can make an update overflow.
const RetriesMax = 1_000_000_000

// The times a row may hold, by migration 0008's checks: from year 1 to
// 9999, what every client and JSON can read.
var (
	timeMin = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	timeEnd = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Problems collects what is wrong with one row, column by column: the text
// of store.ClaimedEvent.Invalid. Its zero value is a row without a problem; it
// allocates only for a row that has one.
type Problems []string

// Add records problem (when not empty) of column.
func (p *Problems) Add(column, problem string) {
	if problem != "" {
		*p = append(*p, column+": "+problem)
	}
}

// String is the problems, "; " between them: "" when there is none.
func (p Problems) String() string { return strings.Join(p, "; ") }

// TimeProblem says what is wrong with t as a row's time: "" when it is from
// year 1 to 9999.
func TimeProblem(t time.Time) string {
	if t.Before(timeMin) || !t.Before(timeEnd) {
		return fmt.Sprintf("year %d is out of range (1 to 9999)", t.Year())
	}
	return ""
}

// Attempt is the number of the attempt a claim makes of a row whose
// retries column holds retries (the failed attempts before it), and what
// is wrong with retries ("" when nothing is, and 0 with the problem).
func Attempt(retries int64) (int, string) {
	switch {
	case retries < 0:
		return 0, fmt.Sprintf("%d is negative", retries)
	case retries > RetriesMax:
		return 0, fmt.Sprintf("%d is out of range (0 to %d)", retries, RetriesMax)
	}
	return int(retries) + 1, ""
}

// TextProblem says what is wrong with s as a text column: "" unless it is
// not valid UTF-8 or holds a NUL byte, which PostgreSQL's text refuses and
// no sink carries as text (SQLite takes anything).
func TextProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "holds a NUL byte"
	}
	return ""
}

// EventTypeProblem says what is wrong with an event type: TextProblem's,
// or that it is empty (postbox.Event.Validate refuses it).
func EventTypeProblem(s string) string {
	if s == "" {
		return "empty"
	}
	return TextProblem(s)
}

// DecodeHeaders decodes the headers column of an event, and says what is
// wrong with it: "" when nothing is. Most events have none ("{}"): they
// cost no decoding, which took a tenth of the relay's CPU in a drain when
// every row went through json.Unmarshal. A plain-SQL producer may write
// values that are not strings ({"retries": 1}): they are sent as their
// JSON text. Headers that are not a JSON object (an array, a number, text
// that is not JSON, an object nested past what Go decodes) are a problem:
// the event fails alone, with it, rather than being sent without them.
func DecodeHeaders(raw []byte) (map[string]string, string) {
	switch string(raw) {
	case "{}", "null":
		return nil, ""
	}
	var h map[string]string
	if json.Unmarshal(raw, &h) == nil {
		return h, ""
	}
	var loose map[string]json.RawMessage
	if err := json.Unmarshal(raw, &loose); err != nil {
		return nil, headersProblem(raw, err)
	}
	h = make(map[string]string, len(loose))
	for name, value := range loose {
		var text string
		if json.Unmarshal(value, &text) != nil {
			text = string(value)
		}
		h[name] = text
	}
	return h, ""
}

// headersProblem says why raw is not an object of headers.
func headersProblem(raw []byte, err error) string {
	if !json.Valid(raw) {
		return "not valid JSON"
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return fmt.Sprintf("cannot be decoded (%v)", err)
	}
	return fmt.Sprintf("a JSON %s is not an object", jsonKind(v))
}

// jsonKind names the kind of a decoded JSON value.
func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	}
	return "value"
}
