// Package mysql is the MySQL store of postbox, for MariaDB 10.6 or later
// and MySQL 8.0 or later: the outbox and inbox tables, their embedded
// migrations, the relay's claim and settle statements, wake-ups by polling,
// and the consumer's inbox (a store's Driver is an inbox.Store[*sql.Tx]). It
// uses github.com/go-sql-driver/mysql through database/sql.
//
// # Use
//
//	s, err := mysql.Open(ctx, "mysql://app:secret@db:3306/shop", mysql.Config{})
//	...
//	defer s.Close()
//	if _, err := s.Migrate(ctx); err != nil { ... }
//
//	tx, err := s.DB().BeginTx(ctx, nil)
//	// ... insert the business rows with tx ...
//	err = s.EnqueueTx(ctx, tx, postbox.Event{EventType: "order.created", Payload: body})
//	// ...
//	err = tx.Commit()
//
// Open takes a mysql:// URL or a go-sql-driver/mysql DSN
// (app:secret@tcp(db:3306)/shop), and forces on every connection what the
// store relies on: times read and written in UTC (time_zone '+00:00',
// parseTime), utf8mb4, and a strict sql_mode. String, and every error,
// name the server without the password. The relay, like packages endpoint,
// relay/presence and inbox, takes the store's Driver, its engine's side,
// whose methods applications do not call:
//
//	r, err := relay.New(relay.Config{Store: s.Driver(), Sink: sink})
//
// The tables keep the columns, meanings and status words of the PostgreSQL
// store, with the same migration numbers, so the article's plain
//
//	insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key)
//	values ('order', '42', 'order.created', '{"order_id": 42}', 'order.created:42');
//
// works unchanged. MySQL types: ids are CHAR(36) ascii, the canonical
// lower-case text of a UUID (a time-ordered UUIDv7 made by a BEFORE INSERT
// trigger when left out), JSON columns are JSON (MariaDB: LONGTEXT checked
// by json_valid), times are DATETIME(6) in UTC (their defaults
// utc_timestamp(6), whatever the session's time zone), seq is a BIGINT
// AUTO_INCREMENT, texts are utf8mb4 with the binary collation. The dedup
// key, which may be longer than an index key, is unique by its SHA-256.
// Since migration 0008, CHECK constraints refuse at insert the outbox rows
// that break the bounds PostgreSQL checks (counts from 0 to 1000000000,
// times from year 1, names without NUL), and the store reads every row
// defensively, a row it cannot read failing alone (docs/guarantees.md,
// "What a row can do to the others").
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
// Deliveries of one event at once queue on its row: a locking read (SELECT
// ... FOR UPDATE) of the row that is there, or the insert of the one that
// is not; each sees the row its predecessor committed. When the first
// delivery's handler fails and its insert rolls back, InnoDB may break the
// deadlock of the others on the gap the row leaves: the losers run their
// step again (sqlstore.Inbox.RetryTakeOn).
//
// # Differences from PostgreSQL
//
// Wake-ups by polling. MySQL has no LISTEN/NOTIFY. Listen polls the
// outbox's newest seq (SELECT seq ... ORDER BY seq DESC LIMIT 1, read from
// the end of the primary key alone): every 5 ms while it keeps changing,
// backing off to every 250 ms when nothing arrives, notifying when it
// changed; Enqueue and Requeue of this Store wake it at once. A relay logs
// what it listens on: "poll of the outbox's newest seq ...". Producers pay
// nothing (there is no Dozer). Waking relays at commit time would take a
// binlog stream: a replication client (go-mysql's canal, say) reading the
// row events of outbox_events, which needs binlog_format=ROW, a user with
// REPLICATION SLAVE and REPLICATION CLIENT, and a server id of its own;
// that is left for later, as PostgreSQL's WAL mode was built after its
// LISTEN/NOTIFY.
//
// Claims. A claim is a transaction at READ COMMITTED: SELECT ... FOR UPDATE
// SKIP LOCKED takes the due events (so relays claiming at once skip each
// other's rows instead of waiting), an UPDATE by seq leases them, and a
// SELECT reads them back: MySQL has no UPDATE ... RETURNING (MariaDB has
// RETURNING for INSERT and DELETE only). The payloads' bytes
// (ClaimParams.MaxBytes) are summed in Go. As on PostgreSQL, a claim whose
// context has a deadline is bounded on the server within it: each
// statement gets six tenths of the time left (MariaDB: SET STATEMENT
// max_statement_time=... FOR; MySQL: the MAX_EXECUTION_TIME hint, which
// bounds SELECTs only) and innodb_lock_wait_timeout three tenths (at least
// a second), so a claim that outlives its caller fails there and leases
// nothing. Open tells MariaDB from MySQL once, from version().
//
// Ordered mode. An ordered claim first reads, without a lock, the heads of
// the aggregates (the oldest unfinished event of each, due), then locks
// those still pending with SKIP LOCKED: a head cannot stop being one
// meanwhile. It takes heads only (ClaimParams.AggregateRun is not used),
// as the SQLite store does. The endpoints' lanes find the heads of an
// endpoint's aggregates the same way, in one statement, where the other
// stores walk the aggregates' index.
//
// Several transactions, no single writer. Every step of an endpoint's lane
// locks the endpoint's row first: the steps of one endpoint take turns
// (the lane's leases are rows that list the deliveries they hold), those of
// different endpoints run at once. The store's other writes rely on row
// locks. A failed statement undoes itself, not the transaction: an inbox
// handler that ignores one and returns nil commits whatever else it wrote,
// where PostgreSQL would refuse the commit; return the error.
//
// Schema changes are not transactional. MySQL commits each DDL statement
// on its own: Migrate serializes its runs with a named lock (GET_LOCK)
// instead of a transaction, and a migration that fails halfway leaves its
// first statements applied, unrecorded (the error names it).
//
// Some things differ in the SQL, not in what they do. The history's
// type globs (path.Match) have no SQL function here: HistoryRead filters
// them in Go, reading pages until it has a page of matches, and RequeueKept
// reads the page and requeues it (sqlstore.RequeueKept) instead of one
// UPDATE over the page. LastSeq is InnoDB's next AUTO_INCREMENT less one,
// from information_schema. An attempt whose time DATETIME cannot hold
// (before year 1, after 9999) keeps the first or last time it holds and
// says where it was (endpoint_attempts.at_range).
//
// What store/internal/sqlstore cannot share. The migration runner,
// queries loader, inbox steps, dead-letter operations, history checks and
// retention steps are sqlstore's. The SQL is the store's own: MySQL has no
// partial indexes, no RETURNING, no json_each (JSON_TABLE instead), no
// row-value comparisons that use an index, and no named parameters in its
// driver (named.go rewrites the store's :name and ?N parameters to "?").
// The rows are scanned by the store, as their types (DATETIME, JSON as
// bytes) differ from the other stores'.
package mysql
