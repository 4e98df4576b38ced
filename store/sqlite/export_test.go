package sqlite

// Query returns the text of a named query, its table names filled in, for
// tests that EXPLAIN it.
func (s *Store) Query(name string) string { return s.sql.Get(name) }
