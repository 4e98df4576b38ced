package sqlstore_test

import (
	"maps"
	"testing"

	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// Headers a plain-SQL producer wrote are taken as well as they can be:
// decoding never fails, since the event must still be delivered.
func TestDecodeHeaders(t *testing.T) {
	for raw, want := range map[string]map[string]string{
		``:                                       nil,
		`{}`:                                     nil,
		`null`:                                   nil,
		`{"traceparent": "00-1-2-01"}`:           {"traceparent": "00-1-2-01"},
		`{"retries": 1, "flag": true, "s": "x"}`: {"retries": "1", "flag": "true", "s": "x"},
		`{"nested": {"a": [1, 2]}}`:              {"nested": `{"a": [1, 2]}`},
		`["not", "an", "object"]`:                nil,
		`not json`:                               nil,
	} {
		if got := sqlstore.DecodeHeaders([]byte(raw)); !maps.Equal(got, want) {
			t.Errorf("DecodeHeaders(%s) = %v, want %v", raw, got, want)
		}
	}
}
