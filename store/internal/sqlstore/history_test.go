package sqlstore

import (
	"fmt"
	"math/rand"
	"path"
	"strings"
	"testing"
)

// typePrefixes gives each glob's literal beginning, and nil when a glob
// may match any type.
func TestTypePrefixes(t *testing.T) {
	for _, c := range []struct {
		globs []string
		want  []string
	}{
		{nil, nil},
		{[]string{"order.paid"}, []string{"order.paid"}},
		{[]string{"order.*", "pay?ent"}, []string{"order.", "pay"}},
		{[]string{"order.*", "*.paid"}, nil},
		{[]string{`a\*b*`}, []string{"a*b"}},
		{[]string{"[ab]x"}, nil},
		{[]string{`trailing\`}, []string{"trailing"}},
	} {
		if got := typePrefixes(c.globs); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("typePrefixes(%q) = %q, want %q", c.globs, got, c.want)
		}
	}
}

// Every type a glob matches (path.Match) begins with its prefix: the SQL
// filter on prefixes never drops a matching row.
func TestTypePrefixesNeverDropAMatch(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const alphabet = `ab.*?[]\/-`
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[rng.Intn(len(alphabet))])
		}
		return b.String()
	}
	matched := 0
	for range 200_000 {
		glob, typ := word(1+rng.Intn(6)), word(rng.Intn(7))
		ok, err := path.Match(glob, typ)
		if err != nil || !ok {
			continue
		}
		matched++
		prefixes := typePrefixes([]string{glob})
		if prefixes != nil && !strings.HasPrefix(typ, prefixes[0]) {
			t.Fatalf("glob %q matches %q, which does not begin with its prefix %q", glob, typ, prefixes[0])
		}
	}
	if matched < 1000 {
		t.Fatalf("only %d matching pairs tried", matched)
	}
}
