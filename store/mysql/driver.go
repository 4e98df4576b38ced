package mysql

import (
	"database/sql"

	"github.com/postbox-go/postbox/store"
)

// Driver is the engine's side of the store: what packages relay, endpoint,
// relay/presence and inbox call (claim, settle, leases, the endpoints'
// lanes and deliveries, the relays' heartbeats, the inbox's steps).
// Applications hand it to those packages and do not call its methods:
//
//	relay.Config{Store: db.Driver()}
//	endpoint.SupervisorConfig{Store: db.Driver()}
//	presence.Config{Store: db.Driver()}
//	inbox.New(db.Driver())
//
// It embeds the Store, so it has the Store's methods too and satisfies the
// engine's contracts whole (store.Outbox, store.Endpoints, store.Presence,
// store.Inbox[*sql.Tx]). Like River's driver it may change between minor
// versions; the Store's own methods do not.
type Driver struct {
	*Store
}

// Driver returns the store's engine side, for the packages that run the
// relay, the endpoints and the inbox (see Driver).
func (s *Store) Driver() *Driver { return &Driver{Store: s} }

// The Store holds what users call; its Driver completes the engine's
// contracts.
var (
	_ store.Producer[*sql.Tx] = (*Store)(nil)
	_ store.Inspector         = (*Store)(nil)
	_ store.DeadLetters       = (*Store)(nil)
	_ store.PresenceReader    = (*Store)(nil)
	_ store.InboxReader       = (*Store)(nil)

	_ store.Outbox         = (*Driver)(nil)
	_ store.Endpoints      = (*Driver)(nil)
	_ store.Presence       = (*Driver)(nil)
	_ store.Inbox[*sql.Tx] = (*Driver)(nil)
)
