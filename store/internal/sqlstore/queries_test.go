package sqlstore

import (
	"strings"
	"testing"
)

func TestParseQueries(t *testing.T) {
	header := "-- a comment before the first block\n\n"
	q := ParseQueries("test", strings.ToUpper,
		header+"-- name: one\nselect 1;\n\n-- name: two\n-- a comment\nselect {x};\n",
		"-- name: three\nselect 3;")
	for name, want := range map[string]string{
		"one":   "SELECT 1;",
		"two":   "-- A COMMENT\nSELECT {X};",
		"three": "SELECT 3;",
	} {
		if got := q.Get(name); got != want {
			t.Errorf("query %s: %q, want %q", name, got, want)
		}
	}
}

func TestParseQueriesPanics(t *testing.T) {
	for name, files := range map[string][]string{
		"in one file":  {"-- name: a\nselect 1;\n-- name: a\nselect 2;"},
		"across files": {"-- name: a\nselect 1;", "-- name: a\nselect 2;"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "two queries named a") {
					t.Fatalf("recovered %v, want a panic naming the duplicate", r)
				}
			}()
			ParseQueries("test", func(s string) string { return s }, files...)
		})
	}
}

func TestGetMissingPanics(t *testing.T) {
	q := ParseQueries("test", func(s string) string { return s })
	defer func() {
		if r := recover(); r != "test: no query named nope" {
			t.Fatalf("recovered %v", r)
		}
	}()
	q.Get("nope")
}
