package sqlstore_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// Headers a plain-SQL producer wrote are taken as well as they can be:
// values that are not strings are sent as their JSON text; headers that
// are not an object are the row's problem, which names what they are.
func TestDecodeHeaders(t *testing.T) {
	for raw, want := range map[string]map[string]string{
		`{}`:                                     nil,
		`null`:                                   nil,
		`{"traceparent": "00-1-2-01"}`:           {"traceparent": "00-1-2-01"},
		`{"retries": 1, "flag": true, "s": "x"}`: {"retries": "1", "flag": "true", "s": "x"},
		`{"nested": {"a": [1, 2]}}`:              {"nested": `{"a": [1, 2]}`},
	} {
		got, problem := sqlstore.DecodeHeaders([]byte(raw))
		if problem != "" || !maps.Equal(got, want) {
			t.Errorf("DecodeHeaders(%s) = %v, %q, want %v", raw, got, problem, want)
		}
	}
	for raw, want := range map[string]string{
		`["not", "an", "object"]`:  "a JSON array is not an object",
		`"text"`:                   "a JSON string is not an object",
		`42`:                       "a JSON number is not an object",
		`not json`:                 "not valid JSON",
		``:                         "not valid JSON",
		strings.Repeat(`[`, 20000): "not valid JSON",
		`{"a": ` + strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000) + `}`: "not valid JSON",
	} {
		got, problem := sqlstore.DecodeHeaders([]byte(raw))
		if problem != want || got != nil {
			t.Errorf("DecodeHeaders(%.40s) = %v, %q, want the problem %q", raw, got, problem, want)
		}
	}
}
