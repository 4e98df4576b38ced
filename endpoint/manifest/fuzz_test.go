package manifest_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/endpoint/manifest"
)

// resolvedMark starts every value the fuzzed files' references resolve
// to: no error may hold it.
const resolvedMark = "RESOLVED-SECRET-VALUE"

// aliasBomb is a billion laughs through merge keys: each level merges the
// one below nine times.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("version: 1\nx-l0: &l0 {types: [a, b, c, d, e, f, g, h, i]}\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "x-l%d: &l%d {<<: [", i, i)
		for j := range 9 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]}\n")
	}
	fmt.Fprintf(&b, "endpoints:\n  - <<: *l%d\n    name: bomb\n    url: https://a.example/\n", levels)
	return b.String()
}

// sequenceBomb is a billion laughs through sequences (which yaml expands
// when decoding into values; the walk reads none of them).
func sequenceBomb() string {
	var b strings.Builder
	b.WriteString("version: 1\nx-a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		fmt.Fprintf(&b, "x-%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", n, n, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = n
	}
	b.WriteString("endpoints:\n  - name: a\n    url: https://a.example/\n    types: *i\n")
	return b.String()
}

// hostileSeeds are the files FuzzParse starts from.
var hostileSeeds = []string{
	"version: 1\nendpoints:\n  - name: a\n    url: https://a.example/\n    secret: env:S\n    headers: {X-K: env:K}\n    auth: {bearer: env:T}\n",
	"version: 1\nendpoints:\n  - name: a\n    url: https://a.example/\n    auth: {oauth2: {token_url: https://t/, client_id: c, client_secret: env:O, params: {a: [b]}}}\n",
	aliasBomb(9),
	sequenceBomb(),
	"version: 1\nendpoints: " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n",
	"version: 1\nendpoints:\n" + strings.Repeat("  - name: n\n", 3),
	"version: 1\nendpoints:\n  - name: '" + strings.Repeat("\u202e\x00\xff", 1000) + "'\n",
	"version: 1\nendpoints:\n  - name: \"\\u202e\\x1b[2J\"\n    url: \"\\U0001F600\"\n",
	"\ufeffversion: 1\nendpoints: []\n",
	"version: 1\nendpoints:\n  - &e {name: a, url: 'https://a/'}\n  - *e\n",
	"version: 1\nendpoints:\n  - name: a\n    <<: *missing\n",
	"version: 1\nendpoints: &x [*x]\n",
	"version: 1\nendpoints:\n  - !!binary name: aGVsbG8=\n",
	"version: 1\nendpoints:\n  - name: !custom a\n    secret: !!str env:S\n",
	"version: 1\nendpoints:\n  - {? [a] : b}\n",
	"version: 1\nendpoints:\n  - name: a\n    url: https://a/\n    rate_per_second: 1e400\n    concurrency: 99999999999999999999\n",
	"%YAML 1.1\n---\nversion: 1\nendpoints: []\n",
	"version: 1\nendpoints:\n  - name: a\n    headers: {'': env:A, \"X\\nY\": env:B}\n",
	"version: 1\nendpoints:\n  - name: " + strings.Repeat("x", 1<<16) + "\n",
}

// FuzzParse: Parse never panics, on any input; when a file parses, its
// references resolve, and no error of Parse or Resolve holds a value a
// reference resolved to.
func FuzzParse(f *testing.F) {
	for _, s := range hostileSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := manifest.Parse(data)
		if err != nil {
			if m != nil {
				t.Fatalf("Parse returned a manifest with its error %v", err)
			}
			return
		}
		if bytes.Contains(data, []byte(resolvedMark)) {
			return
		}
		m.Dir = t.TempDir()
		err = m.Resolve(func(name string) (string, bool) { return resolvedMark + name, true })
		if err != nil && strings.Contains(err.Error(), resolvedMark) {
			t.Fatalf("Resolve's error holds a resolved value: %v", err)
		}
	})
}

// The bombs are refused, not expanded: the walk counts what it visits.
func TestParseRefusesAliasBombs(t *testing.T) {
	_, err := manifest.Parse([]byte(aliasBomb(9)))
	if err == nil || !strings.Contains(err.Error(), "aliases") {
		t.Fatalf("merge-key bomb: %v, want a refusal naming the aliases", err)
	}
	// The sequence bomb stands in a list of types: each alias is one
	// entry that must be a text.
	if _, err := manifest.Parse([]byte(sequenceBomb())); err == nil || !strings.Contains(err.Error(), "endpoints[0].types[0]") {
		t.Fatalf("sequence bomb: %v, want types[0] refused", err)
	}
	// A few levels of merges are fine.
	m, err := manifest.Parse([]byte(aliasBomb(2)))
	if err != nil || len(m.Endpoints) != 1 || len(m.Endpoints[0].Types) != 9 {
		t.Fatalf("two levels of merges: %v, %+v", err, m)
	}
}
