package console

import (
	"strings"
	"testing"
)

func TestShowCapsAndEscapes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"order.paid", 120, "order.paid"},
		{"abcdef", 3, "abc…"},
		{"abc", 3, "abc"},
		{"a\x1b[2J\x07b\r\n\tc", 120, `a\x1b[2J\x07b\r\n\tc`},
		{"\u202eevil\u202c", 120, `\u202eevil\u202c`},
		{"bad \xff utf-8", 120, "bad \uFFFD utf-8"},
		{"ééé", 2, "éé…"},
		{"nul\x00", 120, `nul\x00`},
	} {
		if got := show(tc.in, tc.max); got != tc.want {
			t.Errorf("show(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
	if got := showAll("line 1\n\tline 2\x1b"); got != "line 1\n\tline 2\\x1b" {
		t.Errorf("showAll keeps line breaks and tabs, escapes the rest: %q", got)
	}
}

func TestPrettyJSONBoundsIndentation(t *testing.T) {
	if got := prettyJSON([]byte(`{"a":[1,2]}`)); got != "{\n  \"a\": [\n    1,\n    2\n  ]\n}" {
		t.Errorf("prettyJSON indents: %q", got)
	}
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	if got := prettyJSON([]byte(deep)); got != deep {
		t.Error("a payload nested 5,000 deep is not shown as stored")
	}
	if got := prettyJSON([]byte(`{"s": "[[[[", "x": 1}`)); !strings.Contains(got, "\n") {
		t.Error("brackets inside strings counted as nesting")
	}
	if got := prettyJSON([]byte("not json \x1b")); got != `not json \x1b` {
		t.Errorf("a payload that is not JSON: %q", got)
	}
}

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n    any
		what string
		want string
	}{
		{1, "failed event", "1 failed event"},
		{2, "failed event", "2 failed events"},
		{0, "failed delivery", "0 failed deliveries"},
		{1, "failed delivery", "1 failed delivery"},
		{"?", "delivery", "? deliveries"},
	} {
		if got := plural(tc.n, tc.what); got != tc.want {
			t.Errorf("plural(%v, %q) = %q, want %q", tc.n, tc.what, got, tc.want)
		}
	}
}
