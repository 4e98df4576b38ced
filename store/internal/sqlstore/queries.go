package sqlstore

import "strings"

// Queries are a store's named statements, placeholders filled.
type Queries struct {
	// store names the store in panics ("postgres").
	store  string
	byName map[string]string
}

// ParseQueries reads the named statements of files. Each file is a series
// of blocks starting at a line "-- name: x"; a file's text before its first
// block is a comment. expand fills a statement's placeholders (a schema, a
// table prefix). A name given twice, in one file or across them, panics:
// the files are embedded, so that is a programming error.
func ParseQueries(storeName string, expand func(string) string, files ...string) Queries {
	q := Queries{store: storeName, byName: map[string]string{}}
	for _, file := range files {
		for _, block := range strings.Split(file, "-- name: ")[1:] {
			name, body, _ := strings.Cut(block, "\n")
			name = strings.TrimSpace(name)
			if _, dup := q.byName[name]; dup {
				panic(storeName + ": two queries named " + name)
			}
			q.byName[name] = expand(strings.TrimSpace(body))
		}
	}
	return q
}

// Get returns the statement called name; a name that is not there panics.
func (q Queries) Get(name string) string {
	sql, ok := q.byName[name]
	if !ok {
		panic(q.store + ": no query named " + name)
	}
	return sql
}
