package inbox

import "github.com/postbox-go/postbox/store"

// Store is what the inbox needs of a database: store.Inbox, which
// documents the contract of each method. TTx is the store's transaction
// type, which handlers receive (pgx.Tx for store/postgres, *sql.Tx for
// store/sqlite). The stores implement it on their drivers: pass
// inbox.New a (*postgres.Store).Driver(). Every implementation passes the
// conformance suite in postboxtest/inboxtest.
type Store[TTx any] = store.Inbox[TTx]
