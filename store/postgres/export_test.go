package postgres

// DozeLock is the advisory-lock class of dozing relays, for the tests of
// package postgres_test.
const DozeLock = dozeLock

// Expand fills the placeholders of a query or migration, for tests.
func (s *Store) Expand(sql string) string { return s.expand(sql) }

// Query returns the text of a named query of queries.sql, for tests that
// EXPLAIN it.
func (s *Store) Query(name string) string { return s.sql.Get(name) }
