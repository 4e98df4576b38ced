package mysql

import (
	"database/sql"
	"reflect"
	"testing"
)

// Parameters become "?" in order; quoted text, comments inside the
// statement and the comment lines before it are not parameters, and the
// latter go.
func TestCompile(t *testing.T) {
	st := compile("-- a comment :no\n-- another ?9\nselect :a, ?2, ':b', `:c`, \"?3\" -- :d\nfrom t where x = ?1 and y = :a")
	want := "select ?, ?, ':b', `:c`, \"?3\" -- :d\nfrom t where x = ? and y = ?"
	if st.text != want {
		t.Fatalf("text %q, want %q", st.text, want)
	}
	if names := []string{"a", "?2", "?1", "a"}; !reflect.DeepEqual(st.names, names) {
		t.Fatalf("names %v, want %v", st.names, names)
	}
	args := st.args([]any{"one", sql.Named("a", "A"), "two"})
	if want := []any{"A", "two", "one", "A"}; !reflect.DeepEqual(args, want) {
		t.Fatalf("args %v, want %v", args, want)
	}
}

// A parameter without its argument is a programming error: it panics.
func TestArgsMissingPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	compile("select :a").args(nil)
}
