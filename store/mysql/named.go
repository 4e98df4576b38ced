package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// The store's SQL names its parameters (:now, :owner, ...) or numbers them
// (?1, ?2, ...), as the SQLite store's does; go-sql-driver/mysql takes
// only "?". A namedQuery is a named query rewritten once, on first use, to
// "?" with the list of its parameters in order; its arguments are given as
// sql.NamedArg, in any order, for the names, and in order for the numbers.

// namedQuery is a query with positional parameters and their names.
type namedQuery struct {
	text  string
	names []string
}

// compile rewrites the :name and ?N parameters of query as "?" (a number
// is kept as the name "?N"). The comment lines before the statement are
// dropped (the statement then begins with its keyword, where claimBounds
// puts MySQL's hints); text in quotes (strings, `names`) and other
// comments are left as they are.
func compile(query string) *namedQuery {
	var b strings.Builder
	st := &namedQuery{}
	for strings.HasPrefix(query, "--") {
		_, query, _ = strings.Cut(query, "\n")
	}
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(query) && query[j] != c {
				if query[j] == '\\' {
					j++
				}
				j++
			}
			b.WriteString(query[i:min(j+1, len(query))])
			i = j
		case c == '-' && strings.HasPrefix(query[i:], "-- "):
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				j = len(query) - i
			}
			b.WriteString(query[i : i+j])
			i += j - 1
		case c == '?' && i+1 < len(query) && '1' <= query[i+1] && query[i+1] <= '9':
			j := i + 1
			for j < len(query) && '0' <= query[j] && query[j] <= '9' {
				j++
			}
			st.names = append(st.names, query[i:j])
			b.WriteByte('?')
			i = j - 1
		case c == ':' && i+1 < len(query) && isNameByte(query[i+1]) && (i == 0 || query[i-1] != ':'):
			j := i + 1
			for j < len(query) && isNameByte(query[j]) {
				j++
			}
			st.names = append(st.names, query[i+1:j])
			b.WriteByte('?')
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	st.text = b.String()
	return st
}

func isNameByte(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// args orders given by the statement's parameters: a sql.NamedArg for a
// :name, the others, in order, for ?1, ?2, ... A parameter without an
// argument panics, as a programming error.
func (st *namedQuery) args(given []any) []any {
	var positional []any
	named := map[string]any{}
	for _, a := range given {
		if n, ok := a.(sql.NamedArg); ok {
			named[n.Name] = n.Value
		} else {
			positional = append(positional, a)
		}
	}
	out := make([]any, len(st.names))
	for i, name := range st.names {
		var found bool
		if n, err := strconv.Atoi(strings.TrimPrefix(name, "?")); err == nil {
			found = n <= len(positional)
			if found {
				out[i] = positional[n-1]
			}
		} else {
			out[i], found = named[name]
		}
		if !found {
			panic(fmt.Sprintf("mysql: no argument %s for %.60q", name, st.text))
		}
	}
	return out
}

// stmt returns the named query name, compiled.
func (s *Store) stmt(name string) *namedQuery {
	if st, ok := s.stmts.Load(name); ok {
		return st.(*namedQuery)
	}
	st, _ := s.stmts.LoadOrStore(name, compile(s.sql.Get(name)))
	return st.(*namedQuery)
}

// querier is what runs statements: the store's handle, or a transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// execN runs the named statement name on q and returns the rows it changed.
func (s *Store) execN(ctx context.Context, q querier, name string, args ...any) (int64, error) {
	st := s.stmt(name)
	res, err := q.ExecContext(ctx, st.text, st.args(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// query runs the named query name on q.
func (s *Store) query(ctx context.Context, q querier, name string, args ...any) (*sql.Rows, error) {
	st := s.stmt(name)
	return q.QueryContext(ctx, st.text, st.args(args)...)
}

// queryRow runs the named query name on q, for one row.
func (s *Store) queryRow(ctx context.Context, q querier, name string, args ...any) *sql.Row {
	st := s.stmt(name)
	return q.QueryRowContext(ctx, st.text, st.args(args)...)
}

// exec runs the named statement name in a transaction of its own and
// returns the number of rows it changed.
func (s *Store) exec(ctx context.Context, name string, args ...any) (int, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = s.execN(ctx, tx, name, args...)
		return err
	})
	return int(n), err
}
