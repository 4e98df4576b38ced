package bench

import "strings"

// SQL of the scenarios. "{outbox}" and "{orders}" are replaced by the quoted
// names of the scratch outbox table and business table; "{schema}" by the
// quoted scratch schema.

// PostgreSQL.
const (
	// pgFill writes the events $1..$2 of a backlog with the article's
	// plain-SQL insert: ~110-byte payloads, ids and every other column
	// from the table's defaults. Event g belongs to aggregate
	// order-(g mod $3): with $3 above every g, distinct aggregates; with
	// fewer, every aggregate's events interleave with every other's
	// (ordered's backlog).
	pgFill = `insert into {outbox} (aggregate_type, aggregate_id, event_type, payload)
select 'order', 'order-' || (g % $3::bigint), 'order.created',
       jsonb_build_object('order_id', g, 'customer_id', 'customer-' || (g % 9973),
                          'amount_cents', (g * 7919) % 100000, 'currency', 'EUR',
                          'items', 1 + g % 5, 'channel', 'web')
from generate_series($1::bigint, $2::bigint) as g`

	// pgFillDelivered writes the events $1..$2 of pgFill as delivered and
	// kept: done, processed an hour ago (retention's backlog).
	pgFillDelivered = `insert into {outbox} (aggregate_type, aggregate_id, event_type, payload, status, processed_at)
select 'order', 'order-' || g, 'order.created',
       jsonb_build_object('order_id', g, 'customer_id', 'customer-' || (g % 9973),
                          'amount_cents', (g * 7919) % 100000, 'currency', 'EUR',
                          'items', 1 + g % 5, 'channel', 'web'),
       'done', now() - interval '1 hour'
from generate_series($1::bigint, $2::bigint) as g`

	// pgOutboxBytes is the size of the outbox table $1 with its indexes
	// and TOAST: of its partitions, when it is partitioned.
	pgOutboxBytes = `select coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
from pg_class c
where c.oid = to_regclass($1) or c.oid in (select inhrelid from pg_inherits where inhparent = to_regclass($1))`

	// pgRawDelete is the raw-SQL baseline (a): one batch of due events
	// taken and deleted in one statement.
	pgRawDelete = `delete from {outbox}
where id in (
  select id from {outbox}
  where status = 'pending' and available_at <= now()
  order by available_at, seq
  limit 256
  for update skip locked)`

	// pgRawUpdate is the raw-SQL baseline (b): the same selection, marked
	// done instead of deleted.
	pgRawUpdate = `update {outbox} set status = 'done', processed_at = now()
where id in (
  select id from {outbox}
  where status = 'pending' and available_at <= now()
  order by available_at, seq
  limit 256
  for update skip locked)`

	// pgCreateOrders is the business table of the write-overhead scenario.
	pgCreateOrders = `create table {orders} (
  id     bigint generated always as identity primary key,
  amount bigint not null)`

	// pgInsertOrder is one business change.
	pgInsertOrder = `insert into {orders} (amount) values ($1) returning id`

	// pgCreateReservations is the business table of the inbox scenario:
	// the warehouse example's.
	pgCreateReservations = `create table {reservations} (
  event_id   uuid not null,
  order_id   uuid not null,
  amount     bigint not null,
  created_at timestamptz not null default now())`

	// pgInsertReservation is the inbox scenario's handler: one row.
	pgInsertReservation = `insert into {reservations} (event_id, order_id, amount) values ($1, $2, $3)`

	// pgInsertInbox is the inbox row of the inbox scenario's pgx client:
	// the article's insert, the columns the inbox's handler writes.
	pgInsertInbox = `insert into {inbox} (id, handler_status, processed_at, payload, signature, event_type, aggregate_type, aggregate_id, attempts)
values ($1, 'done', now(), $2::jsonb, $3, $4, $5, $6, 1)
on conflict (id) do nothing`

	// pgCountEvents counts the events of an outbox: bloat's held
	// snapshot is taken by this read.
	pgCountEvents = `select count(*) from {outbox}`

	// pgSchemaTables lists the tables of a scratch schema, to vacuum them
	// all whatever the store keeps in it.
	pgSchemaTables = `select tablename from pg_tables where schemaname = $1 order by tablename`

	// pgVacuumAnalyze is run on every table of a filled scratch schema.
	pgVacuumAnalyze = `vacuum analyze {table}`

	// pgCheckpoint starts every measure with the same amount of dirty
	// buffers (it needs superuser or pg_checkpoint; skipped otherwise).
	pgCheckpoint = `checkpoint`

	// pgDropSchema drops a scratch schema with everything in it.
	pgDropSchema = `drop schema if exists {schema} cascade`

	// pgLeftovers lists the scratch schemas of a run, the replication
	// slots and publications of its WAL-mode scratch outboxes (named
	// postbox_ and the schema), and its scratch databases (sources').
	pgLeftovers = `select nspname from pg_namespace where nspname like $1
union all
select 'replication slot ' || slot_name from pg_replication_slots where slot_name like 'postbox\_' || $1
union all
select 'publication ' || pubname from pg_publication where pubname like 'postbox\_' || $1
union all
select 'database ' || datname from pg_database where datname like $1
order by 1`

	// pgBackendPIDs are the server processes of the connections opened
	// under one application_name (those of a `postbox relay` process, for
	// its idle CPU).
	pgBackendPIDs = `select pid from pg_stat_activity where application_name = $1`

	// pgServerVersion names the server.
	pgServerVersion = `select current_setting('server_version')`

	// pgSettings reads the settings the report shows.
	pgSettings = `select name, current_setting(name) from pg_settings where name = any($1) order by name`
)

// SQLite. Times are INTEGER microseconds since the Unix epoch, as in the
// store's schema.
const (
	// liteFill writes the events ?1..?2 of a backlog with the article's
	// plain-SQL insert, event n of aggregate order-(n mod ?3) (see pgFill).
	liteFill = `with recursive g(n) as (select ?1 union all select n + 1 from g where n < ?2)
insert into {outbox} (aggregate_type, aggregate_id, event_type, payload)
select 'order', 'order-' || (n % ?3), 'order.created',
       json_object('order_id', n, 'customer_id', 'customer-' || (n % 9973),
                   'amount_cents', (n * 7919) % 100000, 'currency', 'EUR',
                   'items', 1 + n % 5, 'channel', 'web')
from g`

	// liteRawDelete is pgRawDelete without FOR UPDATE SKIP LOCKED, which
	// SQLite does not have (its one writer makes the batch exclusive);
	// ?1 is now.
	liteRawDelete = `delete from {outbox}
where id in (
  select id from {outbox}
  where status = 'pending' and available_at <= ?1
  order by available_at, seq
  limit 256)`

	// liteRawUpdate is pgRawUpdate for SQLite; ?1 is now.
	liteRawUpdate = `update {outbox} set status = 'done', processed_at = ?1
where id in (
  select id from {outbox}
  where status = 'pending' and available_at <= ?1
  order by available_at, seq
  limit 256)`

	// liteCreateOrders is the business table of the write-overhead
	// scenario.
	liteCreateOrders = `create table {orders} (
  id     integer primary key,
  amount integer not null)`

	// liteInsertOrder is one business change.
	liteInsertOrder = `insert into {orders} (amount) values (?1) returning id`

	// liteAnalyze refreshes the planner's statistics before a measure.
	liteAnalyze = `analyze`

	// liteCheckpoint empties the write-ahead log before a measure.
	liteCheckpoint = `pragma wal_checkpoint(truncate)`

	// liteVersion names the library.
	liteVersion = `select sqlite_version()`
)

// MariaDB and MySQL. Parameters are "?", in the order they appear.
const (
	// myFill writes the events ?2..?3 of a backlog with the article's
	// plain-SQL insert, event n of aggregate order-(n mod ?1) (see pgFill):
	// the numbers come from a cross join of digits (fillDigits of them),
	// as a recursive CTE is bounded by the server's settings
	// (max_recursive_iterations, cte_max_recursion_depth: 1000 on some).
	// The ids are the store's trigger's.
	myFill = `insert into {outbox} (aggregate_type, aggregate_id, event_type, payload)
with d(d) as (select 0 union all select 1 union all select 2 union all select 3 union all select 4
              union all select 5 union all select 6 union all select 7 union all select 8 union all select 9)
select 'order', concat('order-', g.n % ?), 'order.created',
       json_object('order_id', g.n, 'customer_id', concat('customer-', g.n % 9973),
                   'amount_cents', (g.n * 7919) % 100000, 'currency', 'EUR',
                   'items', 1 + g.n % 5, 'channel', 'web')
from (select ? + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d as n
      from d a cross join d b cross join d c cross join d e cross join d f) g
where g.n <= ?
order by g.n`

	// myRawDelete is pgRawDelete in MySQL: the due pending events taken in
	// the order of the claim's index, 256 of them, by a derived table (a
	// LIMIT in an IN subquery is refused), then deleted by primary key;
	// no SKIP LOCKED (one client drains). The single-table form, "delete
	// from t where status = 'pending' ... order by ... limit 256", is no
	// baseline: MariaDB 10.11 plans it as a filesort of every pending row,
	// ~0.4 s a statement on a backlog of 200,000 (700 events/s).
	myRawDelete = `delete o from {outbox} o
join (select seq from {outbox}
      where status = 'pending' and available_at <= utc_timestamp(6)
      order by available_at, seq
      limit 256) x using (seq)`

	// myRawUpdate is pgRawUpdate in MySQL, with myRawDelete's selection.
	myRawUpdate = `update {outbox} o
join (select seq from {outbox}
      where status = 'pending' and available_at <= utc_timestamp(6)
      order by available_at, seq
      limit 256) x using (seq)
set o.status = 'done', o.processed_at = utc_timestamp(6)`

	// myCreateOrders is the business table of the write-overhead scenario.
	myCreateOrders = `create table {orders} (
  id     bigint not null auto_increment primary key,
  amount bigint not null)`

	// myInsertOrder is one business change.
	myInsertOrder = `insert into {orders} (amount) values (?)`

	// myAnalyze refreshes the optimizer's statistics before a measure.
	myAnalyze = `analyze table {outbox}`

	// myLeftovers lists the scratch databases of a run.
	myLeftovers = `select schema_name from information_schema.schemata where schema_name like ? order by 1`

	// myServerVersion names the server.
	myServerVersion = `select version()`

	// mySettings reads the settings the report shows (mySettingNames).
	mySettings = `show global variables where variable_name in
  ('binlog_format', 'innodb_buffer_pool_size', 'innodb_flush_log_at_trx_commit', 'log_bin', 'max_connections', 'sync_binlog')`
)

// withTables fills the placeholders of query with the tables that table
// names (a store's Table method).
func withTables(query string, table func(name string) string) string {
	return strings.NewReplacer("{outbox}", table("outbox_events"), "{orders}", table("orders")).Replace(query)
}
