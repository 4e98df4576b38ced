// Package bench measures postbox against its performance goals: the drain
// rate of a backlog to a no-op sink, with metrics off and on, beside
// raw-SQL drains of the same backlog, signed webhooks to a local receiver
// beside the raw signed-HTTP limit, commit-to-delivery latency at steady
// rates, the write overhead of an event in a business transaction, the
// drain rate and resident memory of a relay as the backlog grows; the
// drain, latency and write overhead in WAL mode too (relay --wal); the
// inbox's webhook handler beside bare pgx transactions of the same inserts;
// and the outbox's history: the drain under a long-open snapshot (bloat),
// on the plain and the partitioned outbox, the time retention takes to
// remove delivered events (DELETE batches against partition drops), and
// the rate of a replay against the drain's; and ordered delivery against
// unordered of a backlog spread over many aggregates (ordered).
// It backs "postbox bench".
//
// Every scenario works in scratch outboxes of its own: PostgreSQL schemas
// named postbox_bench_<run>_<label>, SQLite files beside the path given, or
// MariaDB/MySQL databases postbox_bench_<run>_<label> on the server given,
// created and migrated with the stores' own Migrate and dropped at the end
// of the run (Config.Keep keeps them). Backlogs are filled with the
// article's plain-SQL insert, so the figures measure whatever the stores and
// the relay do today, and a backlog counts as drained when the store's own
// Stats show nothing pending or processing.
//
// The relay runs in one of two ways, and every measure says which
// (Measure.Relay):
//
//   - RelayProcess: the webhook, latency, latency-wal (with --wal),
//     scale, scaling and endpoints scenarios (and the broker scenarios'
//     sink drain, and two of ordered's four drains) run the command users run, `postbox relay`, as a child
//     process (Config.Command; by default this executable), with --db and
//     --schema of the scratch outbox, --webhook-url of a local receiver, a
//     new whsec_ --webhook-secret, --log-level warn, and --concurrency in
//     scaling, which varies it (brokers: --sink; ordered: --ordered, in
//     one of its two drains). The endpoints scenario
//     runs `postbox relay --endpoints` instead of the webhook flags, its
//     endpoints registered beforehand with `postbox endpoints add` (their
//     defaults, a secret it generates), with `endpoints add
//     --allow-private` when the binary has that flag, or else the
//     relay's --allow-private-endpoints, read from their --help. Every
//     other flag is at its default: the environment variables postbox
//     reads flags from are left out of the child's environment. Its log
//     goes to the progress writer. The events published are the distinct
//     event ids that reached the receiver; the peak resident memory is
//     the child's VmHWM, read just before it is stopped with SIGTERM
//     (SIGKILL if it has not exited 30 s later). A child that exits on
//     its own fails the run.
//     On PostgreSQL its --db URL has application_name set to
//     <run>_relay, which finds its server processes for the idle CPU
//     measure.
//   - RelayInProcess: the drain-noop and write-overhead scenarios
//     and their WAL-mode counterparts, bloat and replay (and the other two
//     of ordered's drains) run the relay package in the bench's own
//     process, with only Store, Sink and Logger set (and Stream, the
//     store's WAL, in WAL mode; Retention in replay, which keeps the
//     delivered events to replay them; Ordered in ordered): the library path,
//     which has the no-op sink that `postbox relay` lacks. They do not
//     tell what the command does. Retention runs no relay: it calls the
//     store's Expire as a relay's retention does.
//
// A partitioned scratch outbox (bloat, retention) is made as `postbox
// migrate --partitioned` makes it: Migrate, then the PostgreSQL store's
// Partition (partitions of a day in bloat, of 10 s in retention, whose
// backlog must end in partitions past their range).
//
// An ordered scratch outbox is made as `postbox migrate --ordered` makes
// it: Migrate, then on PostgreSQL the store's MigrateOrdered.
//
// WAL-mode scratch outboxes have a replication slot and a publication named
// postbox_<schema>; they are dropped with the schema, and Leftovers lists
// them.
//
// The kafka scenario drains to the cluster of Config.KafkaBrokers. Only a
// build with -tags kfake (kafka_kfake.go) links franz-go's in-memory
// cluster and runs it in the bench's process when no brokers are given;
// the default build (kafka_nokfake.go) refuses the run instead, so that
// the postbox users run carries no test-only module.
//
// The SQL the scenarios run is in sql.go, in named constants.
package bench
