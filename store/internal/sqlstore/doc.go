// Package sqlstore is the machinery the SQL stores (store/postgres,
// store/sqlite, store/mysql) share, written once: the named-query loader,
// the migration runner, the steps of the inbox (store.Inbox), the
// dead-letter operations (store.DeadLetters: pages, batches, grouping by
// error), and, for the stores on database/sql, the producers' insert
// (Enqueue). A
// store brings its SQL files and what really differs between databases
// (its driver's transaction type, parameter syntax, clock, how a statement
// reports "no row"), through the small interfaces declared here:
// Transactor, MigrationDialect, InboxTxSQL, InboxSQL, DeadLetterSQL and
// EnqueueSQL.
//
// It lives under store/internal because only stores may use it: it is not
// part of postbox's API.
package sqlstore
