// Package sqlstore is the machinery the SQL stores (store/postgres,
// store/sqlite) share, written once: the named-query loader, the migration
// runner, the steps of the inbox (store.Inbox), and the dead-letter
// operations (store.DeadLetters: pages, batches, grouping by error). A
// store brings its SQL files and what really differs between databases
// (its driver's transaction type, parameter syntax, clock, how a statement
// reports "no row"), through the small interfaces declared here:
// Transactor, MigrationDialect, InboxTxSQL, InboxSQL and DeadLetterSQL.
//
// It lives under store/internal because only stores may use it: it is not
// part of postbox's API.
package sqlstore
