package storetest

import (
	"context"
	"reflect"
	"testing"

	"github.com/postbox-go/postbox/postboxtest/inboxtest"
	"github.com/postbox-go/postbox/store"
)

// Driver is what the suites call of a store: its driver (the store's
// Driver method), which holds every contract of the engine and, through
// the store it embeds, the store's own methods.
type Driver[TTx any] interface {
	store.Outbox
	store.Endpoints
	store.Presence
	store.Inbox[TTx]
	store.InboxReader
}

// Harness is a store under test, for Exercise. TTx is the store's
// transaction type (pgx.Tx, *sql.Tx).
type Harness[TTx any] struct {
	// Dialect is "postgres", "sqlite" or "mysql": the SQL of the edge values the
	// suite of hostile rows writes (see Edges).
	Dialect string
	// New returns a fresh store for one test: migrated for what p asks
	// (p.Ordered: ordered claims, PostgreSQL's MigrateOrdered; the suites
	// that claim in ordered mode ask), its tables empty, with a business
	// table beside its inbox. The test's cleanup drops it.
	New func(t *testing.T, p store.SchemaParams) Subject[TTx]
}

// Subject is one fresh store under test, and what a plain-SQL producer and
// an inbox handler have of it.
type Subject[TTx any] struct {
	// Store is the store as applications hold it (*postgres.Store): its
	// own methods must leave the engine's to Driver.
	Store any
	// Driver is the store's driver (Store.Driver()).
	Driver Driver[TTx]
	// Exec runs one statement, in which a table's name in braces
	// ("{outbox_events}", "{inbox_events}", "{endpoints}", ...) names the
	// store's table.
	Exec func(ctx context.Context, query string, args ...any) error
	// Loosen drops the bounds that migration 0008 puts on rows (checks,
	// insert triggers), so that the test writes rows as an older schema
	// took them: the store must read them defensively.
	Loosen func(t *testing.T)
	// Effect writes one business row named key in tx, and Effects counts
	// the committed ones (see inboxtest.Backend).
	Effect  func(ctx context.Context, tx TTx, key string) error
	Effects func(ctx context.Context, key string) (int, error)
}

// Exercise runs every conformance suite on the stores h makes, each
// test on a fresh one: the outbox (claims, settles, leases, reads, dead
// letters), the rows a plain-SQL producer may write, the history (reads,
// replays, retention with a Keep), the webhook endpoints
// and their lanes, the relays' presence, the inbox (postboxtest/inboxtest)
// and what tools read of it, and the store's surface (the engine's
// methods on its driver alone). A store's test calls it once:
//
//	func TestConformance(t *testing.T) {
//		storetest.Exercise(t, storetest.Harness[pgx.Tx]{Dialect: "postgres", New: newSubject})
//	}
func Exercise[TTx any](t *testing.T, h Harness[TTx]) {
	ordered := store.SchemaParams{Ordered: true}
	driver := func(t *testing.T) Driver[TTx] { return h.New(t, store.SchemaParams{}).Driver }
	t.Run("Surface", func(t *testing.T) { testSurface(t, h.New(t, store.SchemaParams{})) })
	t.Run("Outbox", func(t *testing.T) {
		runOutbox(t, func(t *testing.T) store.Outbox { return h.New(t, ordered).Driver })
	})
	t.Run("HostileRows", func(t *testing.T) {
		runHostile(t, func(t *testing.T) raw {
			s := h.New(t, ordered)
			return raw{Outbox: s.Driver, Dialect: h.Dialect, Exec: s.Exec, Loosen: s.Loosen}
		})
	})
	t.Run("History", func(t *testing.T) {
		runHistory(t, func(t *testing.T) raw {
			s := h.New(t, store.SchemaParams{})
			return raw{Outbox: s.Driver, Dialect: h.Dialect, Exec: s.Exec, Loosen: s.Loosen}
		})
	})
	t.Run("Endpoints", func(t *testing.T) {
		runEndpoints(t, func(t *testing.T) store.Endpoints { return driver(t) })
	})
	t.Run("Lane", func(t *testing.T) {
		runLane(t, func(t *testing.T) store.Endpoints { return driver(t) })
	})
	t.Run("Presence", func(t *testing.T) {
		runPresence(t, func(t *testing.T) store.Presence { return driver(t) })
	})
	t.Run("Inbox", func(t *testing.T) {
		inboxtest.Run(t, func(t *testing.T) *inboxtest.Backend[TTx] {
			s := h.New(t, store.SchemaParams{})
			return &inboxtest.Backend[TTx]{Store: s.Driver, Effect: s.Effect, Effects: s.Effects}
		})
	})
	t.Run("InboxReader", func(t *testing.T) { runInboxReader(t, driver) })
}

// engineMethods are the methods of the engine's contracts (store.Outbox,
// store.Endpoints, store.Presence, store.Inbox) that applications do not
// call: every driver has them, and no store's own method set does.
var engineMethods = []string{
	"Claim", "Settle", "ExtendLease", "ReclaimExpired", "Expire", "Listen", "Release",
	"EndpointLane", "DeliveryInsert", "DeliveryPending", "DeliveryDue", "AttemptInsert",
	"EndpointFailing", "EndpointRecovered", "EndpointBreaker",
	"PresenceBeat", "PresenceLeave", "PresencePrune",
	"InboxProcess", "InboxClaim", "InboxComplete", "InboxFail", "InboxDeleteProcessedBefore",
}

// adminMethods are the methods of store.Endpoints that administer
// endpoints (postbox endpoints calls them): the store applications hold
// has them all.
var adminMethods = []string{
	"EndpointCreate", "EndpointUpdate", "EndpointGet", "EndpointList", "EndpointSetState", "EndpointDelete",
	"EndpointRotateSecret", "EndpointSeal", "DeliveryCounts", "DeliveryList", "AttemptList",
	"DeliveryCountsAll", "AttemptSummary",
}

// driverOnly are engine steps that one store alone has, kept off its own
// method set too: PostgreSQL's OrderedReady.
var driverOnly = []string{"OrderedReady"}

// testSurface: the store applications hold lists none of the engine's
// methods, and the administration of endpoints; its driver has them all.
func testSurface[TTx any](t *testing.T, s Subject[TTx]) {
	user, driver := reflect.TypeOf(s.Store), reflect.TypeOf(s.Driver)
	if user == nil || user == driver {
		t.Fatalf("Subject.Store is %v, want the store itself, not its driver (%v)", user, driver)
	}
	for _, name := range engineMethods {
		if _, ok := driver.MethodByName(name); !ok {
			t.Errorf("the driver %v has no method %s", driver, name)
		}
	}
	for _, name := range adminMethods {
		if _, ok := user.MethodByName(name); !ok {
			t.Errorf("%v has no method %s: the administration of endpoints is the store's", user, name)
		}
	}
	for _, name := range append(engineMethods, driverOnly...) {
		if _, ok := user.MethodByName(name); ok {
			t.Errorf("%v has the engine's method %s: it belongs to its driver alone", user, name)
		}
	}
}
