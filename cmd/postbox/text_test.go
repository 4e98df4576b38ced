package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/postbox-go/postbox/internal/printable"
)

func TestPrintableEscapesControlsAndInvalidUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"order.created":            "order.created",
		"café ünïcode 日本":          "café ünïcode 日本",
		"a\x1b[2Jb":                `a\x1b[2Jb`,
		"bell\x07 cr\r lf\n tab\t": `bell\x07 cr\r lf\n tab\t`,
		"del\x7f nul\x00":          `del\x7f nul\x00`,
		"c1\u009b31m":              `c1\u009b31m`,
		"bidi\u202eevil\u2066":     `bidi\u202eevil\u2066`,
		"sep\u2028":                `sep\u2028`,
		"bad\xff\xfeutf8":          `bad\xff\xfeutf8`,
		"cut\xe2\x82":              `cut\xe2\x82`,
		"replacement \uFFFD stays": "replacement \uFFFD stays",
	} {
		if got := printable.String(in); got != want {
			t.Errorf("printable.String(%q) = %q, want %q", in, got, want)
		}
	}
}

// writeJSON escapes what encoding/json leaves raw (C1 and bidirectional
// controls) and stays JSON that reads back to the same values.
func TestWriteJSONEscapesC1(t *testing.T) {
	in := map[string]string{"k\u009b": "v\x1b\u202e\u0085 ok é"}
	var buf bytes.Buffer
	if err := writeJSON(&buf, in); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !printable.Is(out[:len(out)-1]) || out[len(out)-1] != '\n' {
		t.Fatalf("writeJSON wrote %q", out)
	}
	var back map[string]string
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back["k\u009b"] != in["k\u009b"] {
		t.Fatalf("writeJSON wrote %q: reads back as %q, %v", out, back, err)
	}
}
