package relay_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The file index of doc.go names every file of the package, and only
// those: a file added, renamed or removed fails this test until the index
// says so.
func TestDocIndexesEveryFile(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, index, ok := strings.Cut(string(doc), "// # Files\n")
	if !ok {
		t.Fatal(`doc.go has no "# Files" section`)
	}
	var indexed []string
	for _, m := range regexp.MustCompile(`(?m)^//\t([a-z_]+\.go)\s`).FindAllStringSubmatch(index, -1) {
		indexed = append(indexed, m[1])
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if name := e.Name(); !e.IsDir() && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			files = append(files, name)
		}
	}
	for _, f := range files {
		if !slices.Contains(indexed, f) {
			t.Errorf("doc.go's file index does not name %s", f)
		}
	}
	for _, f := range indexed {
		if !slices.Contains(files, f) {
			t.Errorf("doc.go's file index names %s, which does not exist", f)
		}
	}
}
