package jsondepth

import (
	"strings"
	"testing"
)

func TestExceedsCountsBracketsOutsideStringsOnly(t *testing.T) {
	for _, tc := range []struct {
		json  string
		limit int
		at    int
		deep  bool
	}{
		{`{}`, 1, 0, false},
		{`{}`, 0, 0, true},
		{`[[1],[2]]`, 2, 0, false},
		{`[[[1]]]`, 2, 2, true},
		{`{"a": "[[[[[[", "b": [1]}`, 2, 0, false},
		{`["\"[[[["]`, 1, 0, false},
		{`["\\", [[1]]]`, 2, 8, true},
		{strings.Repeat("[", 10000), 64, 64, true},
		{`not json at all`, 0, 0, false},
	} {
		at, deep := Exceeds([]byte(tc.json), tc.limit)
		if deep != tc.deep || at != tc.at {
			t.Errorf("Exceeds(%.20q, %d) = %d, %v; want %d, %v", tc.json, tc.limit, at, deep, tc.at, tc.deep)
		}
	}
}
