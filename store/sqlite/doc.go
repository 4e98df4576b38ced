// Package sqlite is the SQLite store of postbox, the embedded default: the
// outbox and inbox tables in one database file, their embedded migrations,
// the relay's claim and settle statements, in-process wake-ups, and the
// consumer's inbox (a store's Driver is an inbox.Store[*sql.Tx]). It uses
// modernc.org/sqlite, a pure-Go SQLite: no cgo.
//
// # Use
//
//	s, err := sqlite.Open(ctx, "app.db", sqlite.Config{})
//	...
//	defer s.Close()
//	if _, err := s.Migrate(ctx); err != nil { ... }
//
//	tx, err := s.DB().BeginTx(ctx, nil)
//	// ... insert the business rows with tx ...
//	err = s.EnqueueTx(ctx, tx, postbox.Event{EventType: "order.created", Payload: body})
//	// ...
//	err = tx.Commit() // the relay of this process wakes now
//
// The relay, like packages endpoint, relay/presence and inbox, takes the
// store's Driver, its engine's side, whose methods applications do not
// call:
//
//	r, err := relay.New(relay.Config{Store: s.Driver(), Sink: sink})
//
// The tables keep the columns, meanings and status words of the PostgreSQL
// store, with the same migration numbers, so the article's plain
//
//	insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key)
//	values ('order', '42', 'order.created', '{"order_id": 42}', 'order.created:42');
//
// works unchanged, from any program with SQLite 3.9 or later. SQLite types:
// ids are canonical lower-case UUID text (a time-ordered UUIDv7 made in SQL
// when left out), JSON is text checked by json_valid, times are INTEGER
// microseconds since the Unix epoch (checked to be integers), and seq is the
// rowid (AUTOINCREMENT: never reused). The tables are not STRICT: since
// migration 0008 a trigger refuses at insert the outbox rows that break
// the bounds PostgreSQL checks (counts, times from year 1 to 9999, text
// that is text), and the store reads every row defensively, a row it
// cannot read failing alone (docs/guarantees.md, "What a row can do to the
// others").
//
// # Inbox
//
// At the consumer, the same Store applies each incoming event once, its
// inbox row and the handler's business rows in one transaction of DB():
//
//	ib := inbox.New(s.Driver())
//	out, err := ib.Process(ctx, ev, func(ctx context.Context, tx *sql.Tx, ev *inbox.Event) error {
//		_, err := tx.ExecContext(ctx, "insert into shipments (order_id) values (?)", orderID)
//		return err
//	})
//
// The tables are inbox_events (the article's, one row per event id) and
// inbox_sequences (the last applied sequence number of each aggregate, for
// ordered events), from migration 0002 as in PostgreSQL; package inbox
// documents the behaviour. The handler runs in a read-write transaction, so
// it holds the write lock (below) until it returns: keep it to database
// work, and do not begin another write transaction of DB() inside it (use
// its tx, for EnqueueTx as well). Deliveries of one event at once take turns
// on that lock, and each sees the row its predecessor committed: the first
// runs the handler, the others report a duplicate (or take the event over
// if the first one failed). The same holds between processes, through
// SQLite's lock.
//
// # Differences from PostgreSQL
//
// One claimer at a time. SQLite has one writer at a time and no FOR UPDATE
// SKIP LOCKED: a claim is a write transaction, so claims, settles and
// producers' transactions take turns. Several relays, in one process or
// several, still never share an event, but they do not claim in parallel:
// one relay is the sensible deployment.
//
// In-process wake-ups, polling otherwise. There is no LISTEN/NOTIFY. The
// store's connections notice committed inserts into the outbox, whoever
// made them through DB() (Enqueue, EnqueueTx, plain SQL), and wake the
// listeners of the same *Store (Listen) once the transaction commits: a
// relay logs "listening for new events on in-process signal ...". A
// relay in another process, or events written through another handle, are
// caught by the relay's poll (or by Notify, called after such a commit).
//
// Writers queue. Read-write transactions begin with BEGIN IMMEDIATE, so they
// wait for the write lock when they begin instead of failing with
// SQLITE_BUSY at their first write, and those of one Store wait
// for each other in arrival order (up to Config.BusyTimeout) before SQLite
// sees them; between processes SQLite's busy timeout arbitrates. Reads run
// beside the writer (WAL mode).
//
// A failed statement does not abort the transaction. An inbox handler that
// ignores one and returns nil commits whatever else it wrote, where
// PostgreSQL would refuse the commit: return the error.
//
// # Durability
//
// Every connection runs in WAL mode with PRAGMA synchronous set by
// Config.Synchronous, NORMAL by default. With WAL and NORMAL a committed
// transaction survives a crash of the process, and the database is never
// corrupted, but a power loss or an operating system crash may undo the
// transactions committed since the last checkpoint: the business rows and
// their events go away together, yet events of theirs may already have been
// delivered. Choose FULL (an fsync at every commit) when that matters more
// than write throughput.
package sqlite
