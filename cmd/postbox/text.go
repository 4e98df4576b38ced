package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/postbox-go/postbox/internal/printable"
)

// printableLines is printable for a text of several lines (an indented
// payload): each line is escaped, the new lines between them kept.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = printable.String(l)
	}
	return strings.Join(lines, "\n")
}

// writeJSON writes v as one line of JSON. encoding/json escapes the C0
// controls and replaces invalid UTF-8; writeJSON escapes as well the C1
// controls and the bidirectional controls that it leaves raw (\u009b is a
// terminal's CSI), which can only stand inside JSON strings.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return err
	}
	b := buf.Bytes()
	if printable.Is(strings.TrimSuffix(string(b), "\n")) {
		_, err := w.Write(b)
		return err
	}
	var out bytes.Buffer
	for _, r := range strings.TrimSuffix(string(b), "\n") {
		if printable.Unsafe(r) {
			fmt.Fprintf(&out, `\u%04x`, r)
			continue
		}
		out.WriteRune(r)
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}
